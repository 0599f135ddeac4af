//! `scale_*` scenarios: the primitives and the distributor at T threads, for the machines
//! that have the cores (`--threads 2,4,8,15`; by default every count of 2, 4, 8 and 15 that
//! the machine's CPUs hold, so only 2 on a 2-vCPU host: more threads than cores measure
//! the scheduler). Thread i is pinned to CPU i. Each repetition runs for `duration()` and
//! reports rates, so one figure costs the same time at every thread count.
//! - `scale_counter_{T}t`: T writers counting: total M increments/s, against one shared
//!   `fetch_add`, a padded `fetch_add` per thread, and a plain local integer.
//! - `scale_pktgen_{T}t`: the pktgen study's shape (generate a 64-byte packet, count it):
//!   Mpps per thread, flowline handle against one shared `fetch_add`.
//! - `scale_cell_{T}t`: T threads re-writing an unchanged value into 3 fields of one line
//!   (DPDK's virtio test): total M rewrites/s, assign-unless-equal against the store.
//! - `scale_cell_readers_{T}t`: 1 thread re-writing an unchanged value, T-1 reading the
//!   fields: the readers' total Mreads/s.
//! - `scale_mpsc_{T}t`: T-1 producers (bursts of 8) and one consumer on CPU 0: Mitems/s
//!   consumed, per-producer order checked, against crossbeam's `ArrayQueue`, `std`'s
//!   `sync_channel` and `Mutex<VecDeque>`.
//! - `scale_dist_{T}t`: one distributor (CPU 0) and T-1 workers, 1024 flows, bursts of 32;
//!   workers return every packet untouched: the distributor's own ceiling as workers grow.
//! - `scale_dist_work_{T}t`: the same with `WORK_ROUNDS` rounds of xorshift per packet in
//!   the workers (measured alone first); second figure: the share of T-1 workers' ideal
//!   rate reached.
//! - `scale_ordered_elephant_3t` (once, at the first T >= 4): one elephant flow through an
//!   ordered distributor (CPU 0) with 2 workers against 1, about 200 ns of work per
//!   packet, and against an atomic distributor with 2 workers (which keeps the flow on
//!   one): Mpkts/s.
//! - `scale_2nodes_work_{T'}t` (T >= 4; T' is T rounded down to even, the threads it
//!   uses): the multi-node layout, 2 nodes of (T-2)/2 workers each (node distributors on
//!   CPUs 0 and 1), packets entering at both nodes, against one distributor with T'-1
//!   workers, same work per packet. The nodes are
//!   declared, not read from the machine: on a one-socket machine this shows what the
//!   second distributor thread buys, not a socket link.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use flowline::counter::ShardedCounter;
use flowline::distributor::nodes::{self, NodesConfig};
use flowline::distributor::{self, Config};

use crate::cell::{Fields, Write};
use crate::counter::{gen, Kind, KINDS};
use crate::harness::{cpu_map, pin, Impl, Metric, Report};

/// How long each repetition runs, in ms: 200, or 20 with `--quick` (set by `run`).
static DURATION_MS: AtomicU64 = AtomicU64::new(200);

fn duration() -> Duration {
    // Relaxed: written once by `run` before any scenario thread starts.
    Duration::from_millis(DURATION_MS.load(Ordering::Relaxed))
}
/// Items between two looks at the stop flag.
const CHUNK: u64 = 1024;
/// Xorshift rounds per packet in the `_work` scenarios (about 60-100 ns on this host).
const WORK_ROUNDS: u32 = 64;
/// Flows in the distributor scenarios.
const FLOWS: u64 = 1024;

/// The thread counts to run: `--threads` if given, else those of 2, 4, 8, 15 that fit.
pub fn default_threads() -> Vec<usize> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    [2, 4, 8, 15].into_iter().filter(|&t| t <= cpus).collect()
}

