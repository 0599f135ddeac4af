//! Integration tests of the distributor's guarantees (numbered as in the `distributor`
//! module docs; 6 is bad input): each test would fail without the guarantee it names.
#![cfg(all(not(loom), feature = "std"))]

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use flowline::distributor::{self, Config, ConfigError, FlushError, JoinError, NoWorkers, Worker};

use crate::support::rng::Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pkt {
    pub(crate) flow: u64,
    pub(crate) seq: u64,
    pub(crate) id: u64,
}

pub(crate) fn tag(p: &Pkt) -> u64 {
    p.flow
}

pub(crate) fn recv_all<T>(w: &mut Worker<T>) -> Vec<T> {
    let mut v = Vec::new();
    w.recv_burst(&mut v, usize::MAX).unwrap();
    v
}

pub(crate) const WAIT: Duration = Duration::from_secs(30);

// ---- bad input (invariant 6) -------------------------------------------------------------

#[test]
fn bad_configs_are_errors() {
    let e = |c| distributor::new(c, tag).err();
    assert_eq!(
        e(Config::default().workers(0).credit(8)),
        Some(ConfigError::ZeroWorkers)
    );
    assert_eq!(
        e(Config::default()
            .workers(distributor::MAX_WORKERS + 1)
            .credit(8)),
        Some(ConfigError::TooManyWorkers(distributor::MAX_WORKERS + 1))
    );
    assert_eq!(
        e(Config::default().workers(1).credit(0)),
        Some(ConfigError::BadCredit(0))
    );
    assert!(ConfigError::BadCredit(0).to_string().contains("1 to"));
}

#[test]
fn handing_back_a_packet_never_received_is_an_error() {
    let (_d, mut ws) = distributor::new(Config::default().workers(1).credit(4), tag).unwrap();
    let p = Pkt {
        flow: 1,
        seq: 0,
        id: 0,
    };
    assert_eq!(ws[0].done(p).unwrap_err().0, p);
    assert_eq!(ws[0].reschedule(p).unwrap_err().0, p);
    assert_eq!(ws[0].drop_packet(p).unwrap_err().0, p);
}

#[test]
fn rejoin_errors() {
    let (mut d, ws) = distributor::new(Config::default().workers(2).credit(4), tag).unwrap();
    assert_eq!(d.rejoin(5).unwrap_err(), JoinError::NoSuchWorker(5));
    assert_eq!(d.rejoin(0).unwrap_err(), JoinError::Active(0));
    drop(ws);
}

// ---- invariants 1 and 2, deterministic ---------------------------------------------------

#[test]
fn in_flight_flow_sticks_to_its_worker_idle_flow_may_move() {
    let (mut d, mut ws) = distributor::new(Config::default().workers(2).credit(8), tag).unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    let p = |flow, seq| Pkt {
        flow,
        seq,
        id: flow * 100 + seq,
    };
    d.distribute(&mut vec![p(1, 0)]).unwrap(); // A -> w0 (tie, lowest index)
    d.distribute(&mut vec![p(2, 0)]).unwrap(); // B -> w1 (w0 busier)
    let a0 = recv_all(&mut ws[0]);
    let b0 = recv_all(&mut ws[1]);
    assert_eq!((a0[0].flow, b0[0].flow), (1, 2));
    // DPDK burst mode's hole: w0 is still processing A while more A arrives along with a
    // new flow; the new A must go to w0 even though w1 is equally loaded.
    d.distribute(&mut vec![p(3, 0), p(1, 1)]).unwrap();
    let w0 = recv_all(&mut ws[0]);
    let w1 = recv_all(&mut ws[1]);
    assert!(
        w0.contains(&p(1, 1)),
        "in-flight flow moved: w0 {w0:?} w1 {w1:?}"
    );
    assert!(!w1.iter().any(|x| x.flow == 1));
    // Finish everything on w0 (A idle), keep w1 busy, then send A again: it may move, and
    // goes to the least loaded worker, now w0... make w0 the busier one instead.
    for x in a0.into_iter().chain(w0) {
        ws[0].done(x).unwrap();
    }
    let mut out = Vec::new();
    d.collect(&mut out);
    for x in b0.into_iter().chain(w1) {
        ws[1].done(x).unwrap();
    }
    d.distribute(&mut vec![p(9, 0)]).unwrap(); // w0 (tie) gets a new flow -> w0 busier
    d.distribute(&mut vec![p(1, 2)]).unwrap(); // A idle: moves to w1, the least loaded
    let w1 = recv_all(&mut ws[1]);
    assert_eq!(
        w1,
        vec![p(1, 2)],
        "an idle flow goes to the least loaded worker"
    );
}

