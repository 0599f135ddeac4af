//! Real packets through the distributor: the pcap replay example's parser glue
//! and replay engine, on the committed loopback capture and on damaged or unusual inputs.

#[path = "../examples/pcap_replay/frames.rs"]
mod frames;
#[path = "../examples/pcap_replay/replay.rs"]
mod replay;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use etherparse::PacketBuilder;
use frames::{parse_frame, read_capture, Capture, Ingest, Link, Problem, Proto};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use proptest::prelude::*;
use replay::{replay, ReplayConfig};

/// Real traffic recorded on loopback by `scripts/capture_loopback.sh` (HTTP over IPv4 and
/// IPv6, a UDP echo exchange; snap length 96).
const LOOPBACK: &[u8] = include_bytes!("data/loopback.pcap");

fn cfg(workers: usize, laps: u32) -> ReplayConfig {
    ReplayConfig {
        workers,
        credit: 64,
        burst: 32,
        laps,
        pin: false,
        ordered: false,
        one_flow: false,
        stages: None,
    }
}

/// Replays `cap` and asserts every check held; returns the outcome.
fn replay_ok(cap: Capture, workers: usize, laps: u32) -> replay::Outcome {
    let ing = Ingest::new(&cap);
    let n = cap.frames.len() as u64 * u64::from(laps);
    let out = replay(Arc::new(cap), &ing, cfg(workers, laps), |_| {}).unwrap();
    assert!(out.ok(), "{out:?}");
    assert_eq!(out.returned, n);
    out
}

/// Laps of the committed capture: the whole capture twice under Miri, more natively.
const LAPS: u32 = if cfg!(miri) { 1 } else { 40 };

fn loopback() -> Capture {
    let cap = read_capture(LOOPBACK).unwrap();
    if cfg!(miri) {
        // The interpreter parses a frame in about a millisecond: the first 120 frames
        // (several whole connections of both address families) keep it within budget.
        let mut cap = cap;
        cap.frames.truncate(120);
        cap
    } else {
        cap
    }
}

fn write_pcap(link: DataLink, frames: &[&[u8]]) -> Vec<u8> {
    let header = PcapHeader {
        datalink: link,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(
            Duration::from_micros(i as u64),
            f.len() as u32,
            f,
        ))
        .unwrap();
    }
    w.into_writer()
}

fn tcp_frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, seq: u32) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(src, dst, 64)
        .tcp(sport, dport, seq, 1024);
    let mut v = Vec::new();
    b.write(&mut v, b"payload").unwrap();
    v
}

#[test]
#[cfg_attr(
    miri,
    ignore = "checks of the data through safe code; the interpreter takes minutes over the whole capture"
)]
fn committed_capture_is_real_mixed_traffic() {
    let cap = read_capture(LOOPBACK).unwrap();
    assert_eq!(cap.format, "pcap");
    assert!(cap.stopped.is_none(), "{:?}", cap.stopped);
    assert!(cap.frames.len() > 300, "{} frames", cap.frames.len());
    assert!(cap.frames.iter().all(|f| f.link == Link::Ethernet));
    let ing = Ingest::new(&cap);
    let [tcp, udp, ..] = ing.by_proto();
    assert!(tcp > 100 && udp > 10, "tcp {tcp} udp {udp}");
    assert_eq!(ing.by_problem(), [0, 0, 0], "the capture parses cleanly");
    let v6 = ing
        .parsed
        .iter()
        .filter(|p| matches!(p.flow, Some(k) if k.a.0.is_ipv6()))
        .count();
    assert!(v6 > 50, "IPv6 frames: {v6}");
    // Loopback addresses only.
    assert!(ing
        .parsed
        .iter()
        .filter_map(|p| p.flow)
        .all(|k| k.a.0.is_loopback() && k.b.0.is_loopback()));
    // Many connections, and both directions of each.
    assert!(ing.flow_frames.len() > 10);
    assert!(ing.dir_frames.len() >= 2 * ing.flow_frames.len() - 2);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "checks of the data through safe code; the interpreter takes minutes over the whole capture"
)]
fn every_flow_has_one_rss_hash_for_both_directions() {
    let cap = read_capture(LOOPBACK).unwrap();
    let mut hash: HashMap<frames::FlowKey, (u32, [bool; 2])> = HashMap::new();
    for i in 0..cap.frames.len() {
        let p = parse_frame(cap.frames[i].link, cap.data(i));
        let k = p.flow.unwrap();
        let e = hash.entry(k).or_insert((p.rss, [false; 2]));
        assert_eq!(e.0, p.rss, "frame {i}: one flow, two hashes");
        e.1[usize::from(p.dir)] = true;
    }
    let both = hash.values().filter(|(_, d)| d[0] && d[1]).count();
    assert!(
        both >= hash.len() - 2,
        "{both} of {} flows seen both ways",
        hash.len()
    );
}