/// The CPUs threads are spread over: `REPORT_CPUS`'s list if set, else the machine's.
fn cpus() -> usize {
    match cpu_map().len() {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Pins thread `i` to the report's CPU `i` (modulo [`cpus`], for counts above them).
fn pin_thread(i: usize) {
    pin(i % cpus());
}

/// Set by a thread of a scenario that panics (through [`AbortOnPanic`]); the loops that
/// wait on other threads check it and give up, so a failed check fails the run instead
/// of hanging it.
static ABORT: AtomicBool = AtomicBool::new(false);

/// Raises [`ABORT`] if dropped while its thread panics.
struct AbortOnPanic;

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Relaxed: only ends other threads' loops; the panic itself travels by `join`.
            ABORT.store(true, Ordering::Relaxed);
        }
    }
}

/// Panics if another thread of the scenario panicked (see [`ABORT`]).
#[inline]
fn check_abort() {
    // Relaxed: see `AbortOnPanic`.
    if ABORT.load(Ordering::Relaxed) {
        panic!("another thread of this scenario panicked");
    }
}

/// Runs `body(i, stop)` on `t` pinned threads started together, raises `stop` after
/// `duration()`, and returns each thread's result with its own seconds from the start to
/// its return.
fn timed<R: Send>(t: usize, body: impl Fn(usize, &AtomicBool) -> R + Sync) -> Vec<(R, f64)> {
    let stop = CachePadded::new(AtomicBool::new(false));
    let start = Barrier::new(t + 1);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..t)
            .map(|i| {
                let (body, stop, start) = (&body, &stop, &start);
                s.spawn(move || {
                    let _guard = AbortOnPanic;
                    pin_thread(i);
                    start.wait();
                    let t0 = Instant::now();
                    let r = body(i, stop);
                    (r, t0.elapsed().as_secs_f64())
                })
            })
            .collect();
        start.wait();
        std::thread::sleep(duration());
        // Relaxed: the flag only ends the loops; results travel through `join`.
        stop.store(true, Ordering::Relaxed);
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Relaxed load of the stop flag (see `timed`).
#[inline(always)]
fn stopped(stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed)
}

/// T writers counting until stopped, `work` before each increment. Returns the total
/// increments per second (M) and the mean per-thread rate (M/s).
fn count(t: usize, kind: Kind, work: impl Fn(u64) + Sync) -> (f64, f64) {
    let shared = CachePadded::new(AtomicU64::new(0));
    let padded: Vec<CachePadded<AtomicU64>> = (0..t)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();
    let counter = Arc::new(ShardedCounter::new(t));
    let rs = timed(t, |i, stop| {
        let mut n = 0u64;
        let mut local = 0u64;
        let mut h = matches!(kind, Kind::Handle).then(|| counter.handle());
        while !stopped(stop) {
            for k in 0..CHUNK {
                work(n + k);
                match kind {
                    Kind::Handle => h.as_mut().unwrap().add(black_box(1)),
                    Kind::HandleLess => counter.add(black_box(1)),
                    // Relaxed in both: a statistic, as in the pktgen study.
                    Kind::Atomic => {
                        shared.fetch_add(black_box(1), Ordering::Relaxed);
                    }
                    Kind::Padded => {
                        padded[i].fetch_add(black_box(1), Ordering::Relaxed);
                    }
                    Kind::Local => local += black_box(1),
                }
            }
            n += CHUNK;
        }
        drop(h);
        (n, local)
    });
    let n: u64 = rs.iter().map(|((n, _), _)| n).sum();
    // Relaxed: the threads are joined.
    let total = match kind {
        Kind::Handle | Kind::HandleLess => counter.sum(),
        Kind::Atomic => shared.load(Ordering::Relaxed),
        Kind::Padded => padded.iter().map(|p| p.load(Ordering::Relaxed)).sum(),
        Kind::Local => rs.iter().map(|((_, l), _)| l).sum(),
    };
    assert_eq!(total, n, "lost increments");
    let rates: Vec<f64> = rs.iter().map(|((n, _), s)| *n as f64 / s / 1e6).collect();
    (rates.iter().sum(), rates.iter().sum::<f64>() / t as f64)
}

