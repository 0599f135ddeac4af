//! loom model of the distributor's handshake and completion accounting with 2 workers:
//! packets go out on the per-worker rings and come back on the return rings, and the
//! completions clear the flows' in-flight state.
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom -- distributor::`.
#![cfg(loom)]

use flowline::distributor::{self, Config};
use loom::thread;

/// Flows A, B, A into two workers with credit 2: routing is deterministic (A to worker 0,
/// B to worker 1, the second A follows the first to worker 0 because A is in flight).
/// The workers receive and hand back concurrently with the distributor collecting: every
/// packet comes back exactly once, flow A in order, and nothing is left in flight.
#[test]
fn two_workers_exactly_once_and_in_order() {
    loom::model(|| {
        let (mut d, ws) =
            distributor::new(Config::default().workers(2).credit(2), |p: &(u8, u8)| {
                u64::from(p.0)
            })
            .unwrap();
        let mut pending = vec![(b'A', 0), (b'B', 0), (b'A', 1)];
        assert_eq!(d.distribute(&mut pending).unwrap(), 3);
        let handles: Vec<_> = ws
            .into_iter()
            .zip([2usize, 1])
            .map(|(mut w, expect)| {
                thread::spawn(move || {
                    let mut b = Vec::new();
                    while b.len() < expect {
                        if w.recv_burst(&mut b, 4).unwrap() == 0 {
                            thread::yield_now();
                        }
                    }
                    let flows: Vec<u8> = b.iter().map(|p| p.0).collect();
                    w.done_burst(&mut b).unwrap();
                    flows
                })
            })
            .collect();
        let mut out = Vec::new();
        while out.len() < 3 {
            if d.collect(&mut out) == 0 {
                thread::yield_now();
            }
        }
        assert_eq!(d.in_flight(), 0);
        let got: Vec<Vec<u8>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            got,
            [vec![b'A', b'A'], vec![b'B']],
            "flow A must stay on one worker"
        );
        let a: Vec<u8> = out.iter().filter(|p| p.0 == b'A').map(|p| p.1).collect();
        assert_eq!(a, [0, 1], "flow A out of order or not exactly once");
        assert_eq!(out.iter().filter(|p| p.0 == b'B').count(), 1);
    });
}

/// The position merge of the two return rings: the worker drops its first packet (control
/// ring) and hands back the second as processed (done ring) while the distributor polls.
/// Whichever ring the distributor sees first, the order check passes, the drop and the
/// completion are counted once each, and nothing stays in flight.
#[test]
fn drop_then_done_merge_across_return_rings() {
    loom::model(|| {
        let (mut d, mut ws) =
            distributor::new(Config::default().workers(1).credit(2), |p: &(u8, u8)| {
                u64::from(p.0)
            })
            .unwrap();
        assert_eq!(d.distribute(&mut vec![(b'A', 0), (b'B', 1)]).unwrap(), 2);
        let mut w = ws.pop().unwrap();
        let t = thread::spawn(move || {
            let mut b = Vec::new();
            while b.len() < 2 {
                if w.recv_burst(&mut b, 2).unwrap() == 0 {
                    thread::yield_now();
                }
            }
            let second = b.pop().unwrap();
            w.drop_packet(b.pop().unwrap()).unwrap();
            w.done(second).unwrap();
            w
        });
        let mut out = Vec::new();
        while d.in_flight() > 0 {
            if d.collect(&mut out) == 0 {
                thread::yield_now();
            }
        }
        assert_eq!(out, [(b'B', 1)]);
        assert_eq!(d.stats().snapshot().get("dropped"), Some(1));
        drop(t.join().unwrap());
    });
}

/// A worker dropped without `leave` while holding one packet, with one more still in its
/// ring, concurrently with the distributor polling: the held packet is counted as lost,
/// the undelivered one is redistributed to the other worker, nothing is left in flight.
#[test]
fn dropped_worker_is_an_implicit_leave() {
    loom::model(|| {
        let (mut d, mut ws) =
            distributor::new(Config::default().workers(2).credit(2), |p: &(u8, u8)| {
                u64::from(p.0)
            })
            .unwrap();
        let mut w1 = ws.pop().unwrap();
        let mut w0 = ws.pop().unwrap();
        assert_eq!(d.distribute(&mut vec![(b'A', 0), (b'A', 1)]).unwrap(), 2);
        let t = thread::spawn(move || {
            let mut b = Vec::new();
            while w0.recv_burst(&mut b, 1).unwrap() == 0 {
                thread::yield_now();
            }
            drop(w0); // dies holding (A, 0)
            b
        });
        while d.active_workers() == 2 {
            d.distribute(&mut Vec::new()).unwrap();
            thread::yield_now();
        }
        assert_eq!(t.join().unwrap(), [(b'A', 0)]);
        assert_eq!(d.stats().snapshot().get("lost"), Some(1));
        let mut b = Vec::new();
        w1.recv_burst(&mut b, 2).unwrap();
        assert_eq!(
            b,
            [(b'A', 1)],
            "the undelivered packet goes to the other worker"
        );
        w1.done_burst(&mut b).unwrap();
        let mut out = Vec::new();
        while d.in_flight() > 0 {
            d.collect(&mut out);
            thread::yield_now();
        }
        assert_eq!(out, [(b'A', 1)]);
    });
}

/// The worker registry while a worker finishes a packet, leaves and is removed for good,
/// and another is added, with a stats thread reading the registry concurrently: every
/// total the reader sees is between nothing and the final values and never goes back
/// (the removed worker's counters move into the removed totals in the same roster that
/// stops listing it), and at the end the totals are exact. Dropping the fold of a removed
/// worker's counters makes this model fail.
#[test]
fn registry_totals_never_go_back_across_leave_remove_and_add() {
    loom::model(|| {
        let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(1), |p: &u8| {
            u64::from(*p)
        })
        .unwrap();
        let reg = d.registry();
        let reader = {
            let reg = reg.clone();
            thread::spawn(move || {
                let a = *reg.totals().values();
                let b = *reg.totals().values();
                for (x, y) in a.iter().zip(&b) {
                    assert!(x <= y, "totals went back: {a:?} then {b:?}");
                }
                // received, returned: at most the one packet.
                assert!(b[0] <= 1 && b[1] <= 1, "{b:?}");
            })
        };
        let mut w = ws.pop().unwrap();
        assert_eq!(d.distribute(&mut vec![7]).unwrap(), 1);
        // Spin-free (loom explores every interleaving of the reader with the worker's
        // counting and the distributor's two publications): the packet is in the ring
        // before the worker starts, and its leave is visible once it is joined.
        let t = thread::spawn(move || {
            let mut b = Vec::new();
            assert_eq!(w.recv_burst(&mut b, 1).unwrap(), 1);
            w.done_burst(&mut b).unwrap();
            w.leave(Vec::new()).unwrap();
        });
        t.join().unwrap();
        d.remove_worker(0).unwrap();
        let w = d.add_worker().unwrap();
        assert_eq!(w.id(), 0, "the removed id is reused");
        reader.join().unwrap();
        let totals = reg.totals();
        assert_eq!(
            (totals.get("received"), totals.get("returned")),
            (Some(1), Some(1))
        );
        let mut out = Vec::new();
        d.collect(&mut out);
        assert_eq!(out, [7]);
    });
}

/// A hand-back the distributor has read is in the registry's totals already: the worker
/// counts it before it publishes it, so the ring's release and acquire order the count
/// too. (Counted after the publication, a flush could return while the totals still
/// missed the last packets: seen once under Miri in `tests/nodes.rs`.) Fails with the
/// count after the push.
#[test]
fn a_hand_back_the_distributor_has_read_is_in_the_totals() {
    loom::model(|| {
        let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(1), |p: &u8| {
            u64::from(*p)
        })
        .unwrap();
        let reg = d.registry();
        let mut w = ws.pop().unwrap();
        assert_eq!(d.distribute(&mut vec![7]).unwrap(), 1);
        let t = thread::spawn(move || {
            let mut b = Vec::new();
            assert_eq!(w.recv_burst(&mut b, 1).unwrap(), 1);
            w.done_burst(&mut b).unwrap();
            // Kept alive until joined: its leave is not part of this model.
            w
        });
        let mut out = Vec::new();
        while d.collect(&mut out) == 0 {
            thread::yield_now();
        }
        assert_eq!(
            reg.totals().get("returned"),
            Some(1),
            "a packet back at the distributor is in the totals"
        );
        drop(t.join().unwrap());
    });
}

/// The distributor's waits: with the worker's one credit used, `distribute_wait` sleeps
/// (no spins, no yields) until the worker hands the packet back, and `collect_wait` until
/// the second comes back. A lost wake-up leaves the distributor asleep with the worker
/// done: loom reports the deadlock.
#[test]
fn distribute_wait_and_collect_wait_wake_on_the_hand_back() {
    use flowline::wait::WaitStrategy;
    use std::time::Duration;
    loom::model(|| {
        let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(1), |p: &u8| {
            u64::from(*p)
        })
        .unwrap();
        d.set_wait_strategy(WaitStrategy::SpinPark {
            spins: 0,
            yields: 0,
        });
        assert_eq!(d.distribute(&mut vec![7]).unwrap(), 1);
        let mut w = ws.pop().unwrap();
        let worker = thread::spawn(move || {
            let mut b = Vec::new();
            for _ in 0..2 {
                while w.recv_burst(&mut b, 1).unwrap() == 0 {
                    thread::yield_now();
                }
                w.done_burst(&mut b).unwrap();
            }
        });
        let mut second = vec![8];
        assert_eq!(d.distribute_wait(&mut second, Duration::MAX), Ok(1));
        let mut out = Vec::new();
        while out.len() < 2 {
            d.collect_wait(&mut out, Duration::MAX).unwrap();
        }
        assert_eq!(out, [7, 8]);
        worker.join().unwrap();
    });
}

/// The waits' polls read the return rings after deciding to wait (`distribute_wait`
/// publishes and reads everything before it sleeps): a hand-back that such a read
/// consumes must still end the wait. One spin before the first sleep, so a poll runs (and
/// its reads race with the worker's hand-back) before the distributor sleeps; the worker
/// sleeps too while it waits for its second packet, so a wait that sleeps through the
/// hand-back is a deadlock loom reports.
#[test]
fn distribute_wait_sees_a_hand_back_its_own_poll_read() {
    loom::model(|| {
        let config = Config::default().workers(1).credit(1);
        let (d, ws) = distributor::new(config, |p: &u8| u64::from(*p)).unwrap();
        wait_through_one_credit(d, ws);
    });
}

/// [`distribute_wait_sees_a_hand_back_its_own_poll_read`] with an ordered distributor,
/// which waits for credit and window room (a window of 1) the same way.
#[test]
fn ordered_distribute_wait_sees_a_hand_back_its_own_poll_read() {
    loom::model(|| {
        let config = Config::default().workers(1).credit(1);
        let (d, ws) = distributor::new_ordered::<u8>(config, 1).unwrap();
        wait_through_one_credit(d, ws);
    });
}

/// `collect_wait` while the worker reschedules its one packet before it hands it back:
/// the wait's poll reads the rings in `settle` (which routes what it read) and again in
/// `collect` (which does not); a reschedule that only the second read takes must not be
/// slept through with the packet in the backlog and the worker waiting for it.
#[test]
fn collect_wait_routes_a_reschedule_its_collect_read() {
    use flowline::wait::WaitStrategy;
    use std::time::Duration;
    loom::model(|| {
        let config = Config::default().workers(1).credit(1);
        let (mut d, mut ws) = distributor::new(config, |p: &u8| u64::from(*p)).unwrap();
        d.set_wait_strategy(WaitStrategy::SpinPark {
            spins: 0,
            yields: 0,
        });
        assert_eq!(d.distribute(&mut vec![7]).unwrap(), 1);
        let mut w = ws.pop().unwrap();
        w.set_wait_strategy(WaitStrategy::SpinPark {
            spins: 0,
            yields: 0,
        });
        let worker = thread::spawn(move || {
            let mut b = Vec::new();
            w.recv_burst_wait(&mut b, 1, Duration::MAX).unwrap();
            w.reschedule(b.pop().unwrap()).unwrap();
            w.recv_burst_wait(&mut b, 1, Duration::MAX).unwrap();
            w.done_burst(&mut b).unwrap();
        });
        let mut out = Vec::new();
        while out.is_empty() {
            d.collect_wait(&mut out, Duration::MAX).unwrap();
        }
        assert_eq!(out, [7]);
        worker.join().unwrap();
    });
}

/// One packet takes the worker's one credit; `distribute_wait` of a second waits for its
/// hand-back, which the worker makes concurrently after rescheduling it once (a poll that
/// decides to wait again, then reads the rings before it sleeps); both come back in order.
fn wait_through_one_credit<S: distributor::Schedule<u8>>(
    mut d: distributor::Distributor<u8, S>,
    mut ws: Vec<distributor::Worker<u8>>,
) {
    use flowline::wait::WaitStrategy;
    use std::time::Duration;
    let sleep_after_one_spin = WaitStrategy::SpinPark {
        spins: 1,
        yields: 0,
    };
    d.set_wait_strategy(sleep_after_one_spin);
    assert_eq!(d.distribute(&mut vec![7]).unwrap(), 1);
    let mut w = ws.pop().unwrap();
    w.set_wait_strategy(WaitStrategy::SpinPark {
        spins: 0,
        yields: 0,
    });
    let worker = thread::spawn(move || {
        let mut b = Vec::new();
        // "Not ready": 7 goes back into its flow (the wait routes it back here, keeping
        // the credit used, and decides to wait again), then comes back processed.
        w.recv_burst_wait(&mut b, 1, Duration::MAX).unwrap();
        w.reschedule(b.pop().unwrap()).unwrap();
        for _ in 0..2 {
            w.recv_burst_wait(&mut b, 1, Duration::MAX).unwrap();
            w.done_burst(&mut b).unwrap();
        }
    });
    assert_eq!(d.distribute_wait(&mut vec![8], Duration::MAX), Ok(1));
    let mut out = Vec::new();
    while out.len() < 2 {
        d.collect_wait(&mut out, Duration::MAX).unwrap();
    }
    assert_eq!(out, [7, 8]);
    worker.join().unwrap();
}

/// Hand-backs out of order across flows, merged with in-order ones: the worker hands back
/// its second packet first (`done_at`: it waits on the worker), then the first (`done`,
/// which the waiting one follows on the done ring), then the third out of order past
/// nothing (`drop_at` of the oldest, done as `drop`, control ring), while the distributor
/// polls. Whichever ring it reads first, the positions come out right: the order checks
/// pass, nothing is lost or counted twice, nothing stays in flight.
#[test]
fn out_of_order_hand_backs_merge_across_return_rings() {
    loom::model(|| {
        let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(4), |p: &u8| {
            u64::from(*p)
        })
        .unwrap();
        assert_eq!(d.distribute(&mut vec![b'A', b'B', b'C']).unwrap(), 3);
        let mut w = ws.pop().unwrap();
        let t = thread::spawn(move || {
            let first = w.next_ticket();
            let mut b = Vec::new();
            while b.len() < 3 {
                if w.recv_burst(&mut b, 3).unwrap() == 0 {
                    thread::yield_now();
                }
            }
            w.done_at(first.nth(1), b[1]).unwrap();
            w.done(b[0]).unwrap();
            w.drop_at(first.nth(2), b[2]).unwrap();
            w
        });
        let mut out = Vec::new();
        while d.in_flight() > 0 {
            if d.collect(&mut out) == 0 {
                thread::yield_now();
            }
        }
        assert_eq!(out, [b'A', b'B']);
        assert_eq!(d.stats().snapshot().get("dropped"), Some(1));
        drop(t.join().unwrap());
    });
}

/// The other half of the visibility rule for staged hand-backs: a packet handed back past
/// the oldest (`done_at`) is published by the worker's next receive, on the control ring
/// with its position, while the distributor polls and sends a fourth packet; then the
/// oldest comes back in order and the fourth by ticket, uncovered at once. Whatever the
/// interleaving, the staged packet reaches `collect` before the oldest, every packet
/// comes back once, and nothing stays in flight.
#[test]
fn staged_hand_backs_are_published_by_the_next_receive() {
    loom::model(|| {
        let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(4), |p: &u8| {
            u64::from(*p)
        })
        .unwrap();
        assert_eq!(d.distribute(&mut vec![b'A', b'B']).unwrap(), 2);
        let mut w = ws.pop().unwrap();
        let t = thread::spawn(move || {
            let first = w.next_ticket();
            let mut b = Vec::new();
            while b.len() < 2 {
                if w.recv_burst(&mut b, 2).unwrap() == 0 {
                    thread::yield_now();
                }
            }
            w.done_at(first.nth(1), b[1]).unwrap();
            // Publishes B, then waits for C.
            while b.len() < 3 {
                if w.recv_burst(&mut b, 1).unwrap() == 0 {
                    thread::yield_now();
                }
            }
            w.done_at(first.nth(2), b[2]).unwrap();
            w.done(b[0]).unwrap();
            w
        });
        let mut out = Vec::new();
        let mut input = vec![b'C'];
        while !input.is_empty() || d.in_flight() > 0 {
            let sent = d.distribute(&mut input).unwrap();
            if d.collect(&mut out) == 0 && sent == 0 {
                thread::yield_now();
            }
        }
        assert_eq!(out, [b'B', b'A', b'C']);
        assert_eq!(d.worker_completed(0), Some(3));
        drop(t.join().unwrap());
    });
}

/// The reorder window of an ordered distributor with a leaving worker: packets 0 and 2
/// go to worker 0, packet 1 to worker 1. Worker 0 hands back 0 and leaves with 2 still in
/// its ring; the distributor recovers 2 with its place in the order and routes it to
/// worker 1, which hands back 1 and 2 as they come. Whatever the interleaving, the
/// packets leave `collect` once each, in order, and nothing stays in the window.
#[test]
fn reorder_window_with_a_leaving_worker() {
    loom::model(|| {
        let (mut d, mut ws) =
            distributor::new_ordered::<u8>(Config::default().workers(2).credit(2), 4).unwrap();
        assert_eq!(d.distribute(&mut vec![0, 1, 2]).unwrap(), 3);
        let mut w1 = ws.pop().unwrap();
        let mut w0 = ws.pop().unwrap();
        let t0 = thread::spawn(move || {
            let mut b = Vec::new();
            while b.is_empty() {
                if w0.recv_burst(&mut b, 1).unwrap() == 0 {
                    thread::yield_now();
                }
            }
            assert_eq!(b, [0]);
            w0.done(b[0]).unwrap();
            w0.leave(Vec::new()).unwrap();
        });
        let t1 = thread::spawn(move || {
            let (mut b, mut handed) = (Vec::new(), 0);
            while handed < 2 {
                if w1.recv_burst(&mut b, 2).unwrap() == 0 {
                    thread::yield_now();
                }
                handed += b.len();
                w1.done_burst(&mut b).unwrap();
            }
            w1
        });
        let mut out = Vec::new();
        while out.len() < 3 {
            d.distribute(&mut Vec::new()).unwrap();
            if d.collect(&mut out) == 0 {
                thread::yield_now();
            }
        }
        assert_eq!(out, [0, 1, 2]);
        assert_eq!((d.in_flight(), d.waiting_for_order()), (0, 0));
        t0.join().unwrap();
        drop(t1.join().unwrap());
    });
}

/// A pipeline of two atomic stages, one worker of credit 1 and an admission limit of 1:
/// the second packet waits in `distribute_wait` while the first goes through both stages
/// (its forward is routed although the pipeline is full, so it drains), then both come
/// out in order. Whatever the interleaving, nothing deadlocks and nothing is lost.
#[test]
fn a_full_two_stage_pipeline_drains() {
    use distributor::StageType;
    use flowline::wait::WaitStrategy;
    use std::time::Duration;
    loom::model(|| {
        let config = Config::default().workers(1).credit(1);
        let stages = [StageType::Atomic, StageType::Atomic];
        let (mut d, mut ws) =
            distributor::new_pipeline(config, &stages, |p: &(usize, u8)| (p.0, 7)).unwrap();
        assert_eq!(d.admission_limit(), 1);
        d.set_wait_strategy(WaitStrategy::SpinPark {
            spins: 1,
            yields: 0,
        });
        assert_eq!(d.distribute(&mut vec![(0, 1)]).unwrap(), 1);
        let mut w = ws.pop().unwrap();
        w.set_wait_strategy(WaitStrategy::SpinPark {
            spins: 0,
            yields: 0,
        });
        let worker = thread::spawn(move || {
            let mut b = Vec::new();
            for _ in 0..4 {
                w.recv_burst_wait(&mut b, 1, Duration::MAX).unwrap();
                let mut p = b.pop().unwrap();
                if p.0 == 0 {
                    p.0 = 1;
                    w.forward(p).unwrap();
                } else {
                    w.done(p).unwrap();
                }
            }
        });
        assert_eq!(d.distribute_wait(&mut vec![(0, 2)], Duration::MAX), Ok(1));
        let mut out = Vec::new();
        while out.len() < 2 {
            d.collect_wait(&mut out, Duration::MAX).unwrap();
        }
        assert_eq!(out, [(1, 1), (1, 2)]);
        worker.join().unwrap();
    });
}

/// A pipeline whose stages have a worker each (links) and whose later stage has the
/// higher priority: worker 0 serves stage 0 only and forwards, worker 1 serves stage 1
/// only and completes, both with credit 1. Whatever the interleaving of the three
/// threads, each packet reaches only a worker linked to its stage, both come out once,
/// and nothing waits for ever.
#[test]
fn linked_workers_with_priorities_pass_packets_on() {
    use distributor::StageType;
    use flowline::wait::WaitStrategy;
    use std::time::Duration;
    // Three threads: at most 2 preemptions (3 runs for over ten minutes).
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(model.preemption_bound.map_or(2, |b| b.min(2)));
    model.check(|| {
        let config = Config::default().workers(2).credit(1);
        let stages = [StageType::Parallel, StageType::Atomic];
        let (mut d, ws) =
            distributor::new_pipeline(config, &stages, |p: &(usize, u8)| (p.0, 7)).unwrap();
        d.link(0, &[0]).unwrap();
        d.link(1, &[1]).unwrap();
        d.set_priority(1, 1).unwrap();
        d.set_wait_strategy(WaitStrategy::SpinPark {
            spins: 1,
            yields: 0,
        });
        let handles: Vec<_> = ws
            .into_iter()
            .enumerate()
            .map(|(stage, mut w)| {
                w.set_wait_strategy(WaitStrategy::SpinPark {
                    spins: 0,
                    yields: 0,
                });
                thread::spawn(move || {
                    let mut b = Vec::new();
                    for _ in 0..2 {
                        w.recv_burst_wait(&mut b, 1, Duration::MAX).unwrap();
                        let mut p = b.pop().unwrap();
                        assert_eq!(p.0, stage, "a packet of a stage this worker does not serve");
                        if stage == 0 {
                            p.0 = 1;
                            w.forward(p).unwrap();
                        } else {
                            w.done(p).unwrap();
                        }
                    }
                })
            })
            .collect();
        // Stage 0's one worker has credit for one packet: the second waits its turn.
        let mut input = vec![(0, 1), (0, 2)];
        let mut sent = d.distribute(&mut input).unwrap();
        while !input.is_empty() {
            sent += d.distribute_wait(&mut input, Duration::MAX).unwrap();
        }
        assert_eq!(sent, 2);
        let mut out = Vec::new();
        while out.len() < 2 {
            d.collect_wait(&mut out, Duration::MAX).unwrap();
        }
        out.sort_unstable();
        assert_eq!(out, [(1, 1), (1, 2)]);
        for h in handles {
            h.join().unwrap();
        }
    });
}
