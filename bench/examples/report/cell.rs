//! `cell_*` scenarios: DPDK's virtio measurement of assign-unless-equal, and what the check
//! costs a lone thread.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use flowline::cell::AssignUnlessEqual;

use crate::harness::{alone, pair, Impl, Metric, Report};

/// Three fields on one line, as in the virtio test, and a fourth that the reading writers
/// of `cell_2writers_unchanged_reading` read.
#[derive(Default)]
pub(crate) struct Fields {
    pub(crate) a: AtomicU64,
    pub(crate) b: AtomicU64,
    pub(crate) c: AtomicU64,
    pub(crate) d: AtomicU64,
}

#[derive(Clone, Copy)]
pub(crate) enum Write {
    Store,
    Flowline,
}

impl Write {
    #[inline(always)]
    fn put(self, f: &AtomicU64, v: u64) {
        match self {
            // Relaxed in both: the scenario measures line traffic, not ordering.
            Write::Store => f.store(v, Ordering::Relaxed),
            Write::Flowline => {
                f.assign_unless_equal(v, Ordering::Relaxed);
            }
        }
    }

    #[inline(always)]
    pub(crate) fn put3(self, line: &Fields, v: u64) {
        self.put(&line.a, v);
        self.put(&line.b, v);
        self.put(&line.c, v);
    }
}

/// The writers' loop, kept out of line so its code can be read in the disassembly.
#[inline(never)]
fn rewrite_loop(w: Write, line: &Fields, iters: u64) {
    for _ in 0..iters {
        w.put3(line, 0);
    }
}

/// The writers' loop as a packet loop: each iteration does some work of its own (a chain
/// of dependent multiplies, tens of ns), writes the three fields and reads the line's
/// fourth, as a driver reads its ring's state. Between two iterations of one writer the
/// other has run, so a plain store has taken the line away and the read waits for it;
/// in the write-only loop each writer keeps the line for many iterations and its stores
/// wait in the store buffer, where no instruction waits for them.
#[inline(never)]
fn rewrite_read_loop(w: Write, line: &Fields, iters: u64) -> u64 {
    let mut seen = 0u64;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..iters {
        for _ in 0..WORK {
            x = black_box(x)
                .wrapping_mul(0x2545_f491_4f6c_dd1d)
                .wrapping_add(1);
        }
        w.put3(line, 0);
        seen = seen.wrapping_add(line.d.load(Ordering::Relaxed));
    }
    seen.wrapping_add(black_box(x) & 1)
}

/// Dependent multiplies per iteration of [`rewrite_read_loop`].
const WORK: u32 = 32;

/// Both writers of the write-only loop, on one shared line (`shared`) or each on a line of
/// its own: the sum of their times per iteration.
fn writers(w: Write, shared: bool, iters: u64) -> Vec<f64> {
    let lines = [
        CachePadded::new(Fields::default()),
        CachePadded::new(Fields::default()),
    ];
    let second = if shared { &lines[0] } else { &lines[1] };
    let body = |line: &Fields| {
        let t = Instant::now();
        rewrite_loop(w, line, iters);
        t.elapsed().as_nanos() as f64
    };
    let (ta, tb) = pair(|| body(&lines[0]), || body(second));
    vec![(ta + tb) / iters as f64]
}

fn impls<'a>(f: impl Fn(Write) -> Vec<f64> + 'a + Copy) -> Vec<Impl<'a>> {
    vec![
        ("flowline", Box::new(move || f(Write::Flowline))),
        ("store", Box::new(move || f(Write::Store))),
    ]
}

