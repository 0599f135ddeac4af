//! The distributor's waiting loops see every hand-back and keep their deadlines: a
//! hand-back that the wait's own poll reads after deciding to wait ends the wait (it is
//! not slept through), and a flush whose rounds keep making progress (a worker that
//! reschedules for ever) still returns at its deadline.
//!
//! The worker here runs inside the tag closure, so a hand-back lands at a chosen point of
//! the distributor's own call, single-threaded and deterministic.
#![cfg(all(not(loom), feature = "std"))]

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use flowline::distributor::{self, Config, FlushError, Worker};
use flowline::wait::{WaitError, WaitStrategy};

/// Every strategy the waits take, with no spins or yields where they have them: the
/// strategies that sleep at once are the ones a lost wake-up hangs.
const STRATEGIES: [WaitStrategy; 4] = [
    WaitStrategy::Spin,
    WaitStrategy::SpinYield { spins: 0 },
    WaitStrategy::SpinPark {
        spins: 0,
        yields: 0,
    },
    WaitStrategy::SpinPark {
        spins: 1,
        yields: 0,
    },
];

/// Long enough that a wait which sleeps to its deadline is told apart from one that
/// returns at the hand-back (which takes microseconds here: no other thread is involved).
const DEADLINE: Duration = Duration::from_secs(3);

type Shared = Rc<RefCell<Option<Worker<u64>>>>;

/// Packets are `flow * 100 + n`.
fn flow(p: &u64) -> u64 {
    *p / 100
}

/// A one-worker distributor with credit 2 whose tag closure runs the worker on the calls
/// for packet 200: on the first it reschedules the oldest packet it holds (into the same
/// flow: the credit stays used), on the `nth` it hands back the oldest it holds then
/// (what it holds is in [`HELD`]).
fn driven_at(
    nth: u32,
) -> (
    distributor::Distributor<u64, distributor::Atomic<impl FnMut(&u64) -> u64>>,
    Shared,
) {
    let shared: Shared = Rc::new(RefCell::new(None));
    let calls = Cell::new(0u32);
    let w = Rc::clone(&shared);
    let tag = move |p: &u64| {
        let mut guard = w.borrow_mut();
        // The order check calls it too, once the test took the worker back: not then.
        if let (200, Some(worker)) = (*p, guard.as_mut()) {
            calls.set(calls.get() + 1);
            // What it holds, oldest first, then what it was sent since.
            let mut held = HELD.with(|h| h.take());
            worker.recv_burst(&mut held, usize::MAX).unwrap();
            if calls.get() == 1 {
                worker.reschedule(held.remove(0)).unwrap();
            }
            if calls.get() == nth {
                worker.done(held.remove(0)).unwrap();
            }
            HELD.with(|h| *h.borrow_mut() = held);
        }
        flow(p)
    };
    let (d, mut ws) = distributor::new(Config::default().workers(1).credit(2), tag).unwrap();
    *shared.borrow_mut() = ws.pop();
    (d, shared)
}

/// Sends 100 and 101 (one flow) to the worker of [`driven_at`], which takes both: its
/// credit of 2 is used.
fn hold_two(
    d: &mut distributor::Distributor<u64, distributor::Atomic<impl FnMut(&u64) -> u64>>,
    shared: &Shared,
) {
    assert_eq!(d.distribute(&mut vec![100, 101]), Ok(2));
    let mut b = Vec::new();
    let mut g = shared.borrow_mut();
    g.as_mut().unwrap().recv_burst(&mut b, usize::MAX).unwrap();
    HELD.with(|h| *h.borrow_mut() = b);
}

/// Takes the worker of [`driven_at`] back and hands back everything it holds or is sent
/// until nothing is in flight; returns what came back, sorted.
fn bring_back(
    d: &mut distributor::Distributor<u64, distributor::Atomic<impl FnMut(&u64) -> u64>>,
    shared: &Shared,
) -> Vec<u64> {
    let mut w = shared.borrow_mut().take().unwrap();
    let mut out = Vec::new();
    for _ in 0..3 {
        // A packet still to be routed reaches the worker with the flush's first round.
        let mut b = HELD.with(|h| h.take());
        w.recv_burst(&mut b, usize::MAX).unwrap();
        w.done_burst(&mut b).unwrap();
        if d.flush(&mut out, Duration::from_millis(10)).is_ok() {
            break;
        }
    }
    assert_eq!(d.in_flight(), 0);
    out.sort_unstable();
    out
}

