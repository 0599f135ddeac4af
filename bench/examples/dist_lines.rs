//! Shared-line traffic of the distributor per packet, counted, for 1 to 14 workers: the
//! measure of whether the distributor scales with its workers that a 2-core machine can
//! take (time needs as many cores as threads; counts do not).
//!
//! The workers are driven inline, in the distributor's thread: after each `distribute`,
//! every worker takes what it was sent (`recv_burst`) and hands it back (`done_burst`),
//! and the distributor collects. Packets of 1024 flows arrive in bursts of 32. Printed
//! per packet, as the report's figure lines:
//!
//! * `dist_lines_{W}w_stores_per_pkt`: index stores the distributor published (its packet
//!   rings' `tail`, its return rings' `head`), each a line a worker then reads;
//! * `dist_lines_{W}w_loads_per_pkt`: loads the distributor made of the workers' indices
//!   that found them moved, each a transfer of that line to the distributor's core.
//!
//! The counting is compiled in only with `--cfg flowline_lines`:
//!
//! ```text
//! RUSTFLAGS="--cfg flowline_lines" cargo run --release -p flowline-bench --example dist_lines
//! ```
//!
//! The instructions per packet of the same loop are the instruction benchmarks
//! `dist_lines_{W}w` (`cargo bench -p flowline-bench --bench instructions`).

use flowline::distributor::{self, Config};

/// Packets per worker count.
const PACKETS: usize = 1 << 20;

fn main() {
    for workers in [1, 2, 4, 8, 14] {
        let (mut d, mut ws) = distributor::new(
            Config {
                workers,
                credit: 256,
            },
            |p: &u64| *p,
        )
        .expect("a valid configuration");
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let (mut input, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new());
        let mut back = 0;
        for _ in 0..PACKETS / 32 {
            input.extend((0..32).map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % 1024
            }));
            while !input.is_empty() {
                d.distribute(&mut input).expect("workers are active");
                for w in ws.iter_mut() {
                    w.recv_burst(&mut b, 64).expect("the distributor is there");
                    w.done_burst(&mut b).expect("held");
                }
            }
            back += d.collect(&mut out);
            out.clear();
        }
        // The rest, with the workers still driven inline.
        while back < PACKETS {
            d.distribute(&mut input).expect("workers are active");
            for w in ws.iter_mut() {
                w.recv_burst(&mut b, 64).expect("the distributor is there");
                w.done_burst(&mut b).expect("held");
            }
            back += d.collect(&mut out);
            out.clear();
        }
        let Some((stores, loads)) = d.line_counts() else {
            eprintln!(
                "dist_lines: the counting is not compiled in; run with \
                 RUSTFLAGS=\"--cfg flowline_lines\""
            );
            std::process::exit(2);
        };
        let per = |n: u64| n as f64 / PACKETS as f64;
        println!("dist_lines_{workers}w_stores_per_pkt {:.4}", per(stores));
        println!("dist_lines_{workers}w_loads_per_pkt {:.4}", per(loads));
    }
}
