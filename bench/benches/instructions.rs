//! Instruction counts of the hot paths, with iai-callgrind: each benchmark runs its
//! operation [`N`] times in one thread under Callgrind, after a setup that is not counted,
//! so its count divided by `N` is the instructions per item (per packet for the
//! distributor). Counted instructions do not move with the host's placement of the
//! threads, so they are the regression gate: `bench/instructions-gate.py` compares them
//! with `bench/instructions-baseline.txt` (see that script).
//!
//! Rings hold 1024 slots of `u64` (non-zero for the niche ring) and start half full, so a
//! push or a pop never finds the ring full or empty; peers (rtrb 0.4, crossbeam's
//! `ArrayQueue`) run the same shapes in `benches/peers.rs`, a binary of their own (so
//! that a change to flowline's code cannot move how the compiler splits and inlines
//! theirs).
//!
//! Run: `cargo bench -p flowline-bench --bench instructions --bench peers` (needs
//! valgrind and `iai-callgrind-runner` of the same version as the `iai-callgrind`
//! dependency).

use std::hint::black_box;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use flowline::cell::AssignUnlessEqual;
use flowline::counter::ShardedCounter;
use flowline::distributor::nodes::{self, NodesConfig};
use flowline::distributor::{self, Config};
use flowline::fifo::{mpsc, niche, spsc, NoWait, Wait};
use flowline::lockmeter::{MeteredMutex, MeteredSpinLock};
use iai_callgrind::{
    library_benchmark, library_benchmark_group, main, Callgrind, EntryPoint, LibraryBenchmarkConfig,
};

#[macro_use]
mod shapes;
use shapes::{N, RING};

// ---- rings --------------------------------------------------------------------------------

type SpscPlain = (spsc::Producer<u64, NoWait>, spsc::Consumer<u64, NoWait>);
type SpscWait = (spsc::Producer<u64, Wait>, spsc::Consumer<u64, Wait>);
type MpscPlain = (mpsc::Producer<u64, NoWait>, mpsc::Consumer<u64, NoWait>);
type MpscWait = (mpsc::Producer<u64, Wait>, mpsc::Consumer<u64, Wait>);
type Niche = (niche::Producer<NonZeroU64>, niche::Consumer<NonZeroU64>);

fn spsc_plain() -> SpscPlain {
    let (mut tx, rx) = spsc::channel::<u64>(RING).unwrap();
    for i in 0..RING as u64 / 2 {
        tx.push(i).unwrap();
    }
    (tx, rx)
}

fn spsc_waitable() -> SpscWait {
    let (mut tx, rx) = spsc::waitable::<u64>(RING).unwrap();
    for i in 0..RING as u64 / 2 {
        tx.push(i).unwrap();
    }
    (tx, rx)
}

fn mpsc_plain() -> MpscPlain {
    let (mut tx, rx) = mpsc::channel::<u64>(RING).unwrap();
    for i in 0..RING as u64 / 2 {
        tx.push(i).unwrap();
    }
    (tx, rx)
}

fn mpsc_waitable() -> MpscWait {
    let (mut tx, rx) = mpsc::waitable::<u64>(RING).unwrap();
    for i in 0..RING as u64 / 2 {
        tx.push(i).unwrap();
    }
    (tx, rx)
}

fn niche_ring() -> Niche {
    let (mut tx, rx) = niche::channel::<NonZeroU64>(RING).unwrap();
    for i in 1..=RING as u64 / 2 {
        tx.push(NonZeroU64::new(i).unwrap()).unwrap();
    }
    (tx, rx)
}

single!(spsc_single, spsc_plain: SpscPlain, |tx, v| tx.push(v).unwrap(), |rx| rx
    .pop()
    .unwrap());
single!(spsc_waitable_single, spsc_waitable: SpscWait, |tx, v| tx
    .push(v)
    .unwrap(), |rx| rx.pop().unwrap());
single!(spsc_waitable_single_wait, spsc_waitable: SpscWait, |tx, v| tx
    .push_wait(v, Duration::MAX)
    .unwrap(), |rx| rx.pop_wait(Duration::MAX).unwrap());
