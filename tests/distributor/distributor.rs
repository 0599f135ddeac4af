//! Integration tests of the distributor's guarantees (numbered as in the `distributor`
//! module docs; 6 is bad input): each test would fail without the guarantee it names.
#![cfg(all(not(loom), feature = "std"))]

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use flowline::distributor::{self, Config, ConfigError, FlushError, JoinError, NoWorkers, Worker};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pkt {
    flow: u64,
    seq: u64,
    id: u64,
}

fn tag(p: &Pkt) -> u64 {
    p.flow
}

fn recv_all<T>(w: &mut Worker<T>) -> Vec<T> {
    let mut v = Vec::new();
    w.recv_burst(&mut v, usize::MAX).unwrap();
    v
}

const WAIT: Duration = Duration::from_secs(30);

// ---- bad input (invariant 6) -------------------------------------------------------------

#[test]
fn bad_configs_are_errors() {
    let e = |c| distributor::new(c, tag).err();
    assert_eq!(
        e(Config {
            workers: 0,
            credit: 8
        }),
        Some(ConfigError::ZeroWorkers)
    );
    assert_eq!(
        e(Config {
            workers: distributor::MAX_WORKERS + 1,
            credit: 8
        }),
        Some(ConfigError::TooManyWorkers(distributor::MAX_WORKERS + 1))
    );
    assert_eq!(
        e(Config {
            workers: 1,
            credit: 0
        }),
        Some(ConfigError::BadCredit(0))
    );
    assert!(ConfigError::BadCredit(0).to_string().contains("1 to"));
}

#[test]
fn handing_back_a_packet_never_received_is_an_error() {
    let (_d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 4,
        },
        tag,
    )
    .unwrap();
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
    let (mut d, ws) = distributor::new(
        Config {
            workers: 2,
            credit: 4,
        },
        tag,
    )
    .unwrap();
    assert_eq!(d.rejoin(5).unwrap_err(), JoinError::NoSuchWorker(5));
    assert_eq!(d.rejoin(0).unwrap_err(), JoinError::Active(0));
    drop(ws);
}

// ---- invariants 1 and 2, deterministic ---------------------------------------------------

#[test]
fn in_flight_flow_sticks_to_its_worker_idle_flow_may_move() {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 2,
            credit: 8,
        },
        tag,
    )
    .unwrap();
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
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 2,
        },
        tag,
    )
    .unwrap();
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
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 2,
            credit: 8,
        },
        tag,
    )
    .unwrap();
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
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 2,
            credit: 1,
        },
        poison_tag,
    )
    .unwrap();
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
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 8,
        },
        tag,
    )
    .unwrap();
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
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 8,
        },
        tag,
    )
    .unwrap();
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
struct Checker {
    owner: Vec<AtomicUsize>,
    last: Vec<AtomicU64>,
}

const NOBODY: usize = usize::MAX;