/// `scale_cell_{T}t`: total M rewrites (of 3 fields) per second.
fn cell_writers(t: usize, w: Write) -> f64 {
    let line = CachePadded::new(Fields::default());
    let rs = timed(t, |_, stop| {
        let mut n = 0u64;
        while !stopped(stop) {
            for _ in 0..CHUNK {
                w.put3(&line, black_box(0));
            }
            n += CHUNK;
        }
        n
    });
    rs.iter().map(|(n, s)| *n as f64 / s / 1e6).sum()
}

/// `scale_cell_readers_{T}t`: thread 0 re-writes, the others read; the readers' total
/// Mreads/s (one read = the 3 fields).
fn cell_readers(t: usize, w: Write) -> f64 {
    let line = CachePadded::new(Fields::default());
    let rs = timed(t, |i, stop| {
        let mut n = 0u64;
        let mut sum = 0u64;
        while !stopped(stop) {
            for _ in 0..CHUNK {
                if i == 0 {
                    w.put3(&line, black_box(0));
                } else {
                    // Relaxed: line traffic only.
                    sum = sum
                        .wrapping_add(line.a.load(Ordering::Relaxed))
                        .wrapping_add(line.b.load(Ordering::Relaxed))
                        .wrapping_add(line.c.load(Ordering::Relaxed));
                }
            }
            n += CHUNK;
        }
        black_box(sum);
        n
    });
    rs.iter().skip(1).map(|(n, s)| *n as f64 / s / 1e6).sum()
}

/// T-1 producers pushing bursts of 8 until stopped, the consumer (thread 0) draining until
/// every producer is done and the queue is empty. Returns consumed Mitems/s.
fn mpsc<P, C>(t: usize, make: impl FnOnce() -> (P, C)) -> f64
where
    P: FnMut(&[u64]) -> usize + Send + Clone,
    C: FnMut(&mut [u64]) -> usize + Send,
{
    let producers = t - 1;
    let (prod, cons) = make();
    let prods: Vec<Mutex<Option<P>>> = (0..producers)
        .map(|_| Mutex::new(Some(prod.clone())))
        .collect();
    drop(prod);
    let cons = Mutex::new(Some(cons));
    let finished = CachePadded::new(AtomicUsize::new(0));
    let rs = timed(t, |i, stop| {
        if i == 0 {
            let mut cons = cons.lock().unwrap().take().unwrap();
            let mut next = vec![0u64; producers];
            let mut buf = [0u64; 8];
            let mut got = 0u64;
            loop {
                // Acquire: pairs with the producers' Release increment after their last
                // push, so a drain that follows sees every item they pushed.
                let all_done = finished.load(Ordering::Acquire) == producers;
                let k = cons(&mut buf);
                for &v in &buf[..k] {
                    let p = (v >> 48) as usize;
                    assert_eq!(v & 0xffff_ffff_ffff, next[p], "per-producer order");
                    next[p] += 1;
                }
                got += k as u64;
                if k == 0 {
                    if all_done {
                        break;
                    }
                    check_abort();
                    std::hint::spin_loop();
                }
            }
            assert_eq!(got, next.iter().sum::<u64>());
            got
        } else {
            let p = (i - 1) as u64;
            let mut prod = prods[i - 1].lock().unwrap().take().unwrap();
            let mut buf = [0u64; 8];
            let mut i = 0u64;
            while !stopped(stop) {
                for (j, b) in buf.iter_mut().enumerate() {
                    *b = p << 48 | (i + j as u64);
                }
                let mut sent = 0;
                while sent < 8 {
                    let s = prod(&buf[sent..]);
                    if s == 0 {
                        check_abort();
                        std::hint::spin_loop();
                    }
                    sent += s;
                }
                i += 8;
            }
            drop(prod);
            // Release: see the consumer's Acquire load.
            finished.fetch_add(1, Ordering::Release);
            i
        }
    });
    let sent: u64 = rs.iter().skip(1).map(|(n, _)| n).sum();
    assert_eq!(rs[0].0, sent, "every pushed item was consumed once");
    rs[0].0 as f64 / rs[0].1 / 1e6
}