single!(mpsc_single, mpsc_plain: MpscPlain, |tx, v| tx.push(v).unwrap(), |rx| rx
    .pop()
    .unwrap());
single!(mpsc_waitable_single, mpsc_waitable: MpscWait, |tx, v| tx
    .push(v)
    .unwrap(), |rx| rx.pop().unwrap());
single!(mpsc_waitable_single_wait, mpsc_waitable: MpscWait, |tx, v| tx
    .push_wait(v, Duration::MAX)
    .unwrap(), |rx| rx.pop_wait(Duration::MAX).unwrap());
single!(niche_single, niche_ring: Niche, |tx, v| tx
    .push(NonZeroU64::new(v).unwrap())
    .unwrap(), |rx| rx.pop().unwrap().get());
/// Polls a future with a waker that does nothing until it is ready, as an executor would
/// (it polls again at once when the future yields).
fn ready<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v;
        }
    }
}

/// The async forms on a ready ring, as a task awaits them: one `async` block pushes then
/// pops one item `N` times, and the executor polls it again whenever an end's cooperative
/// budget makes it yield (once per budget's worth of items).
macro_rules! single_async {
    ($name:ident, $setup:ident: $ends:ty) => {
        #[library_benchmark]
        #[bench::n(setup = $setup)]
        fn $name(ends: $ends) -> u64 {
            let (mut tx, mut rx) = ends;
            let sum = ready(async {
                let mut sum = 0u64;
                for i in 0..N as u64 {
                    tx.push_async(black_box(i | 1)).await.unwrap();
                    sum = sum.wrapping_add(rx.pop_async().await.unwrap());
                }
                sum
            });
            black_box((tx, rx));
            sum
        }
    };
}

// The same `async` block over futures that are always ready and do nothing
// (`std::future::ready`): what the task's state machine costs per push and pop alone, to
// read the async forms' counts against.
#[library_benchmark]
#[bench::n(setup = spsc_plain)]
fn async_floor(ends: SpscPlain) -> u64 {
    let (mut tx, mut rx) = ends;
    let sum = ready(async {
        let mut sum = 0u64;
        for i in 0..N as u64 {
            let v = std::future::ready(black_box(i | 1)).await;
            black_box(&mut tx);
            sum = sum.wrapping_add(std::future::ready(v).await);
            black_box(&mut rx);
        }
        sum
    });
    black_box((tx, rx));
    sum
}

single_async!(spsc_waitable_single_async, spsc_waitable: SpscWait);
single_async!(mpsc_waitable_single_async, mpsc_waitable: MpscWait);

burst!(spsc_burst8, spsc_plain: SpscPlain, 8, u64, 1, |tx, s| tx.push_burst(s), |rx, d| rx
    .pop_burst(&mut d));
burst!(spsc_burst32, spsc_plain: SpscPlain, 32, u64, 1, |tx, s| tx.push_burst(s), |rx, d| rx
    .pop_burst(&mut d));
burst!(
    spsc_waitable_burst32,
    spsc_waitable: SpscWait,
    32,
    u64,
    1,
    |tx, s| tx.push_burst(s),
    |rx, d| rx.pop_burst(&mut d)
);
burst!(
    spsc_waitable_burst32_wait,
    spsc_waitable: SpscWait,
    32,
    u64,
    1,
    |tx, s| tx.push_burst_wait(s, Duration::MAX).unwrap(),
    |rx, d| {
        rx.wait_for_items(Duration::MAX).unwrap();
        rx.pop_burst(&mut d)
    }
);
burst!(spsc_bulk32, spsc_plain: SpscPlain, 32, u64, 1, |tx, s| usize::from(tx.push_bulk(s))
    * 32, |rx, d| usize::from(rx.pop_bulk(&mut d)) * 32);
burst!(mpsc_burst8, mpsc_plain: MpscPlain, 8, u64, 1, |tx, s| tx.push_burst(s), |rx, d| rx
    .pop_burst(&mut d));