#[test]
fn backpressure_keeps_a_flows_later_packets_with_the_caller() {
    let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(2), tag).unwrap();
    let p = |flow, seq| Pkt {
        flow,
        seq,
        id: flow * 100 + seq,
    };
    let mut burst = vec![p(1, 0), p(1, 1), p(1, 2), p(2, 0), p(1, 3)];
    assert_eq!(d.distribute(&mut burst).unwrap(), 2);
    // Credit 2: flow 1's third packet is left, so is its fourth; flow 2 is also left (no
    // credit anywhere), and order is kept.
    assert_eq!(burst, vec![p(1, 2), p(2, 0), p(1, 3)]);
    assert_eq!(d.stats().snapshot().get("backpressured"), Some(3));
    assert_eq!(d.stats().snapshot().get("accepted"), Some(2));
    for x in recv_all(&mut ws[0]) {
        ws[0].done(x).unwrap();
    }
    assert_eq!(d.distribute(&mut burst).unwrap(), 2);
    assert_eq!(burst, vec![p(1, 3)]);
    assert_eq!(d.stats().snapshot().get("accepted"), Some(4));
    // The first packet already finds no credit: nothing is accepted, nothing reordered.
    let mut late = vec![p(3, 0), p(1, 4)];
    assert_eq!(d.distribute(&mut late).unwrap(), 0);
    assert_eq!(late, vec![p(3, 0), p(1, 4)]);
    assert_eq!(d.stats().snapshot().get("accepted"), Some(4));
    assert_eq!(recv_all(&mut ws[0]), vec![p(1, 2), p(2, 0)]);
}

// ---- invariant 4: reschedule -------------------------------------------------------------

#[test]
fn rescheduled_packet_is_next_in_its_new_flow() {
    let (mut d, mut ws) = distributor::new(Config::default().workers(2).credit(8), tag).unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    let p = |flow, seq| Pkt {
        flow,
        seq,
        id: flow * 100 + seq,
    };
    d.distribute(&mut vec![p(1, 0)]).unwrap();
    let mut got = recv_all(&mut ws[0]);
    let mut x = got.pop().unwrap();
    x.flow = 7; // re-tag into flow 7
    ws[0].reschedule(x).unwrap();
    // Flow 7 packet that the distributor receives after the reschedule.
    let late = p(7, 1);
    d.distribute(&mut vec![late]).unwrap();
    let all: Vec<Pkt> = ws.iter_mut().flat_map(recv_all).collect();
    let flow7: Vec<u64> = all.iter().filter(|q| q.flow == 7).map(|q| q.id).collect();
    assert_eq!(flow7, vec![100, 701], "the rescheduled packet goes first");
    assert_eq!(d.stats().snapshot().get("rescheduled"), Some(1));
}

thread_local! {
    /// `poison_tag` panics at the next poisoned packet it sees while this is set (once).
    static ARMED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[derive(Debug)]
struct Poisoned {
    flow: u64,
    seq: u64,
    poison: bool,
}

fn poison_tag(p: &Poisoned) -> u64 {
    if p.poison && ARMED.with(|a| a.replace(false)) {
        panic!("tag panics (test)");
    }
    p.flow
}

/// Two reschedules into flow g wait in the backlog (g's worker has no credit), and `tag`
/// panics on the second while the backlog is being routed: g must still get them in the
/// order they were made. (A routing pass that tagged each packet as it went had already
/// moved the first to the back when the panic came: the backlog was left rotated.)
#[test]
fn a_panicking_tag_leaves_the_backlog_in_order() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(1), poison_tag).unwrap();
    let p = |flow, seq, poison| Poisoned { flow, seq, poison };
    let (g, a) = (1, 2);
    d.distribute(&mut vec![p(g, 0, false)]).unwrap();
    let (wg, g0) = (0..2)
        .find_map(|w| recv_all(&mut ws[w]).pop().map(|x| (w, x)))
        .expect("g at a worker");
    let wo = 1 - wg;
    // Two packets of flow a, each rescheduled into g by the other worker; g's worker has
    // no credit, so both wait in the backlog.
    for seq in 1..=2 {
        d.distribute(&mut vec![p(a, seq, false)]).unwrap();
        let mut x = recv_all(&mut ws[wo]).pop().expect("a at the other worker");
        x.flow = g;
        x.poison = seq == 2;
        ws[wo].reschedule(x).unwrap();
    }
    ARMED.with(|c| c.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        d.distribute(&mut Vec::new()).unwrap();
    }));
    assert!(r.is_err(), "tag panicked on the second reschedule");
    ws[wg].done(g0).unwrap();
    let mut seen = Vec::new();
    for _ in 0..10 {
        d.distribute(&mut Vec::new()).unwrap();
        for x in recv_all(&mut ws[wg]) {
            seen.push(x.seq);
            ws[wg].done(x).unwrap();
        }
    }
    assert_eq!(seen, [1, 2], "g's reschedules in the order they were made");
}

