//! `dist_*` scenario: distributor on CPU 0, one worker on CPU 1, 1024 flows, bursts of 32
//! (DPDK's `dist_perf` shape). Packets/s and TSC cycles per packet on the distributor's
//! thread; the worker returns every packet, the distributor collects them, and the sum of
//! the returned sequence numbers is checked.

use std::time::Instant;

use flowline::distributor::{self, Config};

use crate::harness::{pair, Impl, Metric, Report};

#[inline]
fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Returns (Mpkts/s, TSC cycles per packet).
fn flowline(n: u64, flows: u64, burst: usize) -> Vec<f64> {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 512,
        },
        |p: &u64| *p % flows,
    )
    .unwrap();
    let mut w = ws.pop().unwrap();
    let ((secs, cycles, sum), ()) = pair(
        move || {
            let t = Instant::now();
            let c0 = tsc();
            let mut next = 0u64;
            let mut input: Vec<u64> = Vec::with_capacity(burst);
            let mut out: Vec<u64> = Vec::with_capacity(4096);
            let mut back = 0u64;
            let mut sum = 0u64;
            while back < n {
                while input.len() < burst && next < n {
                    input.push(next);
                    next += 1;
                }
                if !input.is_empty() {
                    d.distribute(&mut input).unwrap();
                }
                d.collect(&mut out);
                back += out.len() as u64;
                for &p in &out {
                    sum = sum.wrapping_add(p);
                }
                out.clear();
            }
            let cycles = tsc() - c0;
            (t.elapsed().as_secs_f64(), cycles, sum)
            // `d` drops here: the worker sees Disconnected and exits.
        },
        move || {
            let mut b = Vec::with_capacity(burst);
            while w.recv_burst(&mut b, burst).is_ok() {
                w.done_burst(&mut b).unwrap();
            }
        },
    );
    assert_eq!(sum, n * (n - 1) / 2, "returned packets' checksum");
    vec![n as f64 / secs / 1e6, cycles as f64 / n as f64]
}

pub fn run(r: &mut Report) {
    let n: u64 = if r.quick { 200_000 } else { 16 << 20 };
    let impls: Vec<Impl> = vec![("flowline", Box::new(move || flowline(n, 1024, 32)))];
    r.scenario(
        "dist_1worker",
        &[
            Metric {
                suffix: "",
                unit: "Mpkts/s",
                higher_is_better: true,
            },
            Metric {
                suffix: "_cycles",
                unit: "tsc_cycles/pkt",
                higher_is_better: false,
            },
        ],
        impls,
        &[],
    );
}