burst!(mpsc_burst32, mpsc_plain: MpscPlain, 32, u64, 1, |tx, s| tx.push_burst(s), |rx, d| rx
    .pop_burst(&mut d));
burst!(
    mpsc_waitable_burst32,
    mpsc_waitable: MpscWait,
    32,
    u64,
    1,
    |tx, s| tx.push_burst(s),
    |rx, d| rx.pop_burst(&mut d)
);
burst!(mpsc_bulk32, mpsc_plain: MpscPlain, 32, u64, 1, |tx, s| usize::from(tx.push_bulk(s))
    * 32, |rx, d| usize::from(rx.pop_bulk(&mut d)) * 32);
burst!(
    niche_burst8,
    niche_ring: Niche,
    8,
    NonZeroU64,
    NonZeroU64::MIN,
    |tx, s| tx.push_burst(s),
    |rx, d| rx.pop_burst(&mut d)
);
burst!(
    niche_burst32,
    niche_ring: Niche,
    32,
    NonZeroU64,
    NonZeroU64::MIN,
    |tx, s| tx.push_burst(s),
    |rx, d| rx.pop_burst(&mut d)
);
/// Zero-copy chunks of 32: filled from an iterator, read in place.
macro_rules! chunk {
    ($name:ident, $setup:ident: $ends:ty) => {
        #[library_benchmark]
        #[bench::n(setup = $setup)]
        fn $name(ends: $ends) -> u64 {
            let (mut tx, mut rx) = ends;
            let mut sum = 0u64;
            for i in 0..(N / 32) as u64 {
                let w = tx.write_chunk(32).fill_from_iter(&mut (i..i + 32));
                assert_eq!(w, 32);
                let c = rx.read_chunk(32);
                let (a, b) = c.as_slices();
                sum = sum.wrapping_add(a.iter().chain(b).sum::<u64>());
                c.commit_all();
            }
            black_box((tx, rx));
            sum
        }
    };
}

chunk!(spsc_chunk32, spsc_plain: SpscPlain);
chunk!(mpsc_chunk32, mpsc_plain: MpscPlain);

library_benchmark_group!(
    name = rings;
    benchmarks =
        spsc_single, spsc_waitable_single, spsc_waitable_single_wait, spsc_waitable_single_async,
        mpsc_single, mpsc_waitable_single, mpsc_waitable_single_wait, mpsc_waitable_single_async,
        async_floor, niche_single,
        spsc_burst8, spsc_burst32, spsc_waitable_burst32, spsc_waitable_burst32_wait, spsc_bulk32,
        mpsc_burst8, mpsc_burst32, mpsc_waitable_burst32, mpsc_bulk32,
        niche_burst8, niche_burst32, spsc_chunk32, mpsc_chunk32
);

// ---- the distributor -----------------------------------------------------------------------

type Tag = fn(&u64) -> u64;
type Dist = distributor::Distributor<u64, distributor::Atomic<Tag>>;
type OrderedDist = distributor::Distributor<u64, distributor::Ordered<u64>>;

/// Packets of 1024 flows (the packet is its tag), in bursts of 32.
fn packets() -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..N)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 1024
        })
        .collect()
}

fn dist_setup() -> (Dist, Vec<distributor::Worker<u64>>, Vec<u64>) {
    dist_workers(2)
}

/// The loop of `dist_2workers`: each burst of 32 distributed, received and handed back by
/// every worker, then collected.
#[inline(always)]
fn two_workers<S: distributor::Schedule<u64>>(
    d: distributor::Distributor<u64, S>,
    ws: Vec<distributor::Worker<u64>>,
    pkts: Vec<u64>,
) -> usize {
    two_workers_with(d, ws, pkts, |d, input| {
        d.distribute(input).unwrap();
    })
}

