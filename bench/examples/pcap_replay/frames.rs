//! Parser glue of the pcap replay example: capture file -> frames -> flow key, symmetric RSS
//! hash, TCP sequence number. Shared (by `#[path]`) with `bench/tests/pcap.rs`, the report's
//! `dist_pcap` scenario and the fuzz target `pcap_parse`.
//!
//! Reading uses `pcap-file` (classic pcap and pcapng); header parsing uses `etherparse` in
//! its lax mode, so frames cut short by the capture's snap length still yield every header
//! they hold. Nothing here panics on bad input: a damaged capture stops at the damage with
//! the reason kept, and a frame that cannot be parsed gets a [`Problem`] and still goes
//! through the pipeline (like a NIC that hashes what it can and queues the rest on hash 0).
#![allow(dead_code)] // Each includer uses a different part.

use std::net::IpAddr;

use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket, TransportSlice};
use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::DataLink;

/// The link layer of a capture's frames (the pcap link types this glue reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Link {
    /// `LINKTYPE_ETHERNET` (1): Ethernet II, with or without VLAN tags.
    Ethernet,
    /// `LINKTYPE_RAW` (101), `LINKTYPE_IPV4` (228), `LINKTYPE_IPV6` (229): bare IP.
    RawIp,
    /// `LINKTYPE_LINUX_SLL` (113): `tcpdump -i any` before libpcap 1.10.
    LinuxSll,
    /// `LINKTYPE_LINUX_SLL2` (276): `tcpdump -i any` since libpcap 1.10.
    LinuxSll2,
    /// `LINKTYPE_NULL` (0) and `LINKTYPE_LOOP` (108): BSD loopback, a 4-byte family.
    BsdLoopback,
    /// Anything else: the frames are replayed but not parsed.
    Unknown,
}

impl Link {
    fn from_datalink(d: DataLink) -> Link {
        match d {
            DataLink::ETHERNET => Link::Ethernet,
            DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => Link::RawIp,
            DataLink::LINUX_SLL => Link::LinuxSll,
            DataLink::LINUX_SLL2 => Link::LinuxSll2,
            DataLink::NULL | DataLink::LOOP => Link::BsdLoopback,
            _ => Link::Unknown,
        }
    }

    /// Every link type, for tests and the fuzz target.
    pub const ALL: [Link; 6] = [
        Link::Ethernet,
        Link::RawIp,
        Link::LinuxSll,
        Link::LinuxSll2,
        Link::BsdLoopback,
        Link::Unknown,
    ];
}

/// One captured frame: where its bytes are in [`Capture::bytes`].
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    pub link: Link,
    start: usize,
    len: usize,
    /// Length on the wire (at least the captured length in a well-formed capture).
    pub orig_len: u32,
}

/// A capture read into memory: its frames in capture order.
#[derive(Debug, Default)]
pub struct Capture {
    pub frames: Vec<Frame>,
    bytes: Vec<u8>,
    /// `"pcap"` or `"pcapng"`.
    pub format: &'static str,
    /// Why reading stopped before the end of the file (a truncated or damaged capture);
    /// the frames before the damage are kept.
    pub stopped: Option<String>,
    /// pcapng blocks that carry no frame (statistics, name resolution, ...).
    pub other_blocks: u64,
}

impl Capture {
    /// The captured bytes of frame `i`.
    pub fn data(&self, i: usize) -> &[u8] {
        let f = &self.frames[i];
        &self.bytes[f.start..f.start + f.len]
    }

    fn push(&mut self, link: Link, data: &[u8], orig_len: u32) {
        self.frames.push(Frame {
            link,
            start: self.bytes.len(),
            len: data.len(),
            orig_len,
        });
        self.bytes.extend_from_slice(data);
    }
}

