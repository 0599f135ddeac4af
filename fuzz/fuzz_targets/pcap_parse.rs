//! Fuzz target: the pcap replay example's parser glue (`examples/pcap_replay/frames.rs`).
//! The input is read both as a whole capture file and as one frame under every link type;
//! nothing may panic, a damaged capture keeps the frames before the damage, and every parse
//! agrees with itself: the flow key and RSS hash of a frame are those of its reverse
//! direction, and the table Toeplitz hash equals the bitwise definition.
#![no_main]

#[path = "../../bench/examples/pcap_replay/frames.rs"]
mod frames;

use std::net::IpAddr;

use frames::{parse_frame, read_capture, Ingest, Link, Proto};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(cap) = read_capture(data) {
        let ing = Ingest::new(&cap);
        assert_eq!(ing.parsed.len(), cap.frames.len());
        let in_dirs: usize = ing.dir_frames.iter().map(Vec::len).sum();
        assert_eq!(in_dirs, ing.dir_id.iter().filter(|&&d| d != u32::MAX).count());
    }
    for link in Link::ALL {
        let p = parse_frame(link, data);
        assert_eq!(p.tcp_seq.is_some(), p.proto == Proto::Tcp);
        if let Some(k) = p.flow {
            assert!((k.a.0, k.a.1) <= (k.b.0, k.b.1), "endpoints in canonical order");
            let (src, dst) = if p.dir == 0 { (k.a, k.b) } else { (k.b, k.a) };
            assert_eq!(p.rss, frames::rss_hash(src.0, dst.0, src.1, dst.1));
            assert_eq!(p.rss, frames::rss_hash(dst.0, src.0, dst.1, src.1));
        } else {
            assert_eq!(p.rss, 0);
        }
    }
    let n = data.len().min(36);
    assert_eq!(
        frames::toeplitz_symmetric(&data[..n]),
        frames::toeplitz(&frames::SYMMETRIC_RSS_KEY, &data[..n])
    );
    if data.len() >= 36 {
        let a: [u8; 16] = data[..16].try_into().unwrap();
        let b: [u8; 16] = data[16..32].try_into().unwrap();
        let (x, y) = (IpAddr::from(a), IpAddr::from(b));
        let (pa, pb) = (u16::from_be_bytes([data[32], data[33]]), u16::from_be_bytes([data[34], data[35]]));
        assert_eq!(frames::rss_hash(x, y, pa, pb), frames::rss_hash(y, x, pb, pa));
    }
});