/// [`two_workers`] with the distributing call given.
#[inline(always)]
fn two_workers_with<S: distributor::Schedule<u64>>(
    mut d: distributor::Distributor<u64, S>,
    mut ws: Vec<distributor::Worker<u64>>,
    pkts: Vec<u64>,
    mut distribute: impl FnMut(&mut distributor::Distributor<u64, S>, &mut Vec<u64>),
) -> usize {
    let (mut input, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new());
    let mut back = 0;
    for burst in pkts.chunks(32) {
        input.extend_from_slice(burst);
        while !input.is_empty() {
            distribute(&mut d, &mut input);
            for w in ws.iter_mut() {
                w.recv_burst(&mut b, 64).unwrap();
                w.done_burst(&mut b).unwrap();
            }
        }
        back += d.collect(&mut out);
        out.clear();
    }
    black_box((d, ws));
    back
}

// Per packet: `distribute` of a burst of 32 to two workers, each worker's `recv_burst` and
// `done_burst`, and the distributor's `collect`.
#[library_benchmark]
#[bench::n(setup = dist_setup)]
fn dist_2workers((d, ws, pkts): (Dist, Vec<distributor::Worker<u64>>, Vec<u64>)) -> usize {
    two_workers(d, ws, pkts)
}

// `dist_2workers` with `distribute_wait` in place of `distribute`: what the waiting form
// costs while packets can be placed (it never waits here).
#[library_benchmark]
#[bench::n(setup = dist_setup)]
fn dist_2workers_wait((d, ws, pkts): (Dist, Vec<distributor::Worker<u64>>, Vec<u64>)) -> usize {
    two_workers_with(d, ws, pkts, |d, input| {
        d.distribute_wait(input, std::time::Duration::MAX).unwrap();
    })
}

/// One worker, flows `i % 1024` in order (so a burst of 32 holds 32 flows): the packets
/// of the hand-back order benchmarks.
fn dist_seq_setup() -> (Dist, Vec<distributor::Worker<u64>>, Vec<u64>) {
    let (d, ws, _) = dist_workers(1);
    (d, ws, (0..N as u64).map(|i| i % 1024).collect())
}

/// Each burst of 32 distributed, received by the one worker and handed back, in order
/// (`done_burst`) or in reverse (`done_at` by ticket, newest first), then collected.
#[inline(always)]
fn one_worker_handing_back<S: distributor::Schedule<u64>>(
    mut d: distributor::Distributor<u64, S>,
    mut ws: Vec<distributor::Worker<u64>>,
    pkts: Vec<u64>,
    reverse: bool,
) -> usize {
    let (mut input, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new());
    let mut back = 0;
    let w = &mut ws[0];
    for burst in pkts.chunks(32) {
        input.extend_from_slice(burst);
        while !input.is_empty() {
            d.distribute(&mut input).unwrap();
            let first = w.next_ticket();
            w.recv_burst(&mut b, 64).unwrap();
            if reverse {
                while let Some(p) = b.pop() {
                    w.done_at(first.nth(b.len()), p).unwrap();
                }
            } else {
                w.done_burst(&mut b).unwrap();
            }
        }
        back += d.collect(&mut out);
        out.clear();
    }
    black_box((d, ws));
    back
}

// Per packet: one worker handing every burst back in order.
#[library_benchmark]
#[bench::n(setup = dist_seq_setup)]
fn dist_1worker_in_order((d, ws, pkts): (Dist, Vec<distributor::Worker<u64>>, Vec<u64>)) -> usize {
    one_worker_handing_back(d, ws, pkts, false)
}

// Per packet: the same, every burst handed back in reverse across its 32 flows.
#[library_benchmark]
#[bench::n(setup = dist_seq_setup)]
fn dist_1worker_any_order((d, ws, pkts): (Dist, Vec<distributor::Worker<u64>>, Vec<u64>)) -> usize {
    one_worker_handing_back(d, ws, pkts, true)
}

/// An ordered distributor (`distributor::new_ordered`) with `workers` workers of credit
/// 256 and a reorder window of 1024, and the packets (their flows do not matter to it).
fn dist_ordered(workers: usize) -> (OrderedDist, Vec<distributor::Worker<u64>>, Vec<u64>) {
    let (d, ws) =
        distributor::new_ordered(Config::default().workers(workers).credit(256), 1024).unwrap();
    (d, ws, packets())
}

