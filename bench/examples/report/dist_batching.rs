//! What the distributor's per-lane batching saves and costs.
//!
//! `dist_lines`: counted, not timed: per packet, the index stores the distributor
//! publishes and its loads of workers' index lines that moved (`report/lines.rs`, counted
//! when flowline is built with `--cfg flowline_lines`, else the committed counts of
//! `bench/dist-lines.txt`, which `dist_lines --write` writes), and
//! the distributor's instructions per packet of the same loop (the committed counts of
//! the instruction benchmarks `dist_lines_w{W}`), for W = 1, 2, 4, 8, 14 workers.
//!
//! `dist_latency_*` scenarios: how long a packet takes from `distribute` to its worker
//! and to `collect`, with the distributor's per-lane batching on (the default) against
//! `set_batching(1, 0)` (each call publishes what it routed, and reads every return ring)
//! in the same run. The distributor runs on CPU 0; its workers are polled in turn by one
//! thread on CPU 1 (`recv_burst`, then `done_burst`). Each packet carries the TSC at its
//! `distribute`; p50 and p99 in ns.
//! - `dist_latency_light_{W}w`: one packet every 2 us (1024 flows), the distributor
//!   calling `distribute` and `collect` in a loop between them (calls with no new input
//!   publish everything at once).
//! - `dist_latency_full_{W}w`: bursts of 32 as fast as the distributor takes them.

use std::hint::spin_loop;

use flowline::distributor::{self, Config};

use crate::harness::{pair, tsc, tsc_per_ns, Impl, Metric, Report};

/// A packet: its flow and the TSC at its `distribute`.
type Pkt = (u64, u64);

/// Runs `n` packets through a distributor with `workers` workers, one every `gap_ns` (0:
/// bursts of 32 back to back); returns p50 and p99 to the worker, then to `collect`, in ns.
fn latency(n: usize, workers: usize, gap_ns: f64, batched: bool) -> Vec<f64> {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(workers).credit(256), |p: &Pkt| {
            p.0
        })
        .unwrap();
    if !batched {
        d.set_batching(1, 0);
    }
    let rate = tsc_per_ns();
    let gap = (gap_ns * rate) as u64;
    let (mut back, mut to_worker) = pair(
        move || {
            let mut back = Vec::with_capacity(n);
            let (mut input, mut out) = (Vec::with_capacity(32), Vec::with_capacity(4096));
            let (mut sent, mut next) = (0usize, tsc());
            while back.len() < n {
                if sent < n && input.is_empty() && tsc() >= next {
                    let k = if gap == 0 { 32.min(n - sent) } else { 1 };
                    let now = tsc();
                    for i in sent..sent + k {
                        input.push((i as u64 % 1024, now));
                    }
                    sent += k;
                    next += gap;
                }
                d.distribute(&mut input).unwrap();
                d.collect(&mut out);
                let now = tsc();
                back.extend(out.drain(..).map(|(_, t)| now.saturating_sub(t)));
            }
            back
            // `d` drops here: the workers see Disconnected.
        },
        move || {
            let mut lat = Vec::with_capacity(n);
            let mut b = Vec::with_capacity(64);
            let mut live = ws.len();
            while live > 0 {
                live = 0;
                for w in ws.iter_mut() {
                    if let Ok(got) = w.recv_burst(&mut b, 64) {
                        live += 1;
                        if got == 0 {
                            spin_loop();
                            continue;
                        }
                        let now = tsc();
                        lat.extend(b.iter().map(|&(_, t)| now.saturating_sub(t)));
                        w.done_burst(&mut b).unwrap();
                    }
                }
            }
            lat
        },
    );
    let at = |v: &mut Vec<u64>, q: f64| {
        v.sort_unstable();
        v[((v.len() - 1) as f64 * q) as usize] as f64 / rate
    };
    vec![
        at(&mut to_worker, 0.5),
        at(&mut to_worker, 0.99),
        at(&mut back, 0.5),
        at(&mut back, 0.99),
    ]
}

pub fn run(r: &mut Report) {
    if r.wants("dist_lines") {
        let packets = if r.quick { 1 << 14 } else { 1 << 20 };
        let committed = crate::lines::committed();
        let mut figures = Vec::new();
        for w in crate::lines::WORKERS {
            let counts = crate::lines::count(w, packets).map(|(s, l)| [s, l]);
            for (k, what) in ["stores", "loads"].into_iter().enumerate() {
                let name = format!("dist_lines_{w}w_{what}_per_pkt");
                // Counted now if the counting is compiled in, else the committed counts
                // (deterministic: one thread, a fixed packet sequence).
                let v = counts
                    .map(|c| c[k])
                    .or_else(|| committed.iter().find(|(n, _)| *n == name).map(|(_, v)| *v));
                if let Some(v) = v {
                    let unit = if k == 0 { "stores/pkt" } else { "loads/pkt" };
                    figures.push((name, v, unit));
                }
            }
            if let Some(instr) = r.instructions_per_op(&format!("dist_lines_w{w}")) {
                figures.push((
                    format!("dist_lines_{w}w_instructions_per_pkt"),
                    instr,
                    "instr/pkt",
                ));
            }
        }
        if crate::lines::count(1, 0).is_none() {
            println!(
                "# dist_lines: line counts from bench/dist-lines.txt (RUSTFLAGS=\"--cfg \
                 flowline_lines\" cargo run --release -p flowline-bench --example dist_lines \
                 -- --write); instructions from bench/instructions-baseline.txt"
            );
        }
        r.counted("dist_lines", figures);
    }
    let lat = |suffix: &'static str| Metric {
        suffix,
        unit: "ns",
        higher_is_better: false,
    };
    let metrics = [
        lat("_worker_p50"),
        lat("_worker_p99"),
        lat("_collect_p50"),
        lat("_collect_p99"),
    ];
    for workers in [1usize, 2] {
        for (load, gap, n) in [("light", 2000.0, 20_000), ("full", 0.0, 2_000_000)] {
            let n = if r.quick { n / 100 } else { n };
            let impls: Vec<Impl> = vec![
                (
                    "flowline_batched",
                    Box::new(move || latency(n, workers, gap, true)),
                ),
                (
                    "flowline_unbatched",
                    Box::new(move || latency(n, workers, gap, false)),
                ),
            ];
            r.scenario(
                &format!("dist_latency_{load}_{workers}w"),
                &metrics,
                impls,
                &[("flowline_batched", "flowline_unbatched")],
            );
        }
    }
}