/// Reads a whole pcap or pcapng file. `Err` only when the file is neither (its header is
/// unreadable); damage after the header ends the frame list with [`Capture::stopped`] set.
pub fn read_capture(file: &[u8]) -> Result<Capture, String> {
    const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
    let mut cap = Capture::default();
    if file.starts_with(&PCAPNG_MAGIC) {
        cap.format = "pcapng";
        let (mut rest, mut parser) =
            PcapNgParser::new(file).map_err(|e| format!("not a readable pcapng file: {e}"))?;
        while !rest.is_empty() {
            let (r, block) = match parser.next_block(rest) {
                Ok(x) => x,
                Err(e) => {
                    cap.stopped = Some(format!(
                        "pcapng block at byte {}: {e}",
                        file.len() - rest.len()
                    ));
                    break;
                }
            };
            rest = r;
            match block {
                Block::EnhancedPacket(p) => {
                    let link = parser
                        .interfaces()
                        .get(p.interface_id as usize)
                        .map_or(Link::Unknown, |i| Link::from_datalink(i.linktype));
                    cap.push(link, &p.data, p.original_len);
                }
                Block::SimplePacket(p) => {
                    let link = parser
                        .interfaces()
                        .first()
                        .map_or(Link::Unknown, |i| Link::from_datalink(i.linktype));
                    cap.push(link, &p.data, p.original_len);
                }
                Block::Packet(p) => {
                    let link = parser
                        .interfaces()
                        .get(usize::from(p.interface_id))
                        .map_or(Link::Unknown, |i| Link::from_datalink(i.linktype));
                    cap.push(link, &p.data, p.original_len);
                }
                _ => cap.other_blocks += 1,
            }
        }
    } else {
        cap.format = "pcap";
        let (mut rest, parser) = PcapParser::new(file)
            .map_err(|e| format!("not a readable pcap or pcapng file: {e}"))?;
        let link = Link::from_datalink(parser.header().datalink);
        // Raw records: pcap-file 2.0's checked `next_packet` rejects a record whose wire
        // length exceeds the snap length, which is every record cut by `tcpdump -s`. The
        // check that matters is on the captured length.
        let max_len = parser.header().snaplen.max(262_144);
        while !rest.is_empty() {
            let at = file.len() - rest.len();
            match parser.next_raw_packet(rest) {
                Ok((_, p)) if p.incl_len > max_len => {
                    cap.stopped = Some(format!(
                        "pcap record at byte {at}: captured length {} above the snap length",
                        p.incl_len
                    ));
                    break;
                }
                Ok((r, p)) => {
                    rest = r;
                    cap.push(link, &p.data, p.orig_len);
                }
                Err(e) => {
                    cap.stopped = Some(format!("pcap record at byte {at}: {e}"));
                    break;
                }
            }
        }
    }
    Ok(cap)
}

/// What a frame carries, as far as the replay cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
    Icmp,
    /// IP with another (or an unparsed) payload.
    OtherIp,
    /// ARP, or an ether type other than IPv4/IPv6.
    NonIp,
}

impl Proto {
    pub const ALL: [Proto; 5] = [
        Proto::Tcp,
        Proto::Udp,
        Proto::Icmp,
        Proto::OtherIp,
        Proto::NonIp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
            Proto::OtherIp => "other-ip",
            Proto::NonIp => "non-ip",
        }
    }
}

/// Why a frame could not be parsed as far as its headers say it should.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Problem {
    /// The capture's link type is not one of [`Link`]'s.
    UnknownLink,
    /// The frame ends inside a header (too short for the headers it announces).
    TooShort,
    /// A header field is invalid (bad IP version, header length, ...).
    Malformed,
}

impl Problem {
    pub const ALL: [Problem; 3] = [Problem::UnknownLink, Problem::TooShort, Problem::Malformed];

    pub fn name(self) -> &'static str {
        match self {
            Problem::UnknownLink => "unknown link type",
            Problem::TooShort => "too short for its headers",
            Problem::Malformed => "malformed header",
        }
    }
}

