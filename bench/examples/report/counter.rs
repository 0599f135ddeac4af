//! `counter_*` scenarios: two writer threads (CPU 0 and 1) counting, per increment; and the
//! pktgen shape (generate a packet, count it).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_utils::CachePadded;
use flowline::counter::ShardedCounter;

use crate::harness::{pair, Impl, Metric, Report};

#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// One shared `AtomicU64`, `fetch_add` from both threads.
    Atomic,
    /// A padded slot per thread, `fetch_add` on it (fast-counter's approach).
    Padded,
    /// flowline handle: a plain add and a store to the writer's own shard.
    Handle,
    /// flowline handle-less add: `fetch_add` on the current CPU's shard.
    HandleLess,
    /// A plain per-thread `u64` (the limit).
    Local,
}

/// Both threads count `n` times; per-thread wall time per increment, averaged over the two
/// threads. `work` runs before each increment (the packet generation of the pktgen shape).
fn two_writers(kind: Kind, n: u64, work: impl Fn(u64) + Sync) -> (f64, u64) {
    let shared = CachePadded::new(AtomicU64::new(0));
    let padded = [
        CachePadded::new(AtomicU64::new(0)),
        CachePadded::new(AtomicU64::new(0)),
    ];
    let counter = Arc::new(ShardedCounter::new(2));
    let body = |who: usize| {
        let t = Instant::now();
        let mut local = 0u64;
        match kind {
            Kind::Atomic => {
                for i in 0..n {
                    work(i);
                    // Relaxed: a statistic, as in the pktgen study.
                    shared.fetch_add(black_box(1), Ordering::Relaxed);
                }
            }
            Kind::Padded => {
                for i in 0..n {
                    work(i);
                    // Relaxed: a statistic.
                    padded[who].fetch_add(black_box(1), Ordering::Relaxed);
                }
            }
            Kind::Handle => {
                let mut h = counter.handle();
                for i in 0..n {
                    work(i);
                    h.add(black_box(1));
                }
            }
            Kind::HandleLess => {
                for i in 0..n {
                    work(i);
                    counter.add(black_box(1));
                }
            }
            Kind::Local => {
                for i in 0..n {
                    work(i);
                    local += black_box(1);
                }
            }
        }
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        (ns, local)
    };
    let ((na, la), (nb, lb)) = pair(|| body(0), || body(1));
    // Relaxed: the threads are joined.
    let total = match kind {
        Kind::Atomic => shared.load(Ordering::Relaxed),
        Kind::Padded => padded[0].load(Ordering::Relaxed) + padded[1].load(Ordering::Relaxed),
        Kind::Handle | Kind::HandleLess => counter.sum(),
        Kind::Local => la + lb,
    };
    assert_eq!(total, 2 * n, "lost increments");
    ((na + nb) / 2.0, total)
}

/// The pktgen shape's packet generation: writes a 64-byte packet for sequence number `i`.
pub(crate) fn gen(i: u64) {
    let mut pkt = [0u64; 8];
    for (k, w) in pkt.iter_mut().enumerate() {
        *w = i ^ (k as u64);
    }
    black_box(&pkt);
}

/// Every counting method, with its name in the report.
pub(crate) const KINDS: [(&str, Kind); 5] = [
    ("flowline_handle", Kind::Handle),
    ("flowline_add", Kind::HandleLess),
    ("atomic", Kind::Atomic),
    ("padded", Kind::Padded),
    ("local", Kind::Local),
];

pub fn run(r: &mut Report) {
    let n: u64 = if r.quick { 1_000_000 } else { 100_000_000 };
    let impls: Vec<Impl> = KINDS
        .iter()
        .map(|&(name, kind)| -> Impl {
            (name, Box::new(move || vec![two_writers(kind, n, |_| {}).0]))
        })
        .collect();
    r.scenario(
        "counter_2writers_inc",
        &[Metric {
            suffix: "",
            unit: "ns",
            higher_is_better: false,
        }],
        impls,
        &[
            ("flowline_handle", "atomic"),
            ("flowline_handle", "padded"),
            ("flowline_handle", "local"),
            ("flowline_add", "atomic"),
        ],
    );

    // The pktgen shape: each iteration "generates" a packet (writes a 64-byte buffer) and
    // counts it. Packets per second per thread.
    let pn: u64 = if r.quick { 1_000_000 } else { 50_000_000 };
    let impls: Vec<Impl> = [("flowline_handle", Kind::Handle), ("atomic", Kind::Atomic)]
        .iter()
        .map(|&(name, kind)| -> Impl {
            (
                name,
                Box::new(move || vec![1e3 / two_writers(kind, pn, gen).0]),
            )
        })
        .collect();
    r.scenario(
        "counter_pktgen",
        &[Metric {
            suffix: "",
            unit: "Mpps/thread",
            higher_is_better: true,
        }],
        impls,
        &[("flowline_handle", "atomic")],
    );
}