// Per packet: `dist_1worker_in_order` through an ordered distributor (no flow table; a
// sequence number per packet, released in order).
#[library_benchmark]
#[bench::n(setup = dist_ordered, args = (1))]
fn dist_1worker_ordered(
    (d, ws, pkts): (OrderedDist, Vec<distributor::Worker<u64>>, Vec<u64>),
) -> usize {
    one_worker_handing_back(d, ws, pkts, false)
}

// Per packet: `dist_2workers` through an ordered distributor: bursts spread over both
// workers whatever their flows, released in acceptance order.
#[library_benchmark]
#[bench::n(setup = dist_ordered, args = (2))]
fn dist_2workers_ordered(
    (d, ws, pkts): (OrderedDist, Vec<distributor::Worker<u64>>, Vec<u64>),
) -> usize {
    two_workers(d, ws, pkts)
}

/// A pipeline's packet: the flow in the low bits, the stage in the top bit.
/// A pipeline packet's stage, in its top two bits.
const STAGE_SHIFT: u32 = 62;

type PipeRoute = fn(&u64) -> (usize, u64);
type PipeDist = distributor::Distributor<u64, distributor::Pipeline<u64, PipeRoute>>;

/// A pipeline of `stages` with one worker of credit 256, and the packets
/// of `dist_seq_setup` (flows `i % 1024`, at stage 0).
fn pipe_setup(
    stages: &[distributor::StageType],
) -> (PipeDist, Vec<distributor::Worker<u64>>, Vec<u64>) {
    let route: PipeRoute = |p| ((p >> STAGE_SHIFT) as usize, p & ((1 << STAGE_SHIFT) - 1));
    let (d, ws) =
        distributor::new_pipeline(Config::default().workers(1).credit(256), stages, route).unwrap();
    (d, ws, (0..N as u64).map(|i| i % 1024).collect())
}

/// Each burst of 32 distributed and driven through the pipeline by its one worker: a
/// packet at a stage before `last` is forwarded to the next, the others complete, all
/// handed back with one `done_burst`; then collected.
#[inline(always)]
fn one_worker_through_stages(
    mut d: PipeDist,
    mut ws: Vec<distributor::Worker<u64>>,
    pkts: Vec<u64>,
    last: u64,
) -> usize {
    let (mut input, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new());
    let mut back = 0;
    let w = &mut ws[0];
    for burst in pkts.chunks(32) {
        input.extend_from_slice(burst);
        loop {
            d.distribute(&mut input).unwrap();
            w.recv_burst(&mut b, 64).unwrap();
            // Each packet before the last stage goes on to the next (its stage advanced in
            // place: a forward is a hand-back like a completion), the others complete; the
            // whole burst goes back at once.
            let mut forwarded = false;
            for p in b.iter_mut() {
                if *p >> STAGE_SHIFT < last {
                    *p += 1 << STAGE_SHIFT;
                    forwarded = true;
                }
            }
            w.done_burst(&mut b).unwrap();
            if input.is_empty() && !forwarded {
                break;
            }
        }
        back += d.collect(&mut out);
        out.clear();
    }
    black_box((d, ws));
    back
}

// Per packet: `dist_1worker_in_order` through a one-stage (atomic) pipeline: what the
// general scheduler costs the simple case.
#[library_benchmark]
#[bench::n(setup = pipe_setup, args = (&[distributor::StageType::Atomic]))]
fn pipe_a_1worker((d, ws, pkts): (PipeDist, Vec<distributor::Worker<u64>>, Vec<u64>)) -> usize {
    one_worker_through_stages(d, ws, pkts, 0)
}