#[test]
fn toeplitz_matches_the_microsoft_verification_vectors() {
    // Microsoft's RSS verification suite, IPv4: 66.9.149.187:2794 -> 161.142.100.80:1766.
    let key: Vec<u8> = (0..40)
        .map(|i| {
            let hex =
                "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa";
            u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()
        })
        .collect();
    let addrs = [66, 9, 149, 187, 161, 142, 100, 80];
    assert_eq!(frames::toeplitz(&key, &addrs), 0x323e_8fc2);
    let mut with_ports = addrs.to_vec();
    with_ports.extend_from_slice(&2794u16.to_be_bytes());
    with_ports.extend_from_slice(&1766u16.to_be_bytes());
    assert_eq!(frames::toeplitz(&key, &with_ports), 0x51cc_c178);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    #[test]
    fn table_toeplitz_equals_the_bitwise_definition(input in prop::collection::vec(any::<u8>(), 0..=36)) {
        prop_assert_eq!(
            frames::toeplitz_symmetric(&input),
            frames::toeplitz(&frames::SYMMETRIC_RSS_KEY, &input)
        );
    }

    #[test]
    fn rss_hash_is_symmetric(a in any::<[u8; 16]>(), b in any::<[u8; 16]>(), pa: u16, pb: u16, v4: bool) {
        let (x, y): (IpAddr, IpAddr) = if v4 {
            ([a[0], a[1], a[2], a[3]].into(), [b[0], b[1], b[2], b[3]].into())
        } else {
            (a.into(), b.into())
        };
        prop_assert_eq!(frames::rss_hash(x, y, pa, pb), frames::rss_hash(y, x, pb, pa));
    }

    /// Whatever the bytes, under every link type: no panic, and a TCP parse says so
    /// consistently.
    #[test]
    fn parse_frame_never_panics(data in prop::collection::vec(any::<u8>(), 0..128)) {
        for link in Link::ALL {
            let p = parse_frame(link, &data);
            prop_assert_eq!(p.tcp_seq.is_some(), p.proto == Proto::Tcp);
            prop_assert!(p.flow.is_some() || p.rss == 0);
        }
    }

    /// Whatever the bytes after a valid pcap header: reading never panics, and a damaged
    /// file keeps the frames before the damage.
    #[test]
    fn read_capture_never_panics(tail in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut file = write_pcap(DataLink::ETHERNET, &[&tcp_frame([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 3)]);
        file.extend_from_slice(&tail);
        let cap = read_capture(&file).unwrap();
        prop_assert!(!cap.frames.is_empty());
        let _ = read_capture(&tail);
    }
}

/// One elephant flow (every frame tagged alike) through an ordered distributor: both
/// workers share it, and every check (exactly once, capture order per flow direction,
/// TCP sequence numbers) holds; an atomic distributor keeps it on one worker.
#[test]
#[cfg_attr(miri, ignore)]
fn one_flow_spreads_over_both_workers_in_capture_order_when_ordered() {
    let cap = loopback();
    let ing = Ingest::new(&cap);
    let n = cap.frames.len() as u64 * u64::from(LAPS);
    let cap = Arc::new(cap);
    for ordered in [true, false] {
        let c = ReplayConfig {
            ordered,
            one_flow: true,
            ..cfg(2, LAPS)
        };
        let out = replay(Arc::clone(&cap), &ing, c, |_| {}).unwrap();
        assert!(out.ok(), "{out:?}");
        assert_eq!(out.returned, n);
        assert!(out.tcp_checked > 0);
        let least = *out.per_worker.iter().min().unwrap();
        if ordered {
            assert!(least * 5 >= n, "ordered shares {:?}", out.per_worker);
        } else {
            assert_eq!(least, 0, "atomic shares {:?}", out.per_worker);
        }
    }
}

/// The capture through pipelines: an ordered stage (flows spread over both workers),
/// then an atomic one, and atomic, ordered, atomic; every check (exactly once, capture
/// order per flow direction, TCP sequence numbers, every stage passed) holds at the end.
#[test]
#[cfg_attr(miri, ignore)]
fn the_capture_keeps_its_order_through_pipelines() {
    let cap = loopback();
    let ing = Ingest::new(&cap);
    let n = cap.frames.len() as u64 * u64::from(LAPS);
    let cap = Arc::new(cap);
    for list in ["oa", "aoa", "o"] {
        let c = ReplayConfig {
            stages: Some(replay::Stages::parse(list).unwrap()),
            ..cfg(2, LAPS)
        };
        let out = replay(Arc::clone(&cap), &ing, c, |_| {}).unwrap();
        assert!(out.ok(), "{list}: {out:?}");
        assert_eq!(out.returned, n);
        assert!(out.tcp_checked > 0);
    }
    assert!(replay::Stages::parse("ap").is_err());
    assert!(replay::Stages::parse("").is_err());
}

// Not under Miri (10-18 s interpreted): the parser and the replay have no unsafe code,
// and the distributor they drive runs under Miri in tests/distributor/guarantees.rs.
#[test]
#[cfg_attr(miri, ignore)]
fn committed_capture_replays_in_order_exactly_once_through_two_workers() {
    let out = replay_ok(loopback(), 2, LAPS);
    assert!(out.tcp_checked > 0);
    // Both workers got flows (the symmetric hash spreads connections).
    assert!(
        out.per_worker.iter().all(|&n| n > 0),
        "{:?}",
        out.per_worker
    );
}

// Not under Miri (10-18 s interpreted): the parser and the replay have no unsafe code,
// and the distributor they drive runs under Miri in tests/distributor/guarantees.rs.
#[test]
#[cfg_attr(miri, ignore)]
fn truncated_capture_replays_what_precedes_the_cut() {
    let whole = read_capture(LOOPBACK).unwrap();
    // Cut inside a record's bytes, 40 % into the file (8 % under Miri).
    let cut = &LOOPBACK[..LOOPBACK.len() * if cfg!(miri) { 2 } else { 10 } / 25 + 7];
    let cap = read_capture(cut).unwrap();
    let why = cap.stopped.clone().expect("the cut is reported");
    assert!(why.contains("pcap record"), "{why}");
    assert!(!cap.frames.is_empty() && cap.frames.len() < whole.frames.len());
    for i in 0..cap.frames.len() {
        assert_eq!(cap.data(i), whole.data(i));
    }
    replay_ok(cap, 2, if cfg!(miri) { 1 } else { 3 });
}

#[test]
fn not_a_capture_is_an_error() {
    assert!(read_capture(b"").is_err());
    assert!(read_capture(b"GET / HTTP/1.1\r\n\r\n").is_err());
    // A pcapng section header cut short.
    assert!(read_capture(&[0x0a, 0x0d, 0x0d, 0x0a, 1, 0, 0]).is_err());
}

#[test]
fn short_and_malformed_frames_are_counted_and_replayed() {
    let good = tcp_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80, 7);
    let mut bad_version = good.clone();
    bad_version[14] = 0x75; // IP version 7
    let frames: Vec<&[u8]> = vec![
        &good[..10],          // shorter than an Ethernet header
        &good[..14 + 12],     // cut inside the IPv4 header
        &good[..14 + 20 + 8], // cut inside the TCP header
        &bad_version,
        &good,
    ];
    let cap = read_capture(&write_pcap(DataLink::ETHERNET, &frames)).unwrap();
    let ing = Ingest::new(&cap);
    let problems: Vec<Option<Problem>> = ing.parsed.iter().map(|p| p.problem).collect();
    assert_eq!(
        problems,
        [
            Some(Problem::TooShort),
            Some(Problem::TooShort),
            Some(Problem::TooShort),
            Some(Problem::Malformed),
            None
        ]
    );
    // The frame cut inside TCP still has its addresses (a flow), not its ports.
    assert!(ing.parsed[2].flow.is_some() && ing.parsed[2].tcp_seq.is_none());
    assert_eq!(ing.parsed[4].tcp_seq, Some(7));
    replay_ok(cap, 2, 5);
}