impl Checker {
    fn new(flows: usize) -> Checker {
        Checker {
            owner: (0..flows).map(|_| AtomicUsize::new(NOBODY)).collect(),
            last: (0..flows).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Marks `p` processed by worker `w`: fails if another worker is inside the same flow,
    /// or if the flow's order went backwards.
    fn process(&self, w: usize, p: &Pkt, spin: u32) {
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
    let (mut d, ws) = distributor::new(
        Config {
            workers,
            credit: 32,
        },
        tag,
    )
    .unwrap();
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
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut input: Vec<Pkt> = (0..n)
        .map(|id| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = (x % flows as u64) as usize;
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
    let (mut d, ws) = distributor::new(
        Config {
            workers: 2,
            credit: 1,
        },
        tag,
    )
    .unwrap();
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
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 16,
        },
        |p: &u64| if *p >= 1000 { 100 } else { *p },
    )
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
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 8,
        },
        |p: &u64| *p,
    )
    .unwrap();
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
    let (mut d, ws) = distributor::new(
        Config {
            workers: 2,
            credit: 8,
        },
        |p: &u64| *p,
    )
    .unwrap();
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

// ---- workers added at run time and removed for good ------------------------------------

/// A distributor that starts with one worker gains workers at run time and loses them for
/// good under load: each worker leaves after a few bursts (half its last burst handed back
/// unprocessed), the main thread removes it and adds another (reusing the freed ids), and a
/// stats thread reads the registry all along. Affinity, per-flow order and exactly once
/// hold throughout; the registry's totals never go backwards (removed workers' counters are
/// folded in), list each id at most once, and end equal to what the workers did.
#[test]
fn workers_added_and_removed_under_load_keep_order_and_exactly_once() {
    let flows = 32usize;
    let n: u64 = if cfg!(miri) { 80 } else { 50_000 };
    let (mut d, ws) = distributor::new(
        Config {
            workers: 1,
            credit: 16,
        },
        tag,
    )
    .unwrap();
    let registry = d.registry();
    let checker = Arc::new(Checker::new(flows));
    let (left_tx, left_rx) = std::sync::mpsc::channel::<usize>();
    let dropped = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let registry = registry.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut last = [0u64; 6];
            let mut reads = 0u64;
            while !stop.load(Ordering::Acquire) {
                let t = *registry.totals().values();
                for (k, (now, before)) in t.iter().zip(&last).enumerate() {
                    assert!(
                        now >= before,
                        "registry total {k} went back: {before} -> {now}"
                    );
                }
                last = t;
                let ids: Vec<usize> = registry.workers().iter().map(|w| w.id).collect();
                let unique: HashSet<usize> = ids.iter().copied().collect();
                assert_eq!(unique.len(), ids.len(), "an id listed twice: {ids:?}");
                reads += 1;
                std::thread::yield_now();
            }
            reads
        })
    };
    let spawn = |mut w: Worker<Pkt>, leave_after: u64| {
        let checker = Arc::clone(&checker);
        let left_tx = left_tx.clone();
        let dropped = Arc::clone(&dropped);
        std::thread::spawn(move || {
            let mut burst = Vec::new();
            let mut bursts = 0u64;
            loop {
                match w.recv_burst(&mut burst, 8) {
                    Err(_) => return,
                    Ok(0) => {
                        std::thread::yield_now();
                        continue;
                    }
                    Ok(_) => {}
                }
                bursts += 1;
                if bursts == leave_after {
                    let keep = burst.split_off(burst.len() / 2);
                    for p in burst.drain(..) {
                        checker.process(w.id(), &p, 10);
                        w.done(p).unwrap();
                    }
                    let id = w.id();
                    w.leave(keep).unwrap();
                    left_tx.send(id).unwrap();
                    return;
                }
                for p in burst.drain(..) {
                    checker.process(w.id(), &p, 10);
                    if p.id % 89 == 1 {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        w.drop_packet(p).unwrap();
                    } else {
                        w.done(p).unwrap();
                    }
                }
            }
        })
    };
    let life = |k: u64| {
        if cfg!(miri) {
            2 + k % 3
        } else {
            30 + (k * 37) % 90
        }
    };
    let mut made = 0u64;
    let mut threads: Vec<_> = ws
        .into_iter()
        .map(|w| {
            made += 1;
            spawn(w, life(made))
        })
        .collect();
    let mut seqs = vec![0u64; flows];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut input: Vec<Pkt> = (0..n)
        .map(|id| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = (x % flows as u64) as usize;
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
    let (mut added, mut removed, mut reused) = (0u64, 0u64, 0u64);
    let mut ids_seen = HashSet::new();
    let deadline = std::time::Instant::now() + WAIT;
    let mut round = 0u64;
    while !input.is_empty() || !pending.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "watchdog: no progress"
        );
        round += 1;
        while pending.len() < 32 {
            match input.pop() {
                Some(p) => pending.push(p),
                None => break,
            }
        }
        // NoWorkers: every worker left at once; the packets stay pending until one is added.
        let _ = d.distribute(&mut pending);
        d.collect(&mut out);
        while let Ok(id) = left_rx.try_recv() {
            loop {
                assert!(
                    std::time::Instant::now() < deadline,
                    "watchdog: leave never seen"
                );
                d.collect(&mut out);
                match d.remove_worker(id) {
                    Ok(()) => break,
                    Err(JoinError::Active(_)) => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(d.rejoin(id).unwrap_err(), JoinError::NoSuchWorker(id));
            removed += 1;
        }
        // Keep one to three workers: add one every few rounds, and whenever none is left.
        if d.active_workers() == 0 || (round % 7 == 0 && d.active_workers() < 3) {
            let w = d.add_worker().unwrap();
            if !ids_seen.insert(w.id()) {
                reused += 1;
            }
            added += 1;
            made += 1;
            threads.push(spawn(w, life(made)));
        }
    }
    // The workers still running, and one that stays, finish what is in flight (every
    // churning worker may have left by now: a flush would answer NoWorkers).
    threads.push(spawn(d.add_worker().unwrap(), u64::MAX));
    d.flush(&mut out, WAIT).unwrap();
    stop.store(true, Ordering::Release);
    let reads = reader.join().unwrap();
    let totals = registry.totals();
    assert_eq!(totals, d.worker_totals());
    let listed = registry.workers();
    assert_eq!(
        listed.len(),
        d.active_workers() + listed.iter().filter(|w| !w.active).count()
    );
    drop(d);
    for t in threads {
        t.join().unwrap();
    }
    let ids: HashSet<u64> = out.iter().map(|p| p.id).collect();
    assert_eq!(ids.len(), out.len(), "a packet came back twice");
    let dropped = dropped.load(Ordering::Relaxed);
    assert_eq!(
        out.len() as u64 + dropped,
        n,
        "returned + dropped must equal input"
    );
    assert_eq!(totals.get("returned"), Some(out.len() as u64));
    assert!(totals.get("received").unwrap() >= n - dropped);
    assert!(
        added >= 2 && removed >= 2 || cfg!(miri),
        "added {added}, removed {removed}"
    );
    assert!(reused >= 1 || cfg!(miri), "no removed id was reused");
    assert!(reads >= 1);
}