// Per packet: an atomic then a parallel stage, the worker forwarding each packet once.
#[library_benchmark]
#[bench::n(setup = pipe_setup, args = (&[distributor::StageType::Atomic, distributor::StageType::Parallel]))]
fn pipe_ap_1worker((d, ws, pkts): (PipeDist, Vec<distributor::Worker<u64>>, Vec<u64>)) -> usize {
    one_worker_through_stages(d, ws, pkts, 1)
}

// Per packet: an ordered then an atomic stage (the ordered stage's order restored as the
// packets are forwarded).
#[library_benchmark]
#[bench::n(setup = pipe_setup, args = (&[distributor::StageType::Ordered, distributor::StageType::Atomic]))]
fn pipe_oa_1worker((d, ws, pkts): (PipeDist, Vec<distributor::Worker<u64>>, Vec<u64>)) -> usize {
    one_worker_through_stages(d, ws, pkts, 1)
}

// Per packet: ordered, atomic, then parallel.
#[library_benchmark]
#[bench::n(setup = pipe_setup, args = (&[distributor::StageType::Ordered, distributor::StageType::Atomic, distributor::StageType::Parallel]))]
fn pipe_oap_1worker((d, ws, pkts): (PipeDist, Vec<distributor::Worker<u64>>, Vec<u64>)) -> usize {
    one_worker_through_stages(d, ws, pkts, 2)
}

/// `dist_2workers` with the tag function boxed (`distributor::new_boxed`): what naming the
/// distributor's type without the closure's costs.
fn dist_boxed_setup() -> (
    distributor::Distributor<u64>,
    Vec<distributor::Worker<u64>>,
    Vec<u64>,
) {
    let (d, ws) =
        distributor::new_boxed(Config::default().workers(2).credit(256), |p: &u64| *p).unwrap();
    (d, ws, packets())
}

#[library_benchmark]
#[bench::n(setup = dist_boxed_setup)]
fn dist_2workers_boxed(
    (d, ws, pkts): (
        distributor::Distributor<u64>,
        Vec<distributor::Worker<u64>>,
        Vec<u64>,
    ),
) -> usize {
    two_workers(d, ws, pkts)
}

type Node = nodes::NodeDistributor<u64, Tag>;
/// Each node with its workers, and the packets.
type Layout = (Vec<(Node, Vec<distributor::Worker<u64>>)>, Vec<u64>);

fn nodes_setup() -> Layout {
    let layout = nodes::new(
        NodesConfig::default()
            .nodes(2)
            .workers_per_node(1)
            .credit(256)
            .bridge(1024),
        (|p: &u64| *p) as Tag,
    )
    .unwrap();
    (layout, packets())
}