#[test]
fn unknown_link_type_is_counted_and_replayed() {
    let f = tcp_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80, 7);
    let cap = read_capture(&write_pcap(DataLink::USER0, &[&f, &f])).unwrap();
    assert!(cap.frames.iter().all(|f| f.link == Link::Unknown));
    let ing = Ingest::new(&cap);
    assert_eq!(ing.by_problem(), [2, 0, 0]);
    replay_ok(cap, 1, 3);
}

#[test]
fn vlan_sll_raw_and_bsd_loopback_frames_parse_to_the_same_flow() {
    let mut vlan = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .single_vlan(42.try_into().unwrap())
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(1000, 80, 99, 1024)
        .write(&mut vlan, b"x")
        .unwrap();
    let eth = tcp_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80, 99);
    let ip = &eth[14..];
    let mut sll = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(ip);
    let mut sll2 = vec![
        0x08, 0x00, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0,
    ];
    sll2.extend_from_slice(ip);
    let mut null_le = 2u32.to_le_bytes().to_vec();
    null_le.extend_from_slice(ip);
    let mut loop_be = 2u32.to_be_bytes().to_vec();
    loop_be.extend_from_slice(ip);
    let want = parse_frame(Link::Ethernet, &eth);
    assert_eq!(want.proto, Proto::Tcp);
    assert_eq!(want.tcp_seq, Some(99));
    assert_eq!(want.problem, None);
    for (link, data) in [
        (Link::Ethernet, &vlan[..]),
        (Link::RawIp, ip),
        (Link::LinuxSll, &sll),
        (Link::LinuxSll2, &sll2),
        (Link::BsdLoopback, &null_le),
        (Link::BsdLoopback, &loop_be),
    ] {
        assert_eq!(parse_frame(link, data), want, "{link:?}");
    }
    // The reverse direction: same flow and hash, the other direction.
    let back = parse_frame(
        Link::Ethernet,
        &tcp_frame([10, 0, 0, 2], [10, 0, 0, 1], 80, 1000, 5),
    );
    assert_eq!(
        (back.flow, back.rss, back.dir),
        (want.flow, want.rss, 1 - want.dir)
    );
}

#[test]
fn pcapng_reads_as_the_same_frames() {
    let pcap = read_capture(LOOPBACK).unwrap();
    let n = if cfg!(miri) { 20 } else { pcap.frames.len() };
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 96))
        .unwrap();
    for i in 0..n {
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_micros(i as u64),
            original_len: pcap.frames[i].orig_len,
            data: pcap.data(i).into(),
            options: Vec::new(),
        })
        .unwrap();
    }
    let file = w.into_inner();
    let ng = read_capture(&file).unwrap();
    assert_eq!(ng.format, "pcapng");
    assert!(ng.stopped.is_none());
    assert_eq!(ng.frames.len(), n);
    for i in 0..n {
        assert_eq!(ng.data(i), pcap.data(i));
        assert_eq!(ng.frames[i].link, Link::Ethernet);
    }
    // Cut inside the last block: the frames before it stay.
    let cut = read_capture(&file[..file.len() - 5]).unwrap();
    assert!(cut.stopped.is_some());
    assert_eq!(cut.frames.len(), n - 1);
}