/// Adding and removing: errors, ids, counters folded into the totals, and nothing lost
/// from a removed worker's ring.
#[test]
fn add_and_remove_workers_errors_ids_and_counters() {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 2,
            credit: 4,
        },
        tag,
    )
    .unwrap();
    let reg = d.registry();
    let v0 = reg.version();
    assert_eq!(d.remove_worker(2), Err(JoinError::NoSuchWorker(2)));
    assert_eq!(d.remove_worker(0), Err(JoinError::Active(0)));
    assert_eq!(reg.version(), v0, "a failed removal publishes nothing");
    // Worker 0 (the least loaded: the first of two idle ones) receives two packets of
    // flow 5, finishes one, and leaves with the other unprocessed; a third packet of the
    // flow is still in its ring.
    let p = |id| Pkt {
        flow: 5,
        seq: id,
        id,
    };
    d.distribute(&mut vec![p(0), p(1), p(2)]).unwrap();
    let w_of_5 = 0;
    let mut w = ws.remove(0);
    w.set_wait_strategy(flowline::wait::WaitStrategy::Spin);
    #[cfg(feature = "async")]
    w.set_async_budget(3);
    let mut b = Vec::new();
    w.recv_burst(&mut b, 2).unwrap();
    assert_eq!(b.len(), 2);
    w.done(b.remove(0)).unwrap();
    w.leave(b).unwrap();
    d.remove_worker(w_of_5).unwrap();
    assert_eq!(
        d.remove_worker(w_of_5),
        Err(JoinError::NoSuchWorker(w_of_5))
    );
    assert_eq!(reg.workers().len(), 1);
    assert_eq!(
        reg.totals().get("received"),
        Some(2),
        "the removed worker's counters stay"
    );
    assert_eq!(reg.totals().get("returned"), Some(1));
    // The packets it did not process go to the worker left, in order.
    let mut other = ws.pop().unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    let got: Vec<u64> = recv_all(&mut other).iter().map(|p| p.id).collect();
    assert_eq!(got, [1, 2]);
    assert_eq!(
        d.worker_completed(w_of_5),
        None,
        "a removed worker is unknown"
    );
    // A new worker reuses the removed id, with fresh counters.
    let mut fresh = d.add_worker().unwrap();
    assert_eq!(fresh.id(), w_of_5);
    assert_eq!(
        d.worker_completed(w_of_5),
        Some(0),
        "completions count from its adding"
    );
    assert_eq!(
        fresh.wait_strategy(),
        flowline::wait::WaitStrategy::default(),
        "not the removed worker's"
    );
    #[cfg(feature = "async")]
    assert_eq!(
        fresh.async_budget(),
        flowline::wait::DEFAULT_ASYNC_BUDGET,
        "not the removed worker's"
    );
    let info = reg.workers().into_iter().find(|i| i.id == w_of_5).unwrap();
    assert!(info.active);
    assert_eq!(info.stats.get("received"), Some(0));
    // And then new ids.
    let next = d.add_worker().unwrap();
    assert_eq!(next.id(), 2);
    assert_eq!(d.active_workers(), 3);
    assert!(recv_all(&mut fresh).is_empty());
    for q in [p(1), p(2)] {
        other.done(q).unwrap();
    }
    let mut out = Vec::new();
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(reg.totals().get("returned"), Some(3));
}