// ---- invariant 3: last worker leaves -----------------------------------------------------

#[test]
fn last_worker_leaving_gives_packets_back_in_order() {
    let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), tag).unwrap();
    let p = |flow, seq| Pkt {
        flow,
        seq,
        id: flow * 100 + seq,
    };
    d.distribute(&mut vec![p(1, 0), p(1, 1), p(2, 0), p(1, 2)])
        .unwrap();
    let w = ws.pop().unwrap();
    let mut w = w;
    let mut held = Vec::new();
    w.recv_burst(&mut held, 2).unwrap(); // receives 2; 2 stay in its ring
    let first = held.remove(0);
    w.done(first).unwrap();
    w.leave(held).unwrap(); // 1 unprocessed handed back
    let mut next = vec![p(3, 0)];
    assert_eq!(d.distribute(&mut next), Err(NoWorkers));
    assert_eq!(
        next,
        vec![p(1, 1), p(2, 0), p(1, 2), p(3, 0)],
        "nothing lost, order kept"
    );
    let mut out = Vec::new();
    d.collect(&mut out);
    assert_eq!(out, vec![p(1, 0)]);
    // Re-join and everything flows again.
    let mut w = d.rejoin(0).unwrap();
    assert_eq!(d.distribute(&mut next).unwrap(), 4);
    let got = recv_all(&mut w);
    assert_eq!(got, vec![p(1, 1), p(2, 0), p(1, 2), p(3, 0)]);
    for x in got {
        w.done(x).unwrap();
    }
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(out.len(), 5);
}

#[test]
fn flush_with_no_workers_gives_backlog_back() {
    let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), tag).unwrap();
    let p = |seq| Pkt {
        flow: 1,
        seq,
        id: seq,
    };
    d.distribute(&mut vec![p(0), p(1)]).unwrap();
    ws.pop().unwrap().leave(Vec::new()).unwrap(); // never received: recovered from its ring
    let mut out = Vec::new();
    match d.flush(&mut out, WAIT) {
        Err(FlushError::NoWorkers(v)) => assert_eq!(v, vec![p(0), p(1)]),
        other => panic!("{other:?}"),
    }
}

// ---- invariants 1, 3, 4 with threads -----------------------------------------------------

/// Per-flow "who is processing it now" and "last sequence processed", shared by workers.
pub(crate) struct Checker {
    owner: Vec<AtomicUsize>,
    last: Vec<AtomicU64>,
}

const NOBODY: usize = usize::MAX;

