//! `pipe_*` scenarios: a pipeline distributor (`distributor::new_pipeline`) in the shape of
//! DPDK's `eventdev_perf -S` pipelines: the distributor on CPU 0, one worker on CPU 1 that
//! forwards each packet from stage to stage and completes it at the last, 1024 flows,
//! bursts of 32, everything back on CPU 0 and checked (the sum of the sequence numbers).
//! Packets/s and TSC cycles per packet on the distributor's thread.
//! - `pipe_a_1worker`: one atomic stage, against the atomic distributor in the same run
//!   (what the general scheduler costs the simple case).
//! - `pipe_ap_1worker`: an atomic stage, then a parallel one.
//! - `pipe_oa_1worker`: an ordered stage, then an atomic one.
//! - `pipe_oap_1worker`: ordered, atomic, parallel.
//!
//! DPDK's figures for the same pipelines (`evdev_sw_pipe_<letters>_1worker_pps`, and
//! `evdev_dsw_...`) come from the anchors file, beside these in BENCHMARKS.md.

use std::time::Instant;

use flowline::distributor::{self, Config, StageType};

use crate::harness::{pair, tsc, Impl, Metric, Report};

/// A packet: its sequence number, with its stage in the top two bits.
const STAGE_SHIFT: u32 = 62;

const SEQ: u64 = (1 << STAGE_SHIFT) - 1;

/// Packets per second through the pipeline, and TSC cycles per packet on its thread.
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

/// `n` packets through a pipeline of `stages` (flows `seq % 1024` at every stage): the
/// worker forwards a packet at a stage before the last to the next one and completes
/// the others. Returns (Mpkts/s, TSC cycles per packet).
fn pipeline(n: u64, stages: &[StageType]) -> Vec<f64> {
    let route = |p: &u64| ((p >> STAGE_SHIFT) as usize, (p & SEQ) % 1024);
    let (d, ws) =
        distributor::new_pipeline(Config::default().workers(1).credit(512), stages, route).unwrap();
    let last = stages.len() as u64 - 1;
    // A packet before the last stage goes on (its stage advanced in place: a forward is a
    // hand-back like a completion); the burst goes back at once.
    drive(d, ws, n, move |b: &mut Vec<u64>| {
        for p in b.iter_mut() {
            if *p >> STAGE_SHIFT < last {
                *p += 1 << STAGE_SHIFT;
            }
        }
    })
}

/// The atomic distributor in the same shape (one stage, `distributor::new`).
fn atomic(n: u64) -> Vec<f64> {
    let (d, ws) =
        distributor::new(Config::default().workers(1).credit(512), |p: &u64| p % 1024).unwrap();
    drive(d, ws, n, |_: &mut Vec<u64>| {})
}

/// Runs `n` packets (sequence numbers) in bursts of 32 through `d` on CPU 0, its one worker
/// on CPU 1 doing `work` to each burst before handing it back, checks the returned
/// packets' sum, and returns (Mpkts/s, TSC cycles per packet on the distributor's thread).
fn drive<S: distributor::Schedule<u64> + Send>(
    mut d: distributor::Distributor<u64, S>,
    mut ws: Vec<distributor::Worker<u64>>,
    n: u64,
    work: impl Fn(&mut Vec<u64>) + Send,
) -> Vec<f64> {
    let ((secs, cycles, sum), ()) = pair(
        move || {
            let (t, c0) = (Instant::now(), tsc());
            let (mut next, mut back, mut sum) = (0u64, 0u64, 0u64);
            let mut input: Vec<u64> = Vec::with_capacity(32);
            let mut out: Vec<u64> = Vec::with_capacity(4096);
            while back < n {
                while input.len() < 32 && next < n {
                    input.push(next);
                    next += 1;
                }
                d.distribute(&mut input).unwrap();
                d.collect(&mut out);
                back += out.len() as u64;
                for &p in &out {
                    sum = sum.wrapping_add(p & SEQ);
                }
                out.clear();
            }
            (t.elapsed().as_secs_f64(), tsc() - c0, sum)
            // `d` drops here: the worker sees Disconnected and exits.
        },
        move || {
            let w = &mut ws[0];
            let mut b = Vec::with_capacity(32);
            while w.recv_burst(&mut b, 32).is_ok() {
                work(&mut b);
                w.done_burst(&mut b).unwrap();
            }
        },
    );
    assert_eq!(sum, n * (n - 1) / 2, "returned packets' checksum");
    vec![n as f64 / secs / 1e6, cycles as f64 / n as f64]
}

pub fn run(r: &mut Report) {
    let n: u64 = if r.quick { 200_000 } else { 16 << 20 };
    let impls: Vec<Impl> = vec![
        (
            "flowline_pipe",
            Box::new(move || pipeline(n, &[StageType::Atomic])),
        ),
        ("flowline", Box::new(move || atomic(n))),
    ];
    r.scenario(
        "pipe_a_1worker",
        METRICS,
        impls,
        &[("flowline_pipe", "flowline")],
    );
    for (name, stages) in [
        (
            "pipe_ap_1worker",
            &[StageType::Atomic, StageType::Parallel][..],
        ),
        (
            "pipe_oa_1worker",
            &[StageType::Ordered, StageType::Atomic][..],
        ),
        (
            "pipe_oap_1worker",
            &[StageType::Ordered, StageType::Atomic, StageType::Parallel][..],
        ),
    ] {
        let impls: Vec<Impl> = vec![("flowline_pipe", Box::new(move || pipeline(n, stages)))];
        r.scenario(name, METRICS, impls, &[]);
    }
}