/// The most workers one distributor may have, counting workers that left but were not
/// removed; removing one makes room again.
#[test]
#[cfg_attr(
    miri,
    ignore = "1024 workers' rings: bookkeeping with no unsafe code of its own, run natively"
)]
fn adding_beyond_max_workers_is_an_error_until_one_is_removed() {
    let (mut d, ws) = distributor::new(
        Config {
            workers: distributor::MAX_WORKERS,
            credit: 1,
        },
        tag,
    )
    .unwrap();
    assert_eq!(
        d.add_worker().unwrap_err(),
        ConfigError::TooManyWorkers(distributor::MAX_WORKERS + 1)
    );
    let mut ws = ws;
    ws.pop().unwrap().leave(Vec::new()).unwrap();
    assert!(d.add_worker().is_err(), "a worker that left still counts");
    d.remove_worker(distributor::MAX_WORKERS - 1).unwrap();
    assert_eq!(d.add_worker().unwrap().id(), distributor::MAX_WORKERS - 1);
}

/// Every packet goes where the routing rules say, checked against a model over thousands
/// of pseudo-random steps with 4 workers completing at different paces: a flow with
/// packets in flight stays with its worker (or waits, with its later packets, if that
/// worker has no credit); an idle or new flow goes to the first worker with the fewest
/// outstanding packets that still has credit. Loads tie often here (credit 6, 12 tags), so
/// a shortcut in picking the least loaded worker that does not give the same worker as a
/// full scan fails this test.
#[test]
fn each_packet_goes_to_the_worker_the_routing_rules_pick() {
    const WORKERS: usize = 4;
    const CREDIT: usize = 6;
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: WORKERS,
            credit: CREDIT,
        },
        |p: &(u64, u64)| p.0,
    )
    .unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    // The model: each worker's outstanding packets (tags, in the order sent).
    let mut out: Vec<VecDeque<u64>> = vec![VecDeque::new(); WORKERS];
    let mut held: Vec<Vec<(u64, u64)>> = vec![Vec::new(); WORKERS];
    let mut input: Vec<(u64, u64)> = Vec::new();
    let mut seq = 0u64;
    let mut returned = Vec::new();
    // Fewer steps under the interpreter (each step is a few dozen ring operations).
    let steps = if cfg!(miri) { 80 } else { 5000 };
    for _ in 0..steps {
        for _ in 0..next(6) {
            input.push((next(12), seq));
            seq += 1;
        }
        // What the model expects: per worker, the packets it receives, in order; and the
        // packets left with the caller.
        let mut expect: Vec<Vec<(u64, u64)>> = vec![Vec::new(); WORKERS];
        let mut kept = Vec::new();
        let mut blocked = HashSet::new();
        for &p in &input {
            let t = p.0;
            let owner = (0..WORKERS).find(|&w| out[w].contains(&t));
            let to = if blocked.contains(&t) {
                None
            } else if let Some(w) = owner {
                (out[w].len() < CREDIT).then_some(w)
            } else {
                let min = (0..WORKERS).map(|w| out[w].len()).min().unwrap();
                (min < CREDIT).then(|| (0..WORKERS).find(|&w| out[w].len() == min).unwrap())
            };
            match to {
                Some(w) => {
                    out[w].push_back(t);
                    expect[w].push(p);
                }
                None => {
                    blocked.insert(t);
                    kept.push(p);
                }
            }
        }
        d.distribute(&mut input).unwrap();
        assert_eq!(input, kept, "packets left with the caller");
        for w in 0..WORKERS {
            let mut got = Vec::new();
            while ws[w].recv_burst(&mut got, 64).unwrap() > 0 {}
            assert_eq!(got, expect[w], "packets worker {w} received");
            held[w].extend(got);
            // Each worker completes a random prefix of what it holds (worker 3 is slow).
            let pace = if w == 3 { 2 } else { held[w].len() as u64 + 1 };
            let k = next(pace).min(held[w].len() as u64) as usize;
            let mut done: Vec<(u64, u64)> = held[w].drain(..k).collect();
            for _ in 0..k {
                out[w].pop_front();
            }
            ws[w].done_burst(&mut done).unwrap();
        }
        d.collect(&mut returned);
    }
    assert!(
        seq > steps && returned.len() as u64 > steps,
        "the run moved traffic"
    );
}