impl Checker {
    pub(crate) fn new(flows: usize) -> Checker {
        Checker {
            owner: (0..flows).map(|_| AtomicUsize::new(NOBODY)).collect(),
            last: (0..flows).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Marks `p` processed by worker `w`: fails if another worker is inside the same flow,
    /// or if the flow's order went backwards.
    pub(crate) fn process(&self, w: usize, p: &Pkt, spin: u32) {
        let f = p.flow as usize;
        let prev = self.owner[f].swap(w, Ordering::AcqRel);
        assert_eq!(
            prev, NOBODY,
            "flow {f} processed by workers {prev} and {w} at once"
        );
        if f + 1 < self.last.len() {
            // (The last flow collects rescheduled packets, whose order across workers is
            // the order the distributor saw the reschedules; only exclusivity is checked.)
            let last = self.last[f].load(Ordering::Relaxed);
            assert!(p.seq >= last, "flow {f}: seq {} after {last}", p.seq);
            self.last[f].store(p.seq + 1, Ordering::Relaxed);
        }
        for _ in 0..spin {
            std::hint::spin_loop();
        }
        self.owner[f].store(NOBODY, Ordering::Release);
    }
}

/// Runs workers that process, reschedule (to a flow of their own choosing, with the next
/// sequence number that flow expects after all input) or drop, and every `leave_every`
/// bursts leave with part of their burst unprocessed and are re-joined by the main thread.
#[test]
fn threads_keep_affinity_order_and_exactly_once() {
    let flows = 64usize;
    let n: u64 = if cfg!(miri) { 60 } else { 200_000 };
    let workers = 3;
    let (mut d, ws) = distributor::new(Config::default().workers(workers).credit(32), tag).unwrap();
    let checker = Arc::new(Checker::new(flows + 1));
    let rejoin_tx_rx = std::sync::mpsc::channel::<usize>();
    let (left_tx, left_rx) = rejoin_tx_rx;
    let dropped = Arc::new(AtomicU64::new(0));
    let spawn = |mut w: Worker<Pkt>, leave_after: u64| {
        let checker = Arc::clone(&checker);
        let left_tx = left_tx.clone();
        let dropped = Arc::clone(&dropped);
        std::thread::spawn(move || {
            let mut burst = Vec::new();
            let mut bursts = 0u64;
            loop {
                match w.recv_burst(&mut burst, 16) {
                    Err(_) => return,
                    Ok(0) => {
                        std::thread::yield_now();
                        continue;
                    }
                    Ok(_) => {}
                }
                bursts += 1;
                if bursts == leave_after {
                    // Process half, leave with the rest unprocessed.
                    let keep = burst.split_off(burst.len() / 2);
                    for p in burst.drain(..) {
                        checker.process(w.id(), &p, 20);
                        w.done(p).unwrap();
                    }
                    let id = w.id();
                    w.leave(keep).unwrap();
                    left_tx.send(id).unwrap();
                    return;
                }
                for mut p in burst.drain(..) {
                    checker.process(w.id(), &p, 20);
                    match p.id % 97 {
                        // Re-tag into the reschedule flow (index `flows`); its order is
                        // the order of reschedules, checked with seq = id (increasing per
                        // worker is not enough across workers, so seq 0 for all).
                        0 if p.flow != flows as u64 => {
                            p.flow = flows as u64;
                            p.seq = 0;
                            w.reschedule(p).unwrap();
                        }
                        1 => {
                            dropped.fetch_add(1, Ordering::Relaxed);
                            w.drop_packet(p).unwrap();
                        }
                        _ => w.done(p).unwrap(),
                    }
                }
            }
        })
    };
    let mut threads: Vec<_> = ws
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            // Each worker leaves (and is re-joined) after a few bursts; fewer under Miri.
            let first = if cfg!(miri) { 2 } else { 50 };
            spawn(w, first + (first + 20) * i as u64)
        })
        .collect();
    let mut seqs = vec![0u64; flows];
    let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
    let mut input: Vec<Pkt> = (0..n)
        .map(|id| {
            let f = (rng.next_u64() % flows as u64) as usize;
            seqs[f] += 1;
            Pkt {
                flow: f as u64,
                seq: seqs[f] - 1,
                id,
            }
        })
        .collect();
    input.reverse();
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let mut rejoins = 0;
    let deadline = std::time::Instant::now() + WAIT;
    while !input.is_empty() || !pending.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "watchdog: no progress"
        );
        while pending.len() < 32 {
            match input.pop() {
                Some(p) => pending.push(p),
                None => break,
            }
        }
        // NoWorkers: all away for a moment (the packets stay pending); they re-join below.
        let _ = d.distribute(&mut pending);
        d.collect(&mut out);
        while let Ok(id) = left_rx.try_recv() {
            // The leave may not be seen yet; retry until the distributor has it.
            let w = loop {
                assert!(
                    std::time::Instant::now() < deadline,
                    "watchdog: leave never seen"
                );
                d.collect(&mut out);
                match d.rejoin(id) {
                    Ok(w) => break w,
                    Err(JoinError::Active(_)) => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            };
            rejoins += 1;
            threads.push(spawn(w, u64::MAX));
        }
    }
    d.flush(&mut out, WAIT).unwrap();
    let totals = d.worker_totals();
    drop(d);
    for t in threads {
        t.join().unwrap();
    }
    let ids: HashSet<u64> = out.iter().map(|p| p.id).collect();
    assert_eq!(ids.len(), out.len(), "a packet came back twice");
    assert_eq!(
        out.len() as u64 + dropped.load(Ordering::Relaxed),
        n,
        "returned + dropped must equal input"
    );
    assert_eq!(totals.get("dropped"), Some(dropped.load(Ordering::Relaxed)));
    assert!(rejoins >= 1 || cfg!(miri), "the leave/re-join path ran");
}