/// An IP flow, the same for both directions: endpoints in a fixed order (the smaller
/// (address, port) first); ports are 0 for protocols without them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub proto: u8,
    pub a: (IpAddr, u16),
    pub b: (IpAddr, u16),
}

/// The parse of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub proto: Proto,
    /// The flow, for IP frames whose addresses could be read.
    pub flow: Option<FlowKey>,
    /// 0 when the frame goes from the key's `a` to `b`, 1 the other way.
    pub dir: u8,
    /// The TCP sequence number, for TCP frames.
    pub tcp_seq: Option<u32>,
    /// Symmetric Toeplitz hash ([`rss_hash`]) of the addresses and ports; 0 without a flow.
    pub rss: u32,
    pub problem: Option<Problem>,
}

impl Parsed {
    fn non_ip(problem: Option<Problem>) -> Parsed {
        Parsed {
            proto: Proto::NonIp,
            flow: None,
            dir: 0,
            tcp_seq: None,
            rss: 0,
            problem,
        }
    }
}

/// Parses one frame's headers. Never panics, whatever the bytes.
pub fn parse_frame(link: Link, data: &[u8]) -> Parsed {
    use etherparse::err::packet::SliceError;
    let sliced = match link {
        Link::Ethernet => match LaxSlicedPacket::from_ethernet(data) {
            Ok(p) => p,
            Err(_) => return Parsed::non_ip(Some(Problem::TooShort)),
        },
        Link::RawIp => match LaxSlicedPacket::from_ip(data) {
            Ok(p) => p,
            Err(e) => return Parsed::non_ip(Some(ip_problem(&e))),
        },
        Link::LinuxSll => {
            // 16-byte header; the protocol (an ether type for IP) in its last two bytes.
            if data.len() < 16 {
                return Parsed::non_ip(Some(Problem::TooShort));
            }
            let et = u16::from_be_bytes([data[14], data[15]]);
            LaxSlicedPacket::from_ether_type(EtherType(et), &data[16..])
        }
        Link::LinuxSll2 => {
            // 20-byte header; the protocol in its first two bytes.
            if data.len() < 20 {
                return Parsed::non_ip(Some(Problem::TooShort));
            }
            let et = u16::from_be_bytes([data[0], data[1]]);
            LaxSlicedPacket::from_ether_type(EtherType(et), &data[20..])
        }
        Link::BsdLoopback => {
            // A 4-byte address family, in the capturing host's byte order (NULL) or in
            // network order (LOOP): 2 is IPv4, 24/28/30 are IPv6 on the BSDs and macOS.
            if data.len() < 4 {
                return Parsed::non_ip(Some(Problem::TooShort));
            }
            let le = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
            let be = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
            let et = match (le, be) {
                (2, _) | (_, 2) => EtherType::IPV4,
                (24 | 28 | 30, _) | (_, 24 | 28 | 30) => EtherType::IPV6,
                _ => return Parsed::non_ip(None),
            };
            LaxSlicedPacket::from_ether_type(et, &data[4..])
        }
        Link::Unknown => return Parsed::non_ip(Some(Problem::UnknownLink)),
    };
    let problem = sliced.stop_err.as_ref().map(|(e, _)| match e {
        SliceError::Len(_) => Problem::TooShort,
        _ => Problem::Malformed,
    });
    let (src, dst, ip_number) = match &sliced.net {
        Some(LaxNetSlice::Ipv4(v4)) => (
            IpAddr::V4(v4.header().source_addr()),
            IpAddr::V4(v4.header().destination_addr()),
            v4.payload().ip_number.0,
        ),
        Some(LaxNetSlice::Ipv6(v6)) => (
            IpAddr::V6(v6.header().source_addr()),
            IpAddr::V6(v6.header().destination_addr()),
            v6.payload().ip_number.0,
        ),
        Some(LaxNetSlice::Arp(_)) | None => return Parsed::non_ip(problem),
    };
    let (proto, ports, tcp_seq) = match &sliced.transport {
        Some(TransportSlice::Tcp(t)) => (
            Proto::Tcp,
            (t.source_port(), t.destination_port()),
            Some(t.sequence_number()),
        ),
        Some(TransportSlice::Udp(u)) => (Proto::Udp, (u.source_port(), u.destination_port()), None),
        Some(TransportSlice::Icmpv4(_) | TransportSlice::Icmpv6(_)) => (Proto::Icmp, (0, 0), None),
        _ => (Proto::OtherIp, (0, 0), None),
    };
    let (a, b, dir) = if (src, ports.0) <= (dst, ports.1) {
        ((src, ports.0), (dst, ports.1), 0)
    } else {
        ((dst, ports.1), (src, ports.0), 1)
    };
    Parsed {
        proto,
        flow: Some(FlowKey {
            proto: ip_number,
            a,
            b,
        }),
        dir,
        tcp_seq,
        rss: rss_hash(src, dst, ports.0, ports.1),
        problem,
    }
}