/// The least-loaded pick a routing pass keeps does not outlive the pass, also when the
/// user's `tag` panics in the middle of it: worker 0 holds 3 packets and worker 1 none, a
/// new flow goes to worker 1 (the pick remembers it with the others at 3 or more), `tag`
/// panics on the next packet; worker 0 then completes its 3, so a new flow in the next
/// call must go to worker 0 (0 outstanding), not to worker 1 (1). Fails if neither the
/// next pass nor the completions' poll resets the pick.
#[test]
fn a_pick_left_by_a_panicking_tag_is_not_reused_after_completions() {
    let mut armed = true;
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 2,
            credit: 8,
        },
        move |p: &(u64, u64)| {
            if armed && p.1 == 99 {
                armed = false;
                panic!("tag cannot parse packet 99");
            }
            p.0
        },
    )
    .unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    // Worker 0: three packets of flow 1 (flows 1..=3 all go to worker 0 first: ties).
    d.distribute(&mut vec![(1, 0)]).unwrap();
    d.distribute(&mut vec![(1, 1), (1, 2)]).unwrap();
    let held0 = recv_all(&mut ws[0]);
    assert_eq!(held0.len(), 3);
    // A new flow goes to worker 1; the next packet's tag panics.
    let mut input = vec![(2, 10), (3, 99)];
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.distribute(&mut input)));
    assert!(r.is_err(), "tag panicked");
    assert_eq!(
        input,
        [(3, 99)],
        "the packet tag panicked on is back with the caller"
    );
    ws[0].done_burst(&mut held0.clone()).unwrap();
    // Worker 0: 0 outstanding; worker 1: 1 (flow 2, staged). Flow 4 is new.
    input.push((4, 11));
    d.distribute(&mut input).unwrap();
    assert!(input.is_empty());
    let w0 = recv_all(&mut ws[0]);
    let w1 = recv_all(&mut ws[1]);
    assert_eq!(w1, [(2, 10)], "worker 1 kept only flow 2");
    assert_eq!(
        w0,
        [(3, 99), (4, 11)],
        "new flows go to the least loaded worker"
    );
    // Flow 2's packet, routed by the call `tag` cut short, counts as accepted once.
    assert_eq!(d.stats().snapshot().get("accepted"), Some(6));
}

/// A packet whose `Drop` panics once (armed), tagged by its first field.
struct Bomb(u64, bool);
impl Drop for Bomb {
    fn drop(&mut self) {
        if self.1 {
            panic!("packet panics in drop");
        }
    }
}

/// A worker that drops a packet whose `Drop` panics: the drop is counted and published
/// before the packet's `Drop` runs, so the worker's next hand-back takes its own position
/// (it was taken for the dropped packet's, and the order check blamed the worker).
#[test]
fn a_packet_panicking_in_drop_packet_leaves_the_worker_in_order() {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 8,
        },
        |p: &Bomb| p.0,
    )
    .unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    d.distribute(&mut vec![Bomb(1, true), Bomb(2, false)])
        .unwrap();
    let mut held = recv_all(&mut ws[0]);
    let second = held.pop().unwrap();
    let first = held.pop().unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ws[0].drop_packet(first).map_err(|_| ())
    }));
    assert!(
        r.is_err(),
        "the packet's drop panicked, in the caller's hands"
    );
    ws[0].done(second).map_err(|_| ()).unwrap();
    let mut out = Vec::new();
    d.flush(&mut out, Duration::from_secs(10)).unwrap();
    assert_eq!(out.iter().map(|p| p.0).collect::<Vec<_>>(), [2]);
    assert_eq!(d.stats().snapshot().get("dropped"), Some(1));
    assert_eq!(d.in_flight(), 0);
}