// Per packet: two nodes, the packets entering at node 0 (about half of them cross the
// bridge to node 1), each node's worker taking and handing back, both nodes collecting.
#[library_benchmark]
#[bench::n(setup = nodes_setup)]
fn dist_2nodes((mut layout, pkts): Layout) -> usize {
    let (mut input, mut none, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut back = 0;
    for burst in pkts.chunks(32) {
        input.extend_from_slice(burst);
        while !input.is_empty() {
            for (k, (n, ws)) in layout.iter_mut().enumerate() {
                let v = if k == 0 { &mut input } else { &mut none };
                n.distribute(v).unwrap();
                for w in ws.iter_mut() {
                    w.recv_burst(&mut b, 64).unwrap();
                    w.done_burst(&mut b).unwrap();
                }
            }
        }
        for (n, _) in layout.iter_mut() {
            back += n.collect(&mut out);
        }
        out.clear();
    }
    black_box(layout);
    back
}

/// A distributor with `workers` workers of credit 256, and the packets.
fn dist_workers(workers: usize) -> (Dist, Vec<distributor::Worker<u64>>, Vec<u64>) {
    let (d, ws) = distributor::new(
        Config::default().workers(workers).credit(256),
        (|p: &u64| *p) as Tag,
    )
    .unwrap();
    (d, ws, packets())
}

/// Runs `f`, a call of the distributor's: what the `dist_lines` benchmark counts (its
/// entry point), so that the workers driven inline in the same thread are not counted.
#[inline(never)]
fn dist_side<R>(f: impl FnOnce() -> R) -> R {
    f()
}

// Per packet, the distributor's side of the loop of the `dist_lines` example (its line
// counts and these instructions describe the same code): `distribute` of bursts of 32 to
// W workers driven inline, each taking what it was sent and handing it back after every
// call, `collect` after each burst, and at the end the calls that bring the rest back.
// Only the distributor's calls are counted (the workers run on cores of their own in a
// real pipeline): the serial part, whose cost per packet must not grow with W.
#[library_benchmark(
    config = LibraryBenchmarkConfig::default()
        .tool(Callgrind::default().entry_point(EntryPoint::Custom("*::dist_side*".into())))
)]
#[bench::w1(setup = dist_workers, args = (1))]
#[bench::w2(setup = dist_workers, args = (2))]
#[bench::w4(setup = dist_workers, args = (4))]
#[bench::w8(setup = dist_workers, args = (8))]
#[bench::w14(setup = dist_workers, args = (14))]
fn dist_lines((mut d, mut ws, pkts): (Dist, Vec<distributor::Worker<u64>>, Vec<u64>)) -> usize {
    let (mut input, mut b, mut out) = (Vec::new(), Vec::new(), Vec::new());
    let mut back = 0;
    let mut round = |d: &mut Dist, input: &mut Vec<u64>| {
        dist_side(|| d.distribute(input)).unwrap();
        for w in ws.iter_mut() {
            w.recv_burst(&mut b, 64).unwrap();
            w.done_burst(&mut b).unwrap();
        }
    };
    for burst in pkts.chunks(32) {
        input.extend_from_slice(burst);
        while !input.is_empty() {
            round(&mut d, &mut input);
        }
        back += dist_side(|| d.collect(&mut out));
        out.clear();
    }
    while back < pkts.len() {
        round(&mut d, &mut input);
        back += dist_side(|| d.collect(&mut out));
        out.clear();
    }
    black_box(d);
    back
}

library_benchmark_group!(
    name = dist;
    benchmarks = dist_2workers, dist_2workers_wait, dist_2workers_boxed, dist_1worker_in_order,
        dist_1worker_any_order, dist_1worker_ordered, dist_2workers_ordered, dist_2nodes,
        dist_lines, pipe_a_1worker, pipe_ap_1worker, pipe_oa_1worker, pipe_oap_1worker
);

// ---- counters, cells, locks ------------------------------------------------------------------

#[library_benchmark]
fn counter_handle_add() -> u64 {
    let c = std::sync::Arc::new(ShardedCounter::new(2));
    let mut h = c.handle();
    for _ in 0..N {
        h.add(black_box(1));
    }
    drop(h);
    c.sum()
}

#[library_benchmark]
fn counter_shared_add() -> u64 {
    let c = std::sync::Arc::new(ShardedCounter::new(2));
    for _ in 0..N {
        c.add(black_box(1));
    }
    c.sum()
}

#[library_benchmark]
fn cell_assign_unchanged() -> u64 {
    let x = AtomicU64::new(7);
    let mut changed = 0;
    for _ in 0..N {
        changed += u64::from(x.assign_unless_equal(black_box(7), Ordering::Release));
    }
    changed
}

#[library_benchmark]
fn lock_metered_spin() -> u64 {
    let l: MeteredSpinLock<u64> = MeteredSpinLock::named("bench", 0);
    for _ in 0..N {
        *l.lock() += black_box(1);
    }
    let v = *l.lock();
    v
}

#[library_benchmark]
fn lock_metered_mutex() -> u64 {
    let l: MeteredMutex<u64> = MeteredMutex::named("bench", 0);
    for _ in 0..N {
        *l.lock().unwrap() += black_box(1);
    }
    let v = *l.lock().unwrap();
    v
}

library_benchmark_group!(
    name = others;
    benchmarks = counter_handle_add, counter_shared_add, cell_assign_unchanged,
        lock_metered_spin, lock_metered_mutex
);

main!(library_benchmark_groups = rings, dist, others);