fn ip_problem(e: &etherparse::err::ip::LaxHeaderSliceError) -> Problem {
    match e {
        etherparse::err::ip::LaxHeaderSliceError::Len(_) => Problem::TooShort,
        etherparse::err::ip::LaxHeaderSliceError::Content(_) => Problem::Malformed,
    }
}

/// The symmetric RSS key of Woo and Park (their 2012 paper on symmetric receive-side
/// scaling for TCP monitoring): 0x6d5a repeated. Toeplitz windows then repeat every 16
/// bits, so swapping source and destination (each a multiple of 16 bits long) leaves the
/// hash unchanged and both directions of a connection land on one worker.
pub const SYMMETRIC_RSS_KEY: [u8; 40] = {
    let mut k = [0u8; 40];
    let mut i = 0;
    while i < 40 {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// Toeplitz hash of `input` under `key` (Microsoft RSS): for each set bit of the input,
/// XOR in the 32-bit window of the key that starts at that bit. `input` at most
/// `key.len() - 4` bytes.
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    debug_assert!(input.len() + 4 <= key.len());
    let mut hash = 0u32;
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (i, &byte) in input.iter().enumerate() {
        let next = key.get(i + 4).copied().unwrap_or(0);
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                hash ^= window;
            }
            window = (window << 1) | u32::from((next >> (7 - bit)) & 1);
        }
    }
    hash
}

/// [`toeplitz`] under [`SYMMETRIC_RSS_KEY`], one table lookup per input byte: the key
/// repeats every 16 bits, so the window at bit `k` is `0x6d5a6d5a` rotated left by
/// `k % 16`, and a byte's contribution depends only on its value and on whether its
/// position is even or odd.
const SYMMETRIC_TABLE: [[u32; 256]; 2] = {
    let mut t = [[0u32; 256]; 2];
    let mut parity = 0;
    while parity < 2 {
        let mut v = 0;
        while v < 256 {
            let mut h = 0u32;
            let mut bit = 0;
            while bit < 8 {
                if v & (0x80 >> bit) != 0 {
                    h ^= 0x6d5a_6d5a_u32.rotate_left(8 * parity + bit);
                }
                bit += 1;
            }
            t[parity as usize][v] = h;
            v += 1;
        }
        parity += 1;
    }
    t
};

/// [`toeplitz`]`(&SYMMETRIC_RSS_KEY, input)` by table; `input` at most 36 bytes.
pub fn toeplitz_symmetric(input: &[u8]) -> u32 {
    debug_assert!(input.len() + 4 <= SYMMETRIC_RSS_KEY.len());
    input
        .iter()
        .enumerate()
        .fold(0, |h, (i, &b)| h ^ SYMMETRIC_TABLE[i & 1][usize::from(b)])
}