/// The workers' per-packet work.
#[inline(always)]
fn work(p: u64, rounds: u32) -> u64 {
    let mut x = p | 1;
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Nanoseconds per packet of `work` alone on this thread.
fn work_ns(rounds: u32) -> f64 {
    let n = 1u64 << 20;
    let t = Instant::now();
    let mut acc = 0u64;
    for p in 0..n {
        acc ^= work(black_box(p), rounds);
    }
    black_box(acc);
    t.elapsed().as_nanos() as f64 / n as f64
}

/// A worker thread's loop: bursts of up to 32, `rounds` of work per packet, every packet
/// returned; ends when its distributor is gone.
fn worker_loop(mut w: distributor::Worker<u64>, rounds: u32) {
    let _guard = AbortOnPanic;
    let mut b = Vec::with_capacity(32);
    while let Ok(k) = w.recv_burst(&mut b, 32) {
        if k > 0 {
            let mut acc = 0u64;
            for &p in &b {
                acc ^= work(p, rounds);
            }
            black_box(acc);
            w.done_burst(&mut b).unwrap();
        }
    }
}

/// One distributor on CPU 0 generating packets for `duration()`, then draining; T-1 workers
/// on CPUs 1.. . Returns Mpkts/s from the start until every packet came back.
fn dist(t: usize, rounds: u32) -> f64 {
    let (d, ws) = distributor::new(Config::default().workers(t - 1).credit(512), |p: &u64| {
        *p % FLOWS
    })
    .unwrap();
    drive(d, ws, t, rounds)
}

/// One elephant flow (every packet of one tag) through a distributor with `workers`
/// workers on their own CPUs, `rounds` of work per packet: Mpkts/s. Ordered (the flow
/// spreads over the workers, window of 4 credits per worker) or atomic (it stays on one).
fn elephant(workers: usize, ordered: bool, rounds: u32) -> f64 {
    let config = Config::default().workers(workers).credit(512);
    if ordered {
        let (d, ws) = distributor::new_ordered(config, 4 * 512 * workers).unwrap();
        drive(d, ws, workers + 1, rounds)
    } else {
        let (d, ws) = distributor::new(config, |_: &u64| 7).unwrap();
        drive(d, ws, workers + 1, rounds)
    }
}

/// [`dist`]'s run: the distributor `d` on CPU 0, its `t - 1` workers `ws` on CPUs 1..,
/// `rounds` of work per packet; Mpkts/s over `duration()`.
fn drive<S: distributor::Schedule<u64> + Send>(
    mut d: distributor::Distributor<u64, S>,
    ws: Vec<distributor::Worker<u64>>,
    t: usize,
    rounds: u32,
) -> f64 {
    let start = Barrier::new(t);
    std::thread::scope(|s| {
        for (i, w) in ws.into_iter().enumerate() {
            let start = &start;
            s.spawn(move || {
                pin_thread(i + 1);
                start.wait();
                worker_loop(w, rounds);
            });
        }
        let h = s.spawn(|| {
            let _guard = AbortOnPanic;
            pin_thread(0);
            start.wait();
            let t0 = Instant::now();
            let (mut next, mut back, mut sum) = (0u64, 0u64, 0u64);
            let mut input: Vec<u64> = Vec::with_capacity(32);
            let mut out: Vec<u64> = Vec::with_capacity(4096);
            let mut generating = true;
            while generating || back < next {
                if generating {
                    while input.len() < 32 {
                        input.push(next);
                        next += 1;
                    }
                    generating = t0.elapsed() < duration();
                }
                if !input.is_empty() {
                    d.distribute(&mut input).unwrap();
                }
                d.collect(&mut out);
                if out.is_empty() {
                    check_abort();
                }
                back += out.len() as u64;
                for &p in &out {
                    sum = sum.wrapping_add(p);
                }
                out.clear();
            }
            let secs = t0.elapsed().as_secs_f64();
            assert_eq!(sum, next.wrapping_mul(next.wrapping_sub(1)) / 2, "checksum");
            drop(d); // the workers see Disconnected and end
            next as f64 / secs / 1e6
        });
        h.join().unwrap()
    })
}

/// The 2-node layout with `wpn` workers per node on their own threads: returns Mpkts/s
/// from the start until every packet entered at either node came back.
fn two_nodes(wpn: usize, rounds: u32) -> f64 {
    let layout = nodes::new(
        NodesConfig::default()
            .nodes(2)
            .workers_per_node(wpn)
            .credit(512)
            .bridge(1024),
        |p: &u64| *p % FLOWS,
    )
    .unwrap();
    let threads = 2 + 2 * wpn;
    let start = Barrier::new(threads);
    // Per node: packets entered (published once generation ends), and whether it ended;
    // packets collected at both nodes, published every 4096 and at the end. Relaxed
    // counts, read for termination; Acquire/Release on `ended` so a node that sees both
    // ended also sees both final `entered` counts.
    let entered: [CachePadded<AtomicU64>; 2] = Default::default();
    let ended: [CachePadded<AtomicBool>; 2] = Default::default();
    let collected = CachePadded::new(AtomicU64::new(0));
    std::thread::scope(|s| {
        let mut hs = Vec::new();
        let mut cpu = 2;
        for (id, (mut node, ws)) in layout.into_iter().enumerate() {
            for w in ws {
                let start = &start;
                let c = cpu;
                cpu += 1;
                s.spawn(move || {
                    pin_thread(c);
                    start.wait();
                    worker_loop(w, rounds);
                });
            }
            let (start, entered, ended, collected) = (&start, &entered, &ended, &collected);
            hs.push(s.spawn(move || {
                let _guard = AbortOnPanic;
                pin_thread(id);
                start.wait();
                let t0 = Instant::now();
                let mut next = id as u64;
                let (mut n_in, mut sum_in, mut sum_out, mut unpublished) = (0u64, 0u64, 0u64, 0);
                let mut input: Vec<u64> = Vec::with_capacity(32);
                let mut out: Vec<u64> = Vec::with_capacity(4096);
                let mut generating = true;
                loop {
                    if generating {
                        while input.len() < 32 {
                            input.push(next);
                            sum_in = sum_in.wrapping_add(next);
                            n_in += 1;
                            next += 2;
                        }
                        if t0.elapsed() >= duration() {
                            generating = false;
                        }
                    }
                    node.distribute(&mut input).unwrap();
                    let k = node.collect(&mut out) as u64;
                    if k == 0 {
                        check_abort();
                    }
                    unpublished += k;
                    for &p in &out {
                        sum_out = sum_out.wrapping_add(p);
                    }
                    out.clear();
                    if !generating && input.is_empty() && !ended[id].load(Ordering::Relaxed) {
                        entered[id].store(n_in, Ordering::Relaxed);
                        // Release: publishes `entered[id]` to the Acquire loads below.
                        ended[id].store(true, Ordering::Release);
                    }
                    if unpublished >= 4096 || (!generating && unpublished > 0) {
                        collected.fetch_add(unpublished, Ordering::Relaxed);
                        unpublished = 0;
                    }
                    if ended[0].load(Ordering::Acquire)
                        && ended[1].load(Ordering::Acquire)
                        && collected.load(Ordering::Relaxed)
                            == entered[0].load(Ordering::Relaxed)
                                + entered[1].load(Ordering::Relaxed)
                    {
                        break;
                    }
                }
                let secs = t0.elapsed().as_secs_f64();
                // The node drops here: its workers see Disconnected and end.
                (secs, n_in, sum_in, sum_out)
            }));
        }
        let rs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let sum_in = rs[0].2.wrapping_add(rs[1].2);
        let sum_out = rs[0].3.wrapping_add(rs[1].3);
        assert_eq!(sum_in, sum_out, "every packet came back once");
        let secs = rs[0].0.max(rs[1].0);
        (rs[0].1 + rs[1].1) as f64 / secs / 1e6
    })
}

fn rate(unit: &'static str) -> Metric {
    Metric {
        suffix: "",
        unit,
        higher_is_better: true,
    }
}

pub fn run(r: &mut Report, threads: &[usize]) {
    // Relaxed: no scenario thread runs yet.
    DURATION_MS.store(if r.quick { 20 } else { 200 }, Ordering::Relaxed);
    // The 2-node scenario's thread counts run so far (T rounded down to even).
    let mut nodes_done = Vec::new();
    let mut elephant_done = false;
    for &t in threads {
        let impls: Vec<Impl> = KINDS
            .iter()
            .map(|&(name, kind)| -> Impl {
                (name, Box::new(move || vec![count(t, kind, |_| {}).0]))
            })
            .collect();
        r.scenario(
            &format!("scale_counter_{t}t"),
            &[rate("Mincs/s")],
            impls,
            &[
                ("flowline_handle", "atomic"),
                ("flowline_handle", "padded"),
                ("flowline_handle", "local"),
                ("flowline_add", "atomic"),
            ],
        );

        let impls: Vec<Impl> = [("flowline_handle", Kind::Handle), ("atomic", Kind::Atomic)]
            .iter()
            .map(|&(name, kind)| -> Impl { (name, Box::new(move || vec![count(t, kind, gen).1])) })
            .collect();
        r.scenario(
            &format!("scale_pktgen_{t}t"),
            &[rate("Mpps/thread")],
            impls,
            &[("flowline_handle", "atomic")],
        );

        for (name, f) in [
            ("scale_cell", cell_writers as fn(usize, Write) -> f64),
            ("scale_cell_readers", cell_readers),
        ] {
            let unit = if name == "scale_cell" {
                "Mrewrites/s"
            } else {
                "Mreads/s"
            };
            let impls: Vec<Impl> = vec![
                ("flowline", Box::new(move || vec![f(t, Write::Flowline)])),
                ("store", Box::new(move || vec![f(t, Write::Store)])),
            ];
            r.scenario(
                &format!("{name}_{t}t"),
                &[rate(unit)],
                impls,
                &[("flowline", "store")],
            );
        }

        const RING: usize = 1024;
        let impls: Vec<Impl> = vec![
            (
                "flowline",
                Box::new(move || {
                    vec![mpsc(t, || {
                        let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u64>(RING).unwrap();
                        (
                            move |b: &[u64]| tx.push_burst(b),
                            move |out: &mut [u64]| rx.pop_burst(out),
                        )
                    })]
                }),
            ),
            (
                "crossbeam",
                Box::new(move || {
                    vec![mpsc(t, || {
                        let q = Arc::new(crossbeam_queue::ArrayQueue::<u64>::new(RING));
                        let q2 = Arc::clone(&q);
                        (
                            move |b: &[u64]| b.iter().take_while(|&&v| q.push(v).is_ok()).count(),
                            move |out: &mut [u64]| {
                                let mut k = 0;
                                while k < out.len() {
                                    match q2.pop() {
                                        Some(v) => out[k] = v,
                                        None => break,
                                    }
                                    k += 1;
                                }
                                k
                            },
                        )
                    })]
                }),
            ),
            (
                "std",
                Box::new(move || {
                    vec![mpsc(t, || {
                        let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(RING);
                        (
                            move |b: &[u64]| {
                                b.iter().take_while(|&&v| tx.try_send(v).is_ok()).count()
                            },
                            move |out: &mut [u64]| {
                                let mut k = 0;
                                while k < out.len() {
                                    match rx.try_recv() {
                                        Ok(v) => out[k] = v,
                                        Err(_) => break,
                                    }
                                    k += 1;
                                }
                                k
                            },
                        )
                    })]
                }),
            ),
            (
                "mutex",
                Box::new(move || {
                    vec![mpsc(t, || {
                        let q = Arc::new(Mutex::new(
                            std::collections::VecDeque::<u64>::with_capacity(RING),
                        ));
                        let q2 = Arc::clone(&q);
                        (
                            move |b: &[u64]| {
                                let mut g = q.lock().unwrap();
                                let k = b.len().min(RING - g.len());
                                g.extend(&b[..k]);
                                k
                            },
                            move |out: &mut [u64]| {
                                let mut g = q2.lock().unwrap();
                                let k = out.len().min(g.len());
                                for (o, v) in out.iter_mut().zip(g.drain(..k)) {
                                    *o = v;
                                }
                                k
                            },
                        )
                    })]
                }),
            ),
        ];
        r.scenario(
            &format!("scale_mpsc_{t}t"),
            &[rate("Mitems/s")],
            impls,
            &[
                ("flowline", "crossbeam"),
                ("flowline", "std"),
                ("flowline", "mutex"),
            ],
        );

        let impls: Vec<Impl> = vec![("flowline", Box::new(move || vec![dist(t, 0)]))];
        r.scenario(&format!("scale_dist_{t}t"), &[rate("Mpkts/s")], impls, &[]);

        let name = format!("scale_dist_work_{t}t");
        if r.wants(&name) {
            let ns = work_ns(WORK_ROUNDS);
            println!("scale_work_per_pkt {ns:.2} ns");
            let ideal = (t - 1) as f64 * 1e3 / ns;
            let impls: Vec<Impl> = vec![(
                "flowline",
                Box::new(move || {
                    let v = dist(t, WORK_ROUNDS);
                    vec![v, v / ideal]
                }),
            )];
            r.scenario(
                &name,
                &[
                    rate("Mpkts/s"),
                    Metric {
                        suffix: "_of_ideal",
                        unit: "share",
                        higher_is_better: true,
                    },
                ],
                impls,
                &[],
            );
        }

        // One elephant flow over 2 workers against 1, ordered, with about 200 ns of work
        // per packet; the atomic distributor keeps the flow on one worker. Once, at the
        // first thread count of 4 or more (3 CPUs used).
        let name = "scale_ordered_elephant_3t";
        if t >= 4 && !elephant_done && r.wants(name) {
            elephant_done = true;
            let rounds = ((200.0 / work_ns(WORK_ROUNDS)) * f64::from(WORK_ROUNDS)).max(1.0) as u32;
            println!("scale_elephant_work_per_pkt {:.2} ns", work_ns(rounds));
            let impls: Vec<Impl> = vec![
                (
                    "flowline_ordered_2w",
                    Box::new(move || vec![elephant(2, true, rounds)]),
                ),
                (
                    "flowline_ordered_1w",
                    Box::new(move || vec![elephant(1, true, rounds)]),
                ),
                (
                    "flowline_atomic_2w",
                    Box::new(move || vec![elephant(2, false, rounds)]),
                ),
            ];
            r.scenario(
                name,
                &[rate("Mpkts/s")],
                impls,
                &[
                    ("flowline_ordered_2w", "flowline_ordered_1w"),
                    ("flowline_ordered_2w", "flowline_atomic_2w"),
                ],
            );
        }

        let wpn = t.saturating_sub(2) / 2;
        let used = 2 + 2 * wpn;
        if wpn >= 1 && !nodes_done.contains(&used) {
            nodes_done.push(used);
            let impls: Vec<Impl> = vec![
                (
                    "flowline_2nodes",
                    Box::new(move || vec![two_nodes(wpn, WORK_ROUNDS)]),
                ),
                (
                    "flowline_1node",
                    Box::new(move || vec![dist(used, WORK_ROUNDS)]),
                ),
            ];
            r.scenario(
                &format!("scale_2nodes_work_{used}t"),
                &[rate("Mpkts/s")],
                impls,
                &[("flowline_2nodes", "flowline_1node")],
            );
        }
    }
}