// ---- invariant 5: a stalled worker delays only its own flows -----------------------------

#[test]
fn stalled_worker_delays_only_its_flows() {
    // Credit 1: once the stalled worker holds flow 0's packet it gets nothing else, so
    // exactly flow 0 is held back (with a larger credit, the flows it took before stalling
    // would be held back too, and only those).
    let (mut d, ws) = distributor::new(Config::default().workers(2).credit(1), tag).unwrap();
    let gate = Arc::new(Barrier::new(2));
    let mut ws = ws.into_iter();
    let mut w0 = ws.next().unwrap();
    let mut w1 = ws.next().unwrap();
    let g = Arc::clone(&gate);
    let stalled = std::thread::spawn(move || {
        let mut b = Vec::new();
        while w0.recv_burst(&mut b, 64).unwrap() == 0 {
            std::thread::yield_now();
        }
        g.wait(); // stall until the main thread has seen other flows complete
        loop {
            for p in b.drain(..) {
                w0.done(p).unwrap();
            }
            match w0.recv_burst(&mut b, 64) {
                Err(_) => return,
                Ok(_) => std::thread::yield_now(),
            }
        }
    });
    let live = std::thread::spawn(move || {
        let mut b = Vec::new();
        loop {
            match w1.recv_burst(&mut b, 64) {
                Err(_) => return,
                Ok(_) => {
                    for p in b.drain(..) {
                        w1.done(p).unwrap();
                    }
                }
            }
        }
    });
    // Flow 0 goes to w0, which stalls holding it.
    let mut first = vec![Pkt {
        flow: 0,
        seq: 0,
        id: 0,
    }];
    d.distribute(&mut first).unwrap();
    while d.worker_totals().get("received") != Some(1) {
        std::thread::yield_now();
    }
    // 1000 packets of flows 1..=9 and more of flow 0: flow 0 is held back (w0 stalled),
    // the other flows all complete through w1.
    // Miri interprets every spin of these threads: keep its run small.
    let n: u64 = if cfg!(miri) { 30 } else { 1000 };
    let mut input: Vec<Pkt> = (1..=n)
        .map(|i| Pkt {
            flow: i % 10,
            seq: i,
            id: i,
        })
        .collect();
    let mut out = Vec::new();
    let mut spins = 0u64;
    let others = input.iter().filter(|p| p.flow != 0).count();
    while out.len() < others {
        d.distribute(&mut input).unwrap();
        d.collect(&mut out);
        spins += 1;
        assert!(
            spins < 50_000_000,
            "other flows stopped behind the stalled worker"
        );
    }
    assert!(out.iter().all(|p| p.flow != 0));
    assert!(
        input.iter().all(|p| p.flow == 0),
        "only the stalled flow is held back"
    );
    gate.wait();
    while !input.is_empty() {
        d.distribute(&mut input).unwrap();
        d.collect(&mut out);
    }
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(out.len() as u64, n + 1);
    drop(d);
    stalled.join().unwrap();
    live.join().unwrap();
}

// ---- flush sleeps, and still sees every way a packet comes back -------------------------