/// RSS hash of a packet as a NIC computes it for TCP/UDP over IPv4 or IPv6: Toeplitz over
/// source address, destination address, source port, destination port (big-endian), with
/// [`SYMMETRIC_RSS_KEY`]. The same value for both directions of a flow.
pub fn rss_hash(src: IpAddr, dst: IpAddr, sport: u16, dport: u16) -> u32 {
    let mut input = [0u8; 36];
    let n = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            input[..4].copy_from_slice(&s.octets());
            input[4..8].copy_from_slice(&d.octets());
            8
        }
        _ => {
            input[..16].copy_from_slice(&to_v6(src).octets());
            input[16..32].copy_from_slice(&to_v6(dst).octets());
            32
        }
    };
    input[n..n + 2].copy_from_slice(&sport.to_be_bytes());
    input[n + 2..n + 4].copy_from_slice(&dport.to_be_bytes());
    toeplitz_symmetric(&input[..n + 4])
}

fn to_v6(a: IpAddr) -> std::net::Ipv6Addr {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// The "NIC" stage of the replay: every frame parsed once, flows and directions numbered,
/// and per direction the frames in capture order (what the order check expects back).
#[derive(Debug, Default)]
pub struct Ingest {
    pub parsed: Vec<Parsed>,
    /// Per frame: its flow direction's number, or `u32::MAX` for frames without a flow.
    pub dir_id: Vec<u32>,
    /// Per flow direction: its frames in capture order.
    pub dir_frames: Vec<Vec<u32>>,
    /// Per flow direction: whether it is a TCP direction.
    pub dir_tcp: Vec<bool>,
    /// Per flow: its frame count (both directions), for the flow-size distribution.
    pub flow_frames: Vec<u64>,
}

impl Ingest {
    pub fn new(cap: &Capture) -> Ingest {
        use std::collections::HashMap;
        let mut ing = Ingest::default();
        let mut flows: HashMap<FlowKey, usize> = HashMap::new();
        let mut dirs: HashMap<(FlowKey, u8), u32> = HashMap::new();
        for i in 0..cap.frames.len() {
            let p = parse_frame(cap.frames[i].link, cap.data(i));
            let mut id = u32::MAX;
            if let Some(k) = p.flow {
                let nf = flows.len();
                let f = *flows.entry(k).or_insert(nf);
                if f == ing.flow_frames.len() {
                    ing.flow_frames.push(0);
                }
                ing.flow_frames[f] += 1;
                let nd = dirs.len() as u32;
                id = *dirs.entry((k, p.dir)).or_insert(nd);
                if id as usize == ing.dir_frames.len() {
                    ing.dir_frames.push(Vec::new());
                    ing.dir_tcp.push(p.proto == Proto::Tcp);
                }
                ing.dir_frames[id as usize].push(i as u32);
            }
            ing.dir_id.push(id);
            ing.parsed.push(p);
        }
        ing
    }

    /// Frames per protocol, in [`Proto::ALL`] order.
    pub fn by_proto(&self) -> [u64; 5] {
        let mut n = [0u64; 5];
        for p in &self.parsed {
            n[Proto::ALL.iter().position(|&x| x == p.proto).unwrap_or(4)] += 1;
        }
        n
    }

    /// Frames per problem, in [`Problem::ALL`] order.
    pub fn by_problem(&self) -> [u64; 3] {
        let mut n = [0u64; 3];
        for p in &self.parsed {
            if let Some(pr) = p.problem {
                n[Problem::ALL.iter().position(|&x| x == pr).unwrap_or(2)] += 1;
            }
        }
        n
    }

    /// The flow-size distribution: (upper bound of a power-of-two bucket of frames per
    /// flow, flows in it), for non-empty buckets.
    pub fn flow_sizes(&self) -> Vec<(u64, usize)> {
        let mut buckets: Vec<usize> = Vec::new();
        for &n in &self.flow_frames {
            let b = (64 - n.leading_zeros()) as usize; // 1 -> 1, 2..3 -> 2, 4..7 -> 3
            if buckets.len() <= b {
                buckets.resize(b + 1, 0);
            }
            buckets[b] += 1;
        }
        buckets
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(b, &c)| ((1u64 << b) - 1, c))
            .collect()
    }
}
