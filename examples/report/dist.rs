//! `dist_*` scenarios: distributor on CPU 0, one worker on CPU 1, bursts of 32 (DPDK's
//! `dist_perf` shape). Packets/s and TSC cycles per packet on the distributor's thread; the
//! worker returns every packet, the distributor collects them, and the sum of the returned
//! sequence numbers is checked.
//! - `dist_1worker`: 1024 synthetic flows, round robin.
//! - `dist_pcap`: the flows of a real capture (`tests/data/loopback.pcap`, tagged by the
//!   symmetric RSS hash of each frame's 5-tuple, as the `pcap_replay` example does), looped
//!   with a flow salt per lap, next to the synthetic flows in the same run.

use std::sync::Arc;
use std::time::Instant;

use flowline::distributor::{self, Config};

use crate::frames;
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

/// Returns (Mpkts/s, TSC cycles per packet); packet `p` has the flow tag `tag(p)`.
fn flowline(n: u64, tag: impl Fn(u64) -> u64 + Send + 'static, burst: usize) -> Vec<f64> {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 512,
        },
        move |p: &u64| tag(*p),
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

/// Packets per second through the distributor, and TSC cycles per packet on its thread.
const METRICS: &[Metric] = &[
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
];

/// The capture's per-frame tags (the symmetric RSS hash of each frame's 5-tuple).
fn capture_tags() -> Arc<Vec<u64>> {
    let cap = frames::read_capture(include_bytes!("../../tests/data/loopback.pcap"))
        .expect("the committed capture reads");
    let ing = frames::Ingest::new(&cap);
    Arc::new(ing.parsed.iter().map(|p| u64::from(p.rss)).collect())
}

pub fn run(r: &mut Report) {
    let n: u64 = if r.quick { 200_000 } else { 16 << 20 };
    let synthetic = move |p: u64| p % 1024;
    let impls: Vec<Impl> = vec![("flowline", Box::new(move || flowline(n, synthetic, 32)))];
    r.scenario("dist_1worker", METRICS, impls, &[]);
    if r.wants("dist_pcap") {
        let tags = capture_tags();
        let nf = tags.len() as u64;
        // Lap `p / nf` salts the high half: each lap's flows are new flows.
        let capture = move |p: u64| (p / nf) << 32 | tags[(p % nf) as usize];
        let impls: Vec<Impl> = vec![
            (
                "flowline_capture",
                Box::new(move || flowline(n, capture.clone(), 32)),
            ),
            (
                "flowline_synthetic",
                Box::new(move || flowline(n, synthetic, 32)),
            ),
        ];
        r.scenario(
            "dist_pcap",
            METRICS,
            impls,
            &[("flowline_capture", "flowline_synthetic")],
        );
    }
}