#[test]
fn sleeping_flush_sees_slow_completions_and_hand_backs() {
    // Tags are flows; the worker reschedules packet 0 to flow 100 (routed again by the
    // flush itself) and completes everything else after delays longer than the flush's
    // spinning, so the flush must have slept and been woken (or timed out a nap) to finish.
    let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(16), |p: &u64| {
        if *p >= 1000 {
            100
        } else {
            *p
        }
    })
    .unwrap();
    let mut w = ws.pop().unwrap();
    d.distribute(&mut (0..8).collect()).unwrap();
    let t = std::thread::spawn(move || {
        let mut got = Vec::new();
        while got.len() < 8 {
            w.recv_burst_wait(&mut got, 16, WAIT).unwrap();
        }
        std::thread::sleep(Duration::from_millis(30));
        let first = got.remove(0);
        w.reschedule(first + 1000)
            .map_err(|_| "reschedule")
            .unwrap();
        std::thread::sleep(Duration::from_millis(30));
        w.done_burst(&mut got).unwrap();
        let mut again = Vec::new();
        while again.is_empty() {
            w.recv_burst_wait(&mut again, 16, WAIT).unwrap();
        }
        assert_eq!(again, [1000]);
        std::thread::sleep(Duration::from_millis(30));
        w.done_burst(&mut again).unwrap();
        w
    });
    let mut out = Vec::new();
    d.flush(&mut out, WAIT).unwrap();
    let _w = t.join().unwrap();
    out.sort_unstable();
    assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 1000]);
}

/// Waits (yielding, at most 30 s) until a flush of `w`'s distributor has announced that
/// it sleeps, then 20 ms more, so that it is past its re-check and blocked (a hand-back
/// during the re-check would be seen without any wake-up).
fn until_the_flush_sleeps<T>(w: &flowline::distributor::Worker<T>) {
    let t = std::time::Instant::now();
    while !w.flush_is_asleep() {
        assert!(t.elapsed() < WAIT, "the flush never went to sleep");
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(20));
}

#[test]
fn hand_backs_wake_a_sleeping_flush() {
    // Naps of an hour: the flush can only finish within its 30 s if the worker's
    // hand-backs wake it, a reschedule (control ring) and then a completion, each posted
    // while it sleeps. A lost wake-up shows as a timeout, not as a slow test.
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    d.set_flush_naps(Duration::from_secs(3600), Duration::from_secs(3600));
    let mut w = ws.pop().unwrap();
    d.distribute(&mut vec![7]).unwrap();
    let t = std::thread::spawn(move || {
        let mut got = Vec::new();
        w.recv_burst_wait(&mut got, 8, WAIT).unwrap();
        until_the_flush_sleeps(&w);
        w.reschedule(got.pop().unwrap())
            .map_err(|_| "reschedule")
            .unwrap();
        w.recv_burst_wait(&mut got, 8, WAIT).unwrap();
        until_the_flush_sleeps(&w);
        w.done_burst(&mut got).unwrap();
        w
    });
    let mut out = Vec::new();
    d.flush(&mut out, WAIT).unwrap();
    let _w = t.join().unwrap();
    assert_eq!(out, [7]);
}

#[test]
fn flush_follows_a_reschedule_chain_across_two_workers() {
    // Packets 0..4 on flows 0..4; each worker reschedules every packet it gets to the next
    // flow (tag + 1) until its tag reaches 40, then completes it. A flush started right
    // away must route every hand-back (they arrive on the control rings) and return all
    // four, exactly once.
    let (mut d, ws) =
        distributor::new(Config::default().workers(2).credit(8), |p: &u64| *p).unwrap();
    let stop = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = ws
        .into_iter()
        .map(|mut w| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut got = Vec::new();
                while stop.load(Ordering::Acquire) == 0 {
                    got.clear();
                    match w.recv_burst_wait(&mut got, 8, Duration::from_millis(5)) {
                        Ok(_) | Err(flowline::wait::WaitError::Timeout) => {}
                        Err(e) => panic!("{e:?}"),
                    }
                    for p in got.drain(..) {
                        if p < 40 {
                            w.reschedule(p + 1).map_err(|_| "reschedule").unwrap();
                        } else {
                            w.done(p).map_err(|_| "done").unwrap();
                        }
                    }
                }
                w
            })
        })
        .collect();
    d.distribute(&mut (0..4).collect()).unwrap();
    let mut out = Vec::new();
    d.flush(&mut out, WAIT).unwrap();
    stop.store(1, Ordering::Release);
    let _ws: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(out, [40, 40, 40, 40]);
}