pub fn run(r: &mut Report) {
    let iters: u64 = if r.quick { 1_000_000 } else { 100_000_000 };

    // (a) The virtio shape: two threads, each re-writing an unchanged value into 3 fields of
    // one shared line, `iters` times; the figure is the sum of both threads' times per
    // iteration.
    r.scenario(
        "cell_2writers_unchanged",
        &[Metric {
            suffix: "",
            unit: "ns",
            higher_is_better: false,
        }],
        impls(move |w| {
            let line = CachePadded::new(Fields::default());
            let body = || {
                let t = Instant::now();
                rewrite_loop(w, &line, iters);
                t.elapsed().as_nanos() as f64
            };
            let (ta, tb) = pair(body, body);
            vec![(ta + tb) / iters as f64]
        }),
        &[("flowline", "store")],
    );

    // (a') The same writers as packet loops that also read a field of the line (see
    // `rewrite_read_loop`): the line transfers of a plain store, which the write-only
    // loop's store buffer hides, now delay the reads.
    let iters_rw = iters / 10;
    r.scenario(
        "cell_2writers_unchanged_reading",
        &[Metric {
            suffix: "",
            unit: "ns",
            higher_is_better: false,
        }],
        impls(move |w| {
            let line = CachePadded::new(Fields::default());
            let body = || {
                let t = Instant::now();
                black_box(rewrite_read_loop(w, &line, iters_rw));
                t.elapsed().as_nanos() as f64
            };
            let (ta, tb) = pair(body, body);
            vec![(ta + tb) / iters_rw as f64]
        }),
        &[("flowline", "store")],
    );

    // (a'') The write-only loop of (a) with each writer on a line of its own, beside the
    // plain store on the shared line: where the two plain-store rows match, the shared
    // line's transfers cost the write-only loop nothing (its stores wait in the store
    // buffer, which no instruction waits for), and a check before the store cannot win
    // there; what it costs is its own loads and branches.
    r.scenario(
        "cell_2writers_private",
        &[Metric {
            suffix: "",
            unit: "ns",
            higher_is_better: false,
        }],
        vec![
            (
                "store",
                Box::new(move || writers(Write::Store, false, iters)),
            ),
            (
                "store_shared",
                Box::new(move || writers(Write::Store, true, iters)),
            ),
            (
                "flowline",
                Box::new(move || writers(Write::Flowline, false, iters)),
            ),
        ],
        &[("store", "store_shared"), ("flowline", "store")],
    );

    // (b) One writer re-writing an unchanged value, one reader reading the fields: reader
    // reads per second (headline), and the writer's time per write.
    let reads: u64 = if r.quick { 1_000_000 } else { 100_000_000 };
    r.scenario(
        "cell_reader_unchanged",
        &[
            Metric {
                suffix: "",
                unit: "Mreads/s",
                higher_is_better: true,
            },
            Metric {
                suffix: "_writer",
                unit: "ns",
                higher_is_better: false,
            },
        ],
        impls(move |w| {
            let line = CachePadded::new(Fields::default());
            let done = CachePadded::new(AtomicBool::new(false));
            let (writer_ns, reader_rate) = pair(
                || {
                    let t = Instant::now();
                    let mut n = 0u64;
                    // Relaxed: `done` only ends the loop; nothing is published through it.
                    while !done.load(Ordering::Relaxed) {
                        for _ in 0..64 {
                            w.put3(&line, 0);
                        }
                        n += 64;
                    }
                    t.elapsed().as_nanos() as f64 / n as f64
                },
                || {
                    let t = Instant::now();
                    let mut sum = 0u64;
                    for _ in 0..reads {
                        // One "read" = the three fields, as the virtio reader does.
                        sum = sum
                            .wrapping_add(line.a.load(Ordering::Relaxed))
                            .wrapping_add(line.b.load(Ordering::Relaxed))
                            .wrapping_add(line.c.load(Ordering::Relaxed));
                    }
                    let el = t.elapsed().as_secs_f64();
                    done.store(true, Ordering::Relaxed);
                    black_box(sum);
                    reads as f64 / el / 1e6
                },
            );
            vec![reader_rate, writer_ns]
        }),
        &[("flowline", "store")],
    );

    // (c) One thread alone: what the check costs when nobody else looks.
    for (scenario, changing) in [
        ("cell_1thread_unchanged", false),
        ("cell_1thread_changing", true),
    ] {
        r.scenario(
            scenario,
            &[Metric {
                suffix: "",
                unit: "ns",
                higher_is_better: false,
            }],
            impls(move |w| {
                let x = CachePadded::new(AtomicU64::new(0));
                let mask = if changing { 1 } else { 0 };
                let ns = alone(|| {
                    let t = Instant::now();
                    for i in 0..iters {
                        w.put(&x, black_box(i & mask));
                    }
                    t.elapsed().as_nanos() as f64
                });
                vec![ns / iters as f64]
            }),
            &[("flowline", "store")],
        );
    }
}