/// A node dropped with a packet in its inbound bridge whose `Drop` panics: the node's
/// final counts and its flushing mark are published before, so the other node's flush
/// ends (it could only time out).
#[test]
fn a_node_dropping_a_panicking_bridge_packet_lets_the_others_flush() {
    use flowline::distributor::nodes::{self, NodesConfig};
    let config = NodesConfig {
        nodes: 2,
        workers_per_node: 1,
        credit: 8,
        bridge: 8,
    };
    let mut layout = nodes::new(config, |p: &Bomb| p.0).unwrap();
    let (n1, w1) = layout.pop().unwrap();
    let (mut n0, _w0) = layout.pop().unwrap();
    let f1 = (0..).find(|&t| n0.owner(t) == 1).unwrap();
    // Over the bridge to node 1, which never reads it.
    n0.distribute(&mut vec![Bomb(f1, true)]).unwrap();
    drop(w1);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(n1)));
    assert!(r.is_err(), "the packet's drop panicked");
    n0.flush(&mut Vec::new(), Duration::from_secs(10)).unwrap();
}

/// A forgotten worker (its handle never dropped) runs no code and never leaves: the flush waits for its packets
/// until the timeout, which names it; the other worker's are back.
#[test]
fn a_flush_timeout_names_the_forgotten_worker() {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 2,
            credit: 8,
        },
        |p: &(u64, u64)| p.0,
    )
    .unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    // Flows 1 and 2 go to workers 0 and 1 (a new flow goes to the least loaded worker).
    d.distribute(&mut vec![(1, 0), (2, 0)]).unwrap();
    // As forgotten while the flush runs (dropped at the end, so nothing leaks).
    let w1 = std::mem::ManuallyDrop::new(ws.pop().unwrap());
    let got = recv_all(&mut ws[0]);
    assert_eq!(got, [(1, 0)]);
    ws[0].done_burst(&mut got.clone()).unwrap();
    let mut out = Vec::new();
    let e = d.flush(&mut out, Duration::from_millis(20)).unwrap_err();
    assert_eq!(
        e,
        FlushError::Timeout {
            in_flight: 1,
            workers: vec![1]
        }
    );
    assert!(e.to_string().contains("[1]"), "{e}");
    assert_eq!(out, [(1, 0)]);
    drop(std::mem::ManuallyDrop::into_inner(w1));
}

// ---- batching per lane (`set_batching`) ----------------------------------------------------

fn u64_tag(p: &u64) -> u64 {
    *p
}

/// Under load (calls bringing a batch of input or more), a staged packet goes out with its
/// lane's batch, or at the end of the `hold`-th call after the one that staged it; a call
/// with less input publishes everything.
#[test]
fn a_staged_packet_goes_out_within_the_hold() {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 2,
            credit: 16,
        },
        u64_tag,
    )
    .unwrap();
    d.set_batching(8, 3);
    // Flow 1000 fills one worker's credit (published: a batch), and that worker holds it.
    d.distribute(&mut vec![1000; 16]).unwrap();
    let full = ws
        .iter_mut()
        .position(|w| w.recv_burst(&mut Vec::new(), 64) == Ok(16))
        .expect("one worker got flow 1000");
    let other = 1 - full;
    // Each call brings 8 packets: 7 of flow 1000 (no credit: they stay with the caller)
    // and one new flow, which goes to the other worker and is staged there.
    let mut input = vec![1000; 7];
    let mut b = Vec::new();
    for call in 1..=4u64 {
        input.push(call);
        assert_eq!(d.distribute(&mut input), Ok(1));
        assert_eq!(input, [1000; 7], "flow 1000 waits for credit");
        let got = ws[other].recv_burst(&mut b, 64).unwrap();
        // Staged at the end of call 1: published at the end of call 1 + 3.
        assert_eq!(got, if call < 4 { 0 } else { 4 }, "after call {call}");
    }
    assert_eq!(b, [1, 2, 3, 4]);
    // Light input publishes at once.
    assert_eq!(d.distribute(&mut vec![5]), Ok(1));
    assert_eq!(ws[other].recv_burst(&mut b, 64), Ok(1));
    ws[other].done_burst(&mut b).unwrap();
    let mut held = Vec::new();
    ws[full].recv_burst(&mut held, 64).unwrap();
    let mut all = vec![1000u64; 16];
    ws[full].done_burst(&mut all).unwrap();
    let mut out = Vec::new();
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(out.len(), 21);
}