/// A wait's poll runs when something came back since it decided to wait: here a
/// reschedule that the worker makes during the first `distribute` of the new packet, and
/// that the wait routes back to it without freeing credit for the new packet. On the
/// `nth` tag call of the new packet the worker also hands back an old one: during the
/// first `distribute` (call 1, before the decision to wait), or inside the wait's poll,
/// after the poll's read of the return rings (call 2), so that the poll's last read before
/// it sleeps consumes it. `distribute_wait` places the packet at once, whatever the
/// strategy. It used to sleep through such a hand-back until its deadline (for ever with
/// `Duration::MAX`).
#[test]
fn distribute_wait_sees_a_hand_back_its_own_poll_read() {
    for strategy in STRATEGIES {
        for nth in 1..=2 {
            let (mut d, shared) = driven_at(nth);
            d.set_wait_strategy(strategy);
            hold_two(&mut d, &shared);
            let mut more = vec![200];
            let start = Instant::now();
            let r = d.distribute_wait(&mut more, DEADLINE);
            let took = start.elapsed();
            assert_eq!(r, Ok(1), "{strategy:?}, hand-back at tag call {nth}");
            assert!(
                took < DEADLINE / 2,
                "{strategy:?}, hand-back at tag call {nth}: slept through it ({took:?})"
            );
            let out = bring_back(&mut d, &shared);
            assert_eq!(
                out,
                [100, 101, 200],
                "{strategy:?}, hand-back at tag call {nth}"
            );
        }
    }
}

/// The same hand-back inside the poll's own `distribute` when that poll is the wait's last
/// (no time left): the wait still places the packet rather than time out with the credit
/// free.
#[test]
fn a_wait_with_no_time_left_takes_a_hand_back_its_last_poll_read() {
    for strategy in STRATEGIES {
        let (mut d, shared) = driven_at(2);
        d.set_wait_strategy(strategy);
        hold_two(&mut d, &shared);
        let mut more = vec![200];
        assert_eq!(
            d.distribute_wait(&mut more, Duration::ZERO),
            Ok(1),
            "{strategy:?}"
        );
        let out = bring_back(&mut d, &shared);
        assert_eq!(out, [100, 101, 200], "{strategy:?}");
    }
}

