//! The loop whose shared-line traffic the `dist_lines` figures count (the report and the
//! `dist_lines` example share it): `distribute` of bursts of 32 packets of 1024 flows to
//! `workers` workers driven inline in the same thread, each taking what it was sent and
//! handing it back after every call, `collect` after each burst, until every packet is
//! back. The instruction benchmarks `dist_lines_w{W}` count the same loop.

use flowline::distributor::{self, Config};

/// The worker counts of the `dist_lines` figures.
pub const WORKERS: [usize; 5] = [1, 2, 4, 8, 14];

/// The `name value` lines of a committed counts file (`#` lines are comments), e.g.
/// `bench/dist-lines.txt` or `bench/instructions-baseline.txt`; empty if it cannot be read.
#[allow(dead_code)]
pub fn read_counts(path: &str) -> Vec<(String, f64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut p = l.split_whitespace();
            Some((p.next()?.to_string(), p.next()?.parse().ok()?))
        })
        .collect()
}

/// The committed counts (`bench/dist-lines.txt`, written by `dist_lines --write`).
#[allow(dead_code)]
pub fn committed() -> Vec<(String, f64)> {
    read_counts(concat!(env!("CARGO_MANIFEST_DIR"), "/dist-lines.txt"))
}

/// Index stores the distributor published and loads of the workers' indices that found
/// them moved, per packet, over `packets` packets; `None` unless flowline was built with
/// `--cfg flowline_lines`.
pub fn count(workers: usize, packets: usize) -> Option<(f64, f64)> {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(workers).credit(256), |p: &u64| *p)
            .expect("a valid configuration");
    // Nothing to count without the counting compiled in: no need to run the loop.
    d.line_counts()?;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let (mut input, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new());
    let mut back = 0;
    let mut round = |d: &mut distributor::Distributor<u64, _>, input: &mut Vec<u64>| {
        d.distribute(input).expect("workers are active");
        for w in ws.iter_mut() {
            w.recv_burst(&mut b, 64).expect("the distributor is there");
            w.done_burst(&mut b).expect("held");
        }
    };
    for _ in 0..packets / 32 {
        input.extend((0..32).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 1024
        }));
        while !input.is_empty() {
            round(&mut d, &mut input);
        }
        back += d.collect(&mut out);
        out.clear();
    }
    while back < packets / 32 * 32 {
        round(&mut d, &mut input);
        back += d.collect(&mut out);
        out.clear();
    }
    let (stores, loads) = d.line_counts()?;
    let per = |n: u64| n as f64 / back as f64;
    Some((per(stores), per(loads)))
}