/// The batch is at most half the credit (with credit 4 a batch of 2): a loaded call of two
/// new flows, one per worker, stays staged; the next fills both batches.
#[test]
fn the_batch_is_bounded_by_the_credit() {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 2,
            credit: 4,
        },
        u64_tag,
    )
    .unwrap();
    d.set_batching(usize::MAX, u32::MAX);
    let mut b = Vec::new();
    d.distribute(&mut vec![1, 2]).unwrap();
    let got = |ws: &mut Vec<Worker<u64>>, b: &mut Vec<u64>| {
        ws[0].recv_burst(b, 8).unwrap() + ws[1].recv_burst(b, 8).unwrap()
    };
    assert_eq!(got(&mut ws, &mut b), 0, "one each: below a batch of 2");
    d.distribute(&mut vec![1, 2]).unwrap();
    assert_eq!(
        got(&mut ws, &mut b),
        4,
        "two each: a batch of half the credit"
    );
}

/// What is staged when the distributor is dropped still reaches the workers, which then
/// see `Disconnected`.
#[test]
fn dropping_the_distributor_delivers_what_is_staged() {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 2,
            credit: 64,
        },
        u64_tag,
    )
    .unwrap();
    d.set_batching(8, u32::MAX);
    // A batch of input over two workers: neither lane has a batch.
    d.distribute(&mut (0..8).collect()).unwrap();
    let mut b = Vec::new();
    assert_eq!(ws[0].recv_burst(&mut b, 64), Ok(0), "staged");
    assert_eq!(ws[1].recv_burst(&mut b, 64), Ok(0), "staged");
    drop(d);
    for w in &mut ws {
        while w.recv_burst(&mut b, 64).is_ok() {}
    }
    b.sort_unstable();
    assert_eq!(b, (0..8).collect::<Vec<_>>());
}

/// A worker that leaves while packets of its flows are staged for it: the leave is read
/// at the next call (control entries are read at once), and the staged packets follow
/// what its ring held, in order, to the other worker, ahead of the flow's new input.
#[test]
fn staged_packets_of_a_leaving_worker_go_to_another_in_order() {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 2,
            credit: 64,
        },
        tag,
    )
    .unwrap();
    d.set_batching(4, u32::MAX);
    let p = |flow, seq| Pkt { flow, seq, id: seq };
    // Four of flow 7 go out as a batch, all to worker 0.
    d.distribute(&mut (0..4).map(|s| p(7, s)).collect())
        .unwrap();
    let (mut staying, mut leaving) = (ws.pop().unwrap(), ws.pop().unwrap());
    assert!(recv_all(&mut staying).is_empty(), "flow 7 went to worker 0");
    // A loaded call: two more of flow 7 (staged at worker 0) and two new flows (staged at
    // worker 1, the least loaded): no lane has a batch.
    d.distribute(&mut vec![p(7, 4), p(7, 5), p(8, 100), p(9, 101)])
        .unwrap();
    assert!(recv_all(&mut staying).is_empty(), "staged");
    // Worker 0 takes one packet, hands it back unprocessed and leaves.
    let mut held = Vec::new();
    leaving.recv_burst(&mut held, 1).unwrap();
    assert_eq!(held, [p(7, 0)]);
    leaving.leave(held).unwrap();
    // The next call reads the leave (control entries are read at once) and sends flow 7's
    // packets, staged ones after the ring's, to worker 1 before the flow's new input.
    d.distribute(&mut vec![p(7, 6), p(7, 7)]).unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    let got: Vec<Pkt> = recv_all(&mut staying);
    let of_7: Vec<Pkt> = got.iter().copied().filter(|q| q.flow == 7).collect();
    assert_eq!(of_7, (0..8).map(|s| p(7, s)).collect::<Vec<_>>());
    assert_eq!(got.len(), 10, "and the two other flows");
    staying.done_burst(&mut got.clone()).unwrap();
    let mut out = Vec::new();
    d.flush(&mut out, WAIT).unwrap();
    assert_eq!(out.len(), 10);
}