thread_local! {
    /// What the worker of [`driven_at`] holds between the test and the tag closure.
    static HELD: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// A worker run by the tag closure that reschedules for ever ("not ready, try again"):
/// at every tag call it takes what it was sent and reschedules its oldest packet into the
/// same flow, until `stop` (or `chain` reschedules); then it hands back everything.
struct Rescheduling {
    shared: Shared,
    held: Rc<RefCell<Vec<u64>>>,
    rounds: Rc<Cell<u64>>,
    stop: Rc<Cell<bool>>,
}

/// Reschedules before the worker gives up: far more than fit in any deadline here.
const CHAIN: u64 = if cfg!(miri) { 3_000 } else { 3_000_000 };

impl Rescheduling {
    /// A distributor with one worker of credit 2, holding two packets of flow 1, the
    /// first of them rescheduled: every routing from now on runs the chain.
    fn start() -> (
        distributor::Distributor<u64, distributor::Atomic<impl FnMut(&u64) -> u64>>,
        Self,
    ) {
        let r = Rescheduling {
            shared: Rc::new(RefCell::new(None)),
            held: Rc::new(RefCell::new(Vec::new())),
            rounds: Rc::new(Cell::new(0)),
            stop: Rc::new(Cell::new(false)),
        };
        let (w, h, n, s) = (
            Rc::clone(&r.shared),
            Rc::clone(&r.held),
            Rc::clone(&r.rounds),
            Rc::clone(&r.stop),
        );
        let tag = move |p: &u64| {
            let mut guard = w.borrow_mut();
            if let Some(worker) = guard.as_mut() {
                let mut held = h.borrow_mut();
                worker.recv_burst(&mut held, usize::MAX).unwrap();
                if !s.get() && n.get() < CHAIN {
                    if !held.is_empty() {
                        n.set(n.get() + 1);
                        let oldest = held.remove(0);
                        worker.reschedule(oldest).unwrap();
                    }
                } else {
                    worker.done_burst(&mut held).unwrap();
                }
            }
            *p / 100
        };
        let (mut d, mut ws) =
            distributor::new(Config::default().workers(1).credit(2), tag).unwrap();
        assert_eq!(d.distribute(&mut vec![100, 101]), Ok(2));
        let mut w = ws.pop().unwrap();
        let mut b = Vec::new();
        w.recv_burst(&mut b, usize::MAX).unwrap();
        w.reschedule(b.remove(0)).unwrap();
        r.rounds.set(1);
        *r.held.borrow_mut() = b;
        *r.shared.borrow_mut() = Some(w);
        (d, r)
    }

    /// Ends the chain: the worker hands back what it holds and what it is sent, until
    /// nothing is in flight; the packets come back onto `out`.
    fn finish<S: distributor::Schedule<u64>>(
        self,
        d: &mut distributor::Distributor<u64, S>,
        out: &mut Vec<u64>,
    ) {
        self.stop.set(true);
        let mut w = self.shared.borrow_mut().take().unwrap();
        let mut b = self.held.take();
        for _ in 0..3 {
            // A packet still to be routed reaches the worker with the flush's first round.
            w.recv_burst(&mut b, usize::MAX).unwrap();
            w.done_burst(&mut b).unwrap();
            if d.flush(out, Duration::from_millis(10)).is_ok() {
                break;
            }
        }
        assert_eq!(d.in_flight(), 0);
        assert_eq!(
            d.stats().snapshot().get("rescheduled"),
            Some(self.rounds.get())
        );
    }
}

/// Every round of the flush makes progress (a reschedule), and the flush still returns at
/// its deadline, with the packets in flight named. It used to read the clock only once a
/// round made no progress, so it ran until the reschedules stopped.
#[test]
fn flush_returns_at_its_deadline_while_a_worker_reschedules() {
    let (mut d, chain) = Rescheduling::start();
    let mut out = Vec::new();
    let start = Instant::now();
    let r = d.flush(&mut out, Duration::from_millis(50));
    let took = start.elapsed();
    match r {
        Err(FlushError::Timeout { in_flight, workers }) => {
            assert_eq!((in_flight, workers), (2, vec![0]));
        }
        other => panic!(
            "a flush of 50 ms returned {other:?} after {took:?} and {} reschedules",
            chain.rounds.get()
        ),
    }
    assert!(chain.rounds.get() < CHAIN, "the flush outlasted the chain");
    chain.finish(&mut d, &mut out);
    // A reschedule is a new arrival of its flow: the two may come back in either order.
    out.sort_unstable();
    assert_eq!(out, [100, 101]);
}

/// The distributor's waits under the same chain, by every strategy: each poll makes
/// progress, no packet can be placed (the reschedules take the credit first) and none
/// comes back processed, so both waits return at their deadline.
#[test]
fn waits_return_at_their_deadline_while_a_worker_reschedules() {
    for strategy in STRATEGIES {
        let (mut d, chain) = Rescheduling::start();
        d.set_wait_strategy(strategy);
        let mut input = vec![200];
        let r = d.distribute_wait(&mut input, Duration::from_millis(30));
        assert_eq!(r, Err(WaitError::Timeout), "{strategy:?}");
        assert_eq!(input, [200], "{strategy:?}");
        let mut out = Vec::new();
        let r = d.collect_wait(&mut out, Duration::from_millis(30));
        assert_eq!(r, Err(WaitError::Timeout), "{strategy:?}");
        assert!(
            chain.rounds.get() < CHAIN,
            "{strategy:?}: a wait outlasted the chain"
        );
        chain.finish(&mut d, &mut out);
        out.sort_unstable();
        assert_eq!(out, [100, 101], "{strategy:?}");
    }
}

/// Packets of the `collect_wait` scenarios: two flows, one packet each.
const X: u64 = 1000;
const B: u64 = 2000;

/// `collect_wait` with a packet (X) in the backlog that cannot be routed yet: the one
/// worker left holds B at its one credit. On the `nth` call of the tag of X (a routing
/// pass of the wait's poll) the worker reschedules B, right after the poll's `settle` read
/// the rings, so the poll's `collect`, which reads them again, takes the reschedule into
/// the backlog unrouted. From then on a worker thread hands back whatever it receives.
/// The wait returns what comes back at once; it used to sleep with both packets in the
/// backlog and nothing at the worker, until its deadline (for ever with `Duration::MAX`).
fn collect_wait_with_a_reschedule_read_by_collect(strategy: WaitStrategy, nth: u32) {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};
    let worker: Arc<Mutex<Option<Worker<u64>>>> = Arc::new(Mutex::new(None));
    let (armed, fired) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let calls = Arc::new(AtomicU32::new(0));
    let tag = {
        let (worker, armed, fired, calls) = (
            Arc::clone(&worker),
            Arc::clone(&armed),
            Arc::clone(&fired),
            Arc::clone(&calls),
        );
        move |p: &u64| {
            if *p == X && armed.load(SeqCst) && calls.fetch_add(1, SeqCst) + 1 == nth {
                let mut g = worker.lock().unwrap();
                g.as_mut().unwrap().reschedule(B).unwrap();
                fired.store(true, SeqCst);
            }
            *p
        }
    };
    let (mut d, mut ws) = distributor::new(Config::default().workers(2).credit(1), tag).unwrap();
    d.set_wait_strategy(strategy);
    // B to worker 0, X to worker 1 (both idle: the first lane first), which leaves with
    // X unprocessed: X waits in the backlog for worker 0's credit.
    assert_eq!(d.distribute(&mut vec![B, X]), Ok(2));
    let mut got = Vec::new();
    ws[0].recv_burst(&mut got, 8).unwrap();
    ws[1].recv_burst(&mut got, 8).unwrap();
    assert_eq!(got, [B, X]);
    ws.pop().unwrap().leave(vec![X]).unwrap();
    let mut out = Vec::new();
    assert_eq!(d.collect(&mut out), 0);
    assert_eq!((d.active_workers(), d.in_flight()), (1, 2));
    *worker.lock().unwrap() = ws.pop();
    armed.store(true, SeqCst);
    let stop = Arc::new(AtomicBool::new(false));
    let t = {
        let (worker, stop, fired) = (Arc::clone(&worker), Arc::clone(&stop), Arc::clone(&fired));
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                if fired.load(SeqCst) {
                    let mut g = worker.lock().unwrap();
                    let w = g.as_mut().unwrap();
                    let mut b = Vec::new();
                    w.recv_burst(&mut b, 8).unwrap();
                    w.done_burst(&mut b).unwrap();
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let start = Instant::now();
    let r = d.collect_wait(&mut out, DEADLINE);
    let took = start.elapsed();
    while d.in_flight() > 0 && r.is_ok() {
        d.collect_wait(&mut out, DEADLINE).unwrap();
    }
    stop.store(true, SeqCst);
    t.join().unwrap();
    assert!(
        r.is_ok(),
        "{strategy:?}, reschedule at call {nth}: {r:?} after {took:?}"
    );
    assert!(
        took < DEADLINE / 2,
        "{strategy:?}, reschedule at call {nth}: slept through it ({took:?})"
    );
    out.sort_unstable();
    assert_eq!(out, [X, B]);
}

#[test]
fn collect_wait_routes_a_reschedule_its_own_collect_read() {
    for strategy in STRATEGIES {
        // The wait's first poll routes X (tag call 1); later polls run only once something
        // came back, so call 1 is the one to race with.
        collect_wait_with_a_reschedule_read_by_collect(strategy, 1);
    }
}

/// The same race with no tricks: a worker thread reschedules each packet three times
/// before it hands it back, and the distributor drains with `collect_wait` by a strategy
/// that sleeps at once. No wait runs to its deadline (it used to, a few times in a
/// thousand packets: a reschedule read by `collect` and slept through).
#[test]
fn collect_wait_keeps_up_with_a_worker_that_reschedules() {
    let rounds: u64 = if cfg!(miri) { 20 } else { 1000 };
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(4), |p: &u64| *p & 0xff).unwrap();
    d.set_wait_strategy(WaitStrategy::SpinPark {
        spins: 0,
        yields: 0,
    });
    let mut w = ws.pop().unwrap();
    let t = std::thread::spawn(move || {
        let mut b = Vec::new();
        while w.recv_burst_wait(&mut b, 8, Duration::MAX).is_ok() {
            for p in b.drain(..) {
                if p >> 8 < 3 {
                    // Another pass needed: the count of passes in the high bits.
                    w.reschedule(p + 0x100).unwrap();
                } else {
                    w.done(p).unwrap();
                }
            }
        }
    });
    let mut out = Vec::new();
    for i in 0..rounds {
        d.distribute(&mut vec![i & 0xff]).unwrap();
        while d.in_flight() > 0 {
            let r = d.collect_wait(&mut out, DEADLINE);
            assert!(r.is_ok(), "packet {i}: {r:?}");
        }
    }
    drop(d);
    t.join().unwrap();
    assert_eq!(out.len() as u64, rounds);
}
