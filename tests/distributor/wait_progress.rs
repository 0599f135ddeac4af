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

/// A one-worker distributor with credit 1 whose tag closure, on its `nth` call, makes the
/// worker take what it was sent and hand it back.
fn driven_at(
    nth: u32,
) -> (
    distributor::Distributor<u64, impl FnMut(&u64) -> u64>,
    Shared,
) {
    let shared: Shared = Rc::new(RefCell::new(None));
    let calls = Cell::new(0u32);
    let w = Rc::clone(&shared);
    let tag = move |p: &u64| {
        calls.set(calls.get() + 1);
        if calls.get() == nth {
            let mut guard = w.borrow_mut();
            let worker = guard.as_mut().expect("the worker is set before any call");
            let mut b = Vec::new();
            worker.recv_burst(&mut b, usize::MAX).unwrap();
            worker.done_burst(&mut b).unwrap();
        }
        *p
    };
    let (d, mut ws) = distributor::new(
        Config {
            workers: 1,
            credit: 1,
        },
        tag,
    )
    .unwrap();
    *shared.borrow_mut() = ws.pop();
    (d, shared)
}

/// The credit frees up during the wait's own poll, at every tag call it makes (before its
/// decision, inside it, after it): `distribute_wait` places the packet at once, whatever
/// the strategy. It used to sleep through a hand-back that its poll's last read of the
/// return rings consumed, until its deadline (for ever with `Duration::MAX`).
#[test]
fn distribute_wait_sees_a_hand_back_its_own_poll_read() {
    for strategy in STRATEGIES {
        for nth in 2..=8 {
            // A strategy that parks sleeps after `spins` polls (a tag call each), after
            // the first `distribute` and the wait's own first try: a later tag call comes
            // only once another thread hands back (the threaded tests and the loom models
            // have that case).
            if let WaitStrategy::SpinPark { spins, .. } = strategy {
                if nth > 2 + spins {
                    continue;
                }
            }
            let (mut d, shared) = driven_at(nth);
            d.set_wait_strategy(strategy);
            // Tag call 1; the worker's one credit is used.
            assert_eq!(d.distribute(&mut vec![1]), Ok(1));
            let mut more = vec![2];
            let start = Instant::now();
            let r = d.distribute_wait(&mut more, DEADLINE);
            let took = start.elapsed();
            assert_eq!(r, Ok(1), "{strategy:?}, hand-back at tag call {nth}");
            assert!(
                took < DEADLINE / 2,
                "{strategy:?}, hand-back at tag call {nth}: slept through it ({took:?})"
            );
            // Both packets come back.
            let mut w = shared.borrow_mut().take().unwrap();
            let mut b = Vec::new();
            w.recv_burst(&mut b, usize::MAX).unwrap();
            w.done_burst(&mut b).unwrap();
            let mut out = Vec::new();
            d.flush(&mut out, DEADLINE).unwrap();
            assert_eq!(out, [1, 2], "{strategy:?}, hand-back at tag call {nth}");
        }
    }
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
    fn start() -> (distributor::Distributor<u64, impl FnMut(&u64) -> u64>, Self) {
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
        let (mut d, mut ws) = distributor::new(
            Config {
                workers: 1,
                credit: 2,
            },
            tag,
        )
        .unwrap();
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
    fn finish<F: FnMut(&u64) -> u64>(
        self,
        d: &mut distributor::Distributor<u64, F>,
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