/// The last few hand-backs of a lane with less than a batch outstanding are read by a
/// later call with input within as many calls as there are workers (one lane in turn
/// per call), so `collect` returns them without a call that has no input.
#[test]
fn a_quiet_lanes_hand_backs_come_back_within_as_many_calls_as_workers() {
    const W: usize = 4;
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: W,
            credit: 64,
        },
        u64_tag,
    )
    .unwrap();
    d.distribute(&mut vec![1000]).unwrap();
    d.distribute(&mut Vec::new()).unwrap(); // publishes it
    let mut b = Vec::new();
    let w = ws
        .iter_mut()
        .position(|w| w.recv_burst(&mut b, 8) == Ok(1))
        .expect("one worker got it");
    ws[w].done_burst(&mut b).unwrap();
    // Loaded calls (a batch of input each) read only the lanes due, and one in turn.
    d.set_batching(8, u32::MAX);
    let mut out = Vec::new();
    for call in 0..W as u64 {
        d.distribute(&mut (call * 100..call * 100 + 8).collect())
            .unwrap();
        d.collect(&mut out);
        if out.contains(&1000) {
            return;
        }
    }
    panic!("the hand-back was not read within {W} loaded calls");
}

/// A caller that stops distributing and only collects (its input ended) still gets
/// everything back: the second `collect` in a row publishes what is staged and reads every
/// ring, also the hand-backs of a lane with less than a batch outstanding.
#[test]
fn a_loop_of_collect_alone_brings_everything_back() {
    let (mut d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 512,
        },
        u64_tag,
    )
    .unwrap();
    assert_eq!(d.distribute(&mut (0..32).collect()), Ok(32)); // a full batch: published
    let mut b = Vec::new();
    assert_eq!(ws[0].recv_burst(&mut b, 64), Ok(32));
    let mut rest = b.split_off(16);
    ws[0].done_burst(&mut b).unwrap();
    let mut out = Vec::new();
    d.collect(&mut out);
    ws[0].done_burst(&mut rest).unwrap();
    for _ in 0..3 {
        d.collect(&mut out);
    }
    assert_eq!(out.len(), 32, "in flight: {}", d.in_flight());
}

/// The report's loop: `distribute` only while there is input, `collect` until everything
/// is back, with two worker threads; staged packets must not stay staged.
#[test]
fn distributing_only_while_input_lasts_drains() {
    const FLOWS: u64 = 64;
    // Whole bursts: the last call is a loaded one, whose staged packets only a collect
    // can get out. (Fewer under Miri, which runs threads far slower.)
    const TOTAL: u64 = if cfg!(miri) { 4 * 32 } else { 313 * 32 };
    let (mut d, ws) = distributor::new(
        Config {
            workers: 2,
            credit: 512,
        },
        |p: &u64| *p % FLOWS,
    )
    .unwrap();
    let ts: Vec<_> = ws
        .into_iter()
        .map(|mut w| {
            std::thread::spawn(move || {
                let mut b = Vec::with_capacity(32);
                while let Ok(k) = w.recv_burst(&mut b, 32) {
                    if k > 0 {
                        w.done_burst(&mut b).unwrap();
                    } else {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    let (mut next, mut back) = (0u64, 0u64);
    let mut input: Vec<u64> = Vec::with_capacity(32);
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while (next < TOTAL || back < next) && std::time::Instant::now() < deadline {
        while next < TOTAL && input.len() < 32 {
            input.push(next);
            next += 1;
        }
        if !input.is_empty() {
            d.distribute(&mut input).unwrap();
        }
        back += d.collect(&mut out) as u64;
        out.clear();
        std::thread::yield_now();
    }
    let stuck = d.in_flight();
    drop(d);
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(back, next, "{stuck} packets still in flight");
}
