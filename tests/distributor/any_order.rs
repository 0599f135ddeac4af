//! Hand-backs in any order across flows (`done_at`, `drop_at`, `reschedule_at` by ticket):
//! nothing lost or duplicated, each flow still in order, the order check still catches a
//! worker that reorders one flow, credit counted from the oldest packet held, and leaves,
//! dropped handles and re-joins after out-of-order hand-backs.
#![cfg(all(not(loom), feature = "std"))]

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use flowline::distributor::{self, Config, FlushError, NotHeld, Worker};

use crate::support::rng::Rng;

const LONG: Duration = Duration::from_secs(30);

/// (flow, sequence in its flow)
type Pkt = (u64, u64);

fn recv_all(w: &mut Worker<Pkt>) -> Vec<Pkt> {
    let mut v = Vec::new();
    w.recv_burst(&mut v, usize::MAX).unwrap();
    v
}

/// A burst handed back in reverse: the later packets wait on the worker until the oldest
/// is back, then all go back in order, as an in-order burst would.
#[test]
fn hand_backs_in_reverse_across_flows() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(16), |p: &Pkt| p.0).unwrap();
    let mut w = ws.pop().unwrap();
    let mut input: Vec<Pkt> = (0..8).map(|f| (f, 0)).collect();
    d.distribute(&mut input).unwrap();
    let first = w.next_ticket();
    let mut got = recv_all(&mut w);
    let oldest = got.remove(0);
    for (k, p) in got.into_iter().enumerate().rev() {
        w.done_at(first.nth(k + 1), p).unwrap();
    }
    let mut out = Vec::new();
    assert_eq!(d.collect(&mut out), 0, "they wait behind the oldest");
    assert_eq!((w.held(), d.in_flight()), (1, 8));
    w.done_at(first, oldest).unwrap();
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, (0..8).map(|f| (f, 0)).collect::<Vec<_>>());
    assert_eq!(d.in_flight(), 0);
    assert_eq!(d.worker_completed(0), Some(8));
}

/// Packets handed back past an older one that is still held reach the distributor at the
/// worker's next receive, or when it publishes them, with their positions; the in-order
/// hand-backs after them find the right places.
#[test]
fn hand_backs_held_back_are_published_by_a_receive_or_on_request() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(16), |p: &Pkt| p.0).unwrap();
    let mut w = ws.pop().unwrap();
    d.distribute(&mut vec![(1, 0), (2, 0), (3, 0), (4, 0)])
        .unwrap();
    let first = w.next_ticket();
    let b = recv_all(&mut w);
    w.done_at(first.nth(2), b[2]).unwrap();
    let mut out = Vec::new();
    d.collect(&mut out);
    assert!(out.is_empty());
    // A receive that finds nothing still publishes.
    assert_eq!(w.recv_burst(&mut Vec::new(), 8), Ok(0));
    d.collect(&mut out);
    assert_eq!(out, [(3, 0)]);
    w.done_at(first.nth(3), b[3]).unwrap();
    w.publish_handed_back();
    w.publish_handed_back(); // nothing left: no second copy
    d.collect(&mut out);
    assert_eq!(out, [(3, 0), (4, 0)]);
    let mut rest = vec![b[0], b[1]];
    w.done_burst(&mut rest).unwrap();
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, [(3, 0), (4, 0), (1, 0), (2, 0)]);
    assert_eq!(d.worker_completed(0), Some(4));
}

/// Whole credit windows handed back newest first and the oldest last, round after round,
/// at credits around the window's size (so each slot is used again a window later): every
/// packet comes back once, in order, counted once.
#[test]
fn full_windows_in_reverse_reuse_their_slots() {
    for credit in [1usize, 2, 3, 63, 64, 65, 127, 128, 129] {
        let (mut d, mut ws) =
            distributor::new(Config::default().workers(1).credit(credit), |p: &Pkt| p.0).unwrap();
        let mut w = ws.pop().unwrap();
        let (mut out, mut expect, mut seq) = (Vec::new(), Vec::new(), 0u64);
        // Under Miri two rounds: a slot used again a window later all the same.
        let rounds = if cfg!(miri) { 2 } else { 20 };
        for round in 0..rounds {
            let mut input: Vec<Pkt> = (0..credit as u64).map(|k| (k, seq + k)).collect();
            seq += credit as u64;
            d.distribute(&mut input).unwrap();
            let t = w.next_ticket();
            let b = recv_all(&mut w);
            assert_eq!(b.len(), credit, "credit {credit}, round {round}");
            expect.extend_from_slice(&b);
            for k in (0..b.len()).rev() {
                w.done_at(t.nth(k), b[k]).unwrap();
            }
            assert_eq!(w.held(), 0);
            d.collect(&mut out);
        }
        d.flush(&mut out, LONG).unwrap();
        assert_eq!(out, expect, "credit {credit}");
        let returned = d.worker_totals().get("returned");
        assert_eq!(returned, Some(expect.len() as u64), "credit {credit}");
        assert_eq!(d.in_flight(), 0);
    }
}

/// A drop or reschedule by ticket publishes the packets waiting on the worker, even when
/// its ticket names the oldest packet (which does not uncover them).
#[test]
fn a_drop_or_reschedule_by_ticket_of_the_oldest_publishes_what_waits() {
    for resched in [false, true] {
        let (mut d, mut ws) =
            distributor::new(Config::default().workers(1).credit(8), |p: &Pkt| p.0).unwrap();
        let mut w = ws.pop().unwrap();
        d.distribute(&mut vec![(1, 0), (2, 0), (3, 0)]).unwrap();
        let t = w.next_ticket();
        let b = recv_all(&mut w);
        w.done_at(t.nth(2), b[2]).unwrap();
        if resched {
            w.reschedule_at(t, (4, 0)).unwrap();
        } else {
            w.drop_at(t, b[0]).unwrap();
        }
        let mut out = Vec::new();
        d.collect(&mut out);
        assert_eq!(out, [(3, 0)], "rescheduled: {resched}");
    }
}

/// A packet waiting on the worker is counted as returned when it is published, not
/// before: a handle forgotten with one waiting leaves it in flight and uncounted.
#[test]
fn a_waiting_packet_is_counted_when_published() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(4), |p: &Pkt| p.0).unwrap();
    let mut w = ws.pop().unwrap();
    d.distribute(&mut vec![(1, 0), (2, 0), (3, 0)]).unwrap();
    let t = w.next_ticket();
    let b = recv_all(&mut w);
    w.done_at(t.nth(2), b[2]).unwrap();
    assert_eq!(d.worker_totals().get("returned"), Some(0));
    w.done_at(t.nth(1), b[1]).unwrap();
    w.publish_handed_back();
    assert_eq!(d.worker_totals().get("returned"), Some(2));
    w.done_at(t, b[0]).unwrap();
    assert_eq!(d.worker_totals().get("returned"), Some(3));
    // The oldest back while a packet between waiting ones is still held: only the one
    // it uncovers is published and counted.
    d.distribute(&mut vec![(6, 0), (7, 0), (8, 0), (9, 0)])
        .unwrap();
    let t = w.next_ticket();
    let b = recv_all(&mut w);
    w.done_at(t.nth(1), b[1]).unwrap();
    w.done_at(t.nth(3), b[3]).unwrap();
    w.done(b[0]).unwrap();
    assert_eq!(d.worker_totals().get("returned"), Some(5));
    let mut out = Vec::new();
    d.collect(&mut out);
    d.collect(&mut out);
    d.collect(&mut out);
    assert_eq!(out, [(3, 0), (2, 0), (1, 0), (6, 0), (7, 0)]);
    w.done(b[2]).unwrap();
    assert_eq!(d.worker_totals().get("returned"), Some(7));
    d.distribute(&mut vec![(4, 0), (5, 0)]).unwrap();
    let t = w.next_ticket();
    let b = recv_all(&mut w);
    w.done_at(t.nth(1), b[1]).unwrap();
    // Forgotten for the flush, dropped at the end so nothing leaks.
    let w = std::mem::ManuallyDrop::new(w);
    let r = d.flush(&mut out, Duration::from_millis(20));
    assert!(
        matches!(r, Err(FlushError::Timeout { in_flight: 2, .. })),
        "{r:?}"
    );
    assert_eq!(d.worker_totals().get("returned"), Some(7));
    drop(std::mem::ManuallyDrop::into_inner(w));
}

/// An in-order burst handed back while later packets wait between its packets: each
/// waiting packet goes right after the one that uncovers it, so every position is right.
#[test]
fn an_in_order_burst_around_staged_packets() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(16), |p: &Pkt| p.0).unwrap();
    let mut w = ws.pop().unwrap();
    let mut input: Vec<Pkt> = (0..6).map(|f| (f, 0)).collect();
    d.distribute(&mut input).unwrap();
    let first = w.next_ticket();
    let b = recv_all(&mut w);
    w.done_at(first.nth(4), b[4]).unwrap();
    w.done_at(first.nth(2), b[2]).unwrap();
    let mut burst = vec![b[0], b[1], b[3], b[5], (9, 9)];
    assert_eq!(w.done_burst(&mut burst), Err(NotHeld(())));
    assert_eq!(burst, [(9, 9)], "the surplus stays");
    let mut out = Vec::new();
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, b);
    assert_eq!(d.in_flight(), 0);
}

/// The outside scenario: a worker keeps its processed packets for one `done_burst` at the
/// end of the burst and reschedules some packets on the way, while it still holds older
/// ones. Every packet comes back once, each flow in order, the reschedules go on.
#[test]
fn rescheduling_while_older_packets_are_held() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(64), |p: &Pkt| p.0).unwrap();
    let mut w = ws.pop().unwrap();
    // Flows 0..4, four packets each, interleaved; packets of flow 3 move to flow 103.
    let mut input: Vec<Pkt> = (0..16).map(|i| (i % 4, i / 4)).collect();
    d.distribute(&mut input).unwrap();
    let first = w.next_ticket();
    let mut keep = Vec::new();
    for (k, p) in recv_all(&mut w).into_iter().enumerate() {
        if p.0 == 3 {
            w.reschedule_at(first.nth(k), (103, p.1)).unwrap();
        } else {
            keep.push(p);
        }
    }
    w.done_burst(&mut keep).unwrap();
    d.distribute(&mut Vec::new()).unwrap();
    let moved = recv_all(&mut w);
    assert_eq!(moved, [(103, 0), (103, 1), (103, 2), (103, 3)]);
    w.done_burst(&mut moved.clone()).unwrap();
    let mut out = Vec::new();
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out.len(), 16);
    for f in [0, 1, 2, 103] {
        let seqs: Vec<u64> = out.iter().filter(|p| p.0 == f).map(|p| p.1).collect();
        assert_eq!(seqs, [0, 1, 2, 3], "flow {f}");
    }
    assert_eq!(d.stats().snapshot().get("rescheduled"), Some(4));
}

#[test]
fn tickets_not_held_are_errors() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &Pkt| p.0).unwrap();
    let mut w = ws.pop().unwrap();
    let t = w.next_ticket();
    assert_eq!(
        w.done_at(t, (1, 0)),
        Err(NotHeld((1, 0))),
        "not received yet"
    );
    d.distribute(&mut vec![(1, 0), (2, 0)]).unwrap();
    let mut b = recv_all(&mut w);
    assert_eq!(
        w.done_at(t.nth(2), (9, 9)),
        Err(NotHeld((9, 9))),
        "past what it received"
    );
    w.drop_at(t.nth(1), b.pop().unwrap()).unwrap();
    assert_eq!(
        w.drop_at(t.nth(1), (2, 0)),
        Err(NotHeld((2, 0))),
        "handed back already"
    );
    assert_eq!(
        w.reschedule_at(t.back(1), (0, 0)),
        Err(NotHeld((0, 0))),
        "before its stream"
    );
    w.done_at(t, b.pop().unwrap()).unwrap();
    assert_eq!(w.done_at(t, (1, 0)), Err(NotHeld((1, 0))));
    assert_eq!(w.held(), 0);
    let mut out = Vec::new();
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, [(1, 0)]);
}

/// A worker that hands back a flow's later packet before its earlier one is a bug the
/// order check names (here caught at the `collect` that reads it; debug builds check
/// every out-of-order hand-back, release builds one in 16).
#[test]
#[cfg_attr(not(debug_assertions), ignore = "release builds check one in 16")]
fn a_worker_that_reorders_one_flow_is_caught() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &Pkt| p.0).unwrap();
    let mut w = ws.pop().unwrap();
    d.distribute(&mut vec![(5, 0), (6, 0), (5, 1)]).unwrap();
    let t = w.next_ticket();
    let mut b = recv_all(&mut w);
    w.done_at(t.nth(2), b.pop().unwrap()).unwrap();
    w.publish_handed_back();
    let r = catch_unwind(AssertUnwindSafe(|| d.collect(&mut Vec::new())));
    let msg = *r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("before the one at position 0"), "{msg}");
    assert!(msg.contains("flow 0x5"), "{msg}");
}

/// Credit is counted from the oldest packet held: packets handed back past it free none.
#[test]
fn credit_is_counted_from_the_oldest_packet_held() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(2), |p: &Pkt| p.0).unwrap();
    let mut w = ws.pop().unwrap();
    d.distribute(&mut vec![(1, 0), (2, 0)]).unwrap();
    let t = w.next_ticket();
    let mut b = recv_all(&mut w);
    w.done_at(t.nth(1), b.pop().unwrap()).unwrap();
    let mut more = vec![(3, 0)];
    assert_eq!(d.distribute(&mut more), Ok(0), "the oldest is still held");
    assert_eq!(d.in_flight(), 2, "one held, one waiting behind it");
    w.publish_handed_back();
    assert_eq!(d.distribute(&mut more), Ok(0), "the oldest is still held");
    assert_eq!(d.in_flight(), 1, "one held, one back");
    w.done(b.pop().unwrap()).unwrap();
    assert_eq!(d.distribute(&mut more), Ok(1));
    assert_eq!(recv_all(&mut w), [(3, 0)]);
}

#[test]
fn leaving_after_out_of_order_hand_backs_redistributes_the_rest_in_order() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(8), |p: &Pkt| p.0).unwrap();
    // Everything on one flow-free worker first: flows 1..=4 to worker 0 by hand.
    let w1 = ws.pop().unwrap();
    let mut w0 = ws.pop().unwrap();
    w1.leave(Vec::new()).unwrap();
    d.distribute(&mut vec![(1, 0), (2, 0), (3, 0), (1, 1)])
        .unwrap();
    let mut w1 = d.rejoin(1).unwrap();
    let t = w0.next_ticket();
    let b = recv_all(&mut w0);
    assert_eq!(b, [(1, 0), (2, 0), (3, 0), (1, 1)]);
    w0.done_at(t.nth(2), b[2]).unwrap();
    w0.leave(vec![b[0], b[1], b[3]]).unwrap();
    let mut out = Vec::new();
    let mut got = Vec::new();
    while got.len() < 3 {
        d.distribute(&mut Vec::new()).unwrap();
        d.collect(&mut out);
        got.extend(recv_all(&mut w1));
    }
    assert_eq!(
        got,
        [(1, 0), (2, 0), (1, 1)],
        "the unprocessed ones, in order"
    );
    w1.done_burst(&mut got).unwrap();
    d.flush(&mut out, LONG).unwrap();
    out.sort_unstable();
    assert_eq!(out, [(1, 0), (1, 1), (2, 0), (3, 0)]);
    let t = d.worker_totals();
    assert_eq!(t.get("redistributed"), Some(3));
}

/// A handle dropped after out-of-order hand-backs: what it still held is lost (counted),
/// the flush ends, and the worker re-joins with a clean stream.
#[test]
fn a_dropped_worker_after_out_of_order_hand_backs() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &Pkt| p.0).unwrap();
    let mut w = ws.pop().unwrap();
    d.distribute(&mut vec![(1, 0), (2, 0), (3, 0), (4, 0)])
        .unwrap();
    let t = w.next_ticket();
    let b = recv_all(&mut w);
    w.done_at(t.nth(1), b[1]).unwrap();
    w.drop_at(t.nth(3), b[3]).unwrap();
    drop(w);
    let mut out = Vec::new();
    // Its only worker gone: nothing waits to be routed, nothing is in flight.
    assert_eq!(
        d.flush(&mut out, LONG),
        Err(FlushError::NoWorkers(Vec::new()))
    );
    assert_eq!(out, [(2, 0)]);
    assert_eq!(d.in_flight(), 0);
    let s = d.stats().snapshot();
    assert_eq!((s.get("lost"), s.get("dropped")), (Some(2), Some(1)));
    let mut w = d.rejoin(0).unwrap();
    d.distribute(&mut vec![(1, 1), (5, 0)]).unwrap();
    let t = w.next_ticket();
    let b = recv_all(&mut w);
    w.done_at(t.nth(1), b[1]).unwrap();
    w.done_at(t, b[0]).unwrap();
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, [(2, 0), (1, 1), (5, 0)]);
}

/// A worker thread that panics after handing packets back past an older one: its handle
/// drops as the thread unwinds, and what it handed back still comes back (only the
/// packet it held is lost).
#[test]
fn a_worker_that_panics_with_hand_backs_held_back_loses_only_what_it_held() {
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &Pkt| p.0).unwrap();
    let mut w = ws.pop().unwrap();
    d.distribute(&mut vec![(1, 0), (2, 0), (3, 0)]).unwrap();
    let t = std::thread::spawn(move || {
        let first = w.next_ticket();
        let b = recv_all(&mut w);
        w.done_at(first.nth(2), b[2]).unwrap();
        w.done_at(first.nth(1), b[1]).unwrap();
        panic!("worker fails while it holds the oldest");
    });
    assert!(t.join().is_err());
    let mut out = Vec::new();
    assert_eq!(
        d.flush(&mut out, LONG),
        Err(FlushError::NoWorkers(Vec::new()))
    );
    assert_eq!(out, [(3, 0), (2, 0)], "in the order handed back");
    assert_eq!(d.stats().snapshot().get("lost"), Some(1));
    assert_eq!(d.worker_totals().get("returned"), Some(2));
    assert_eq!(d.in_flight(), 0);
}

/// The distributor's side of the threaded tests: every packet that comes back is counted
/// and comes after the last one of its flow (packets are (flow, sequence in its flow)).
#[derive(Default)]
struct FlowOrder {
    last: HashMap<u64, u64>,
    back: u64,
}

impl FlowOrder {
    fn check(&mut self, out: &mut Vec<Pkt>) {
        for p in out.drain(..) {
            if let Some(&l) = self.last.get(&p.0) {
                assert!(p.1 > l, "flow {} out of order: {} after {}", p.0, p.1, l);
            }
            self.last.insert(p.0, p.1);
            self.back += 1;
        }
    }
}

/// Two worker threads hand back each burst in a random order that keeps every flow's
/// order, mixing `done_at`, `drop_at`, `reschedule_at` and in-order `done_burst`; the
/// distributor's thread checks exactly once and per-flow order on the way out.
#[test]
fn random_orders_across_flows_lose_and_reorder_nothing() {
    const FLOWS: u64 = 37;
    const PACKETS: u64 = if cfg!(miri) { 400 } else { 20_000 };
    let (mut d, ws) =
        distributor::new(Config::default().workers(2).credit(32), |p: &Pkt| p.0).unwrap();
    let threads: Vec<_> = ws
        .into_iter()
        .enumerate()
        .map(|(i, mut w)| {
            std::thread::spawn(move || {
                let mut r = Rng::new(0x5eed + i as u64);
                let mut b = Vec::new();
                loop {
                    let first = w.next_ticket();
                    match w.recv_burst_wait(&mut b, 16, LONG) {
                        Ok(_) => {}
                        Err(_) => return,
                    }
                    // A random order that keeps each flow's packets in order: repeatedly
                    // pick a random packet that is the first left of its flow.
                    let mut left: Vec<(usize, Pkt)> = b.drain(..).enumerate().collect();
                    let mut in_order = Vec::new();
                    while !left.is_empty() {
                        let k = (r.next_u64() % left.len() as u64) as usize;
                        let flow = left[k].1 .0;
                        let k = left.iter().position(|(_, p)| p.0 == flow).unwrap();
                        let (j, p) = left.remove(k);
                        let choice = r.next_u64() % 16;
                        if (choice == 2 || choice == 3) && left.iter().all(|(jj, _)| *jj > j) {
                            // The oldest held: may go back in order, later.
                            in_order.push(p);
                            continue;
                        }
                        if in_order.iter().any(|q| q.0 == p.0) || r.next_u64() % 4 == 0 {
                            // The deferred ones are the oldest held; a packet of their
                            // flow must not overtake them.
                            w.done_burst(&mut in_order).unwrap();
                        }
                        let t = first.nth(j);
                        match choice {
                            0 => w.drop_at(t, p).unwrap(),
                            1 if p.0 < FLOWS => w.reschedule_at(t, (p.0 + FLOWS, p.1)).unwrap(),
                            _ => w.done_at(t, p).unwrap(),
                        }
                    }
                    w.done_burst(&mut in_order).unwrap();
                }
            })
        })
        .collect();
    let mut next = vec![0u64; FLOWS as usize];
    let mut sent = 0u64;
    let mut order = FlowOrder::default();
    let mut out = Vec::new();
    let mut r = Rng::new(7);
    let mut input = Vec::new();
    while sent < PACKETS || !input.is_empty() {
        while input.len() < 24 && sent < PACKETS {
            let f = r.next_u64() % FLOWS;
            input.push((f, next[f as usize]));
            next[f as usize] += 1;
            sent += 1;
        }
        d.distribute_wait(&mut input, LONG).unwrap();
        d.collect(&mut out);
        order.check(&mut out);
    }
    d.flush(&mut out, LONG).unwrap();
    order.check(&mut out);
    let s = d.stats().snapshot();
    let dropped = s.get("dropped").unwrap();
    assert_eq!(
        order.back + dropped,
        PACKETS,
        "exactly once: returned + dropped"
    );
    assert!(dropped > 0 && s.get("rescheduled").unwrap() > 0);
    drop(d);
    for t in threads {
        t.join().unwrap();
    }
}

/// The user's `tag` panicking in the check of a packet handed back out of order: the
/// packet was kept and counted first, so the next `collect` returns it, and nothing is
/// lost or returned twice.
#[test]
#[cfg_attr(not(debug_assertions), ignore = "release builds check one in 16")]
fn a_panicking_tag_in_an_out_of_order_check_loses_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let armed = Arc::new(AtomicBool::new(false));
    let a = Arc::clone(&armed);
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), move |p: &Pkt| {
            assert!(
                !(a.load(Ordering::Relaxed) && p.0 == 2),
                "tag cannot parse flow 2"
            );
            p.0
        })
        .unwrap();
    let mut w = ws.pop().unwrap();
    d.distribute(&mut vec![(1, 0), (2, 0), (3, 0)]).unwrap();
    let t = w.next_ticket();
    let b = recv_all(&mut w);
    w.done_at(t.nth(1), b[1]).unwrap();
    w.publish_handed_back();
    armed.store(true, Ordering::Relaxed);
    let mut out = Vec::new();
    assert!(catch_unwind(AssertUnwindSafe(|| d.collect(&mut out))).is_err());
    armed.store(false, Ordering::Relaxed);
    w.done_at(t.nth(2), b[2]).unwrap();
    w.done(b[0]).unwrap();
    d.flush(&mut out, LONG).unwrap();
    assert_eq!(out, [(2, 0), (1, 0), (3, 0)]);
    assert_eq!(d.in_flight(), 0);
}

/// A packet rescheduled into another flow, or dropped, past an older packet of its flow
/// that the worker still holds: it leaves its flow, whose order is not at stake, so the
/// order check lets it pass; the flow stays on its worker until the older packet is back,
/// and everything comes back exactly once.
#[test]
fn a_packet_rescheduled_or_dropped_past_its_flow_leaves_it() {
    for drop_it in [false, true] {
        let (mut d, mut ws) =
            distributor::new(Config::default().workers(2).credit(8), |p: &Pkt| p.0).unwrap();
        d.distribute(&mut vec![(1, 0), (1, 1)]).unwrap();
        // One flow: both went to one worker, `k`.
        let mut got = Vec::new();
        let k = (0..2)
            .find(|&k| ws[k].recv_burst(&mut got, 8).unwrap() > 0)
            .unwrap();
        let first = ws[k].next_ticket().back(2);
        assert_eq!(got, [(1, 0), (1, 1)]);
        let later = got.pop().unwrap();
        if drop_it {
            ws[k].drop_at(first.nth(1), later).unwrap();
        } else {
            ws[k].reschedule_at(first.nth(1), (2, later.1)).unwrap();
        }
        // Read by the distributor while (1, 0) is still held: no panic, and flow 1 stays
        // with worker `k`.
        d.distribute(&mut vec![(1, 2)]).unwrap();
        let elsewhere = recv_all(&mut ws[1 - k]);
        assert!(
            elsewhere.iter().all(|p| p.0 != 1),
            "flow 1 moved while a packet was held"
        );
        let mut elsewhere = elsewhere;
        ws[1 - k].done_burst(&mut elsewhere).unwrap();
        ws[k].done(got.pop().unwrap()).unwrap();
        let mut out = Vec::new();
        for _ in 0..4 {
            d.distribute(&mut Vec::new()).unwrap();
            for w in ws.iter_mut() {
                let mut b = recv_all(w);
                w.done_burst(&mut b).unwrap();
            }
            d.collect(&mut out);
        }
        d.flush(&mut out, LONG).unwrap();
        let flow1: Vec<u64> = out.iter().filter(|p| p.0 == 1).map(|p| p.1).collect();
        assert_eq!(flow1, [0, 2]);
        let moved: Vec<Pkt> = out.iter().copied().filter(|p| p.0 == 2).collect();
        assert_eq!(moved, if drop_it { vec![] } else { vec![(2, 1)] });
        let s = d.stats().snapshot();
        assert_eq!(s.get("dropped"), Some(u64::from(drop_it)));
        assert_eq!(s.get("rescheduled"), Some(u64::from(!drop_it)));
    }
}

/// Threads that drop and reschedule (into another flow) packets at once as they go
/// through each burst, while the older packets of the same flows wait for one in-order
/// `done_burst` at the end: few flows, so nearly every such hand-back passes an older
/// packet of its flow. No order check trips; every packet comes back exactly once, each
/// flow in order.
#[test]
fn threads_reschedule_and_drop_past_older_packets_of_their_flows() {
    const FLOWS: u64 = 3;
    const PACKETS: u64 = if cfg!(miri) { 300 } else { 30_000 };
    let (mut d, ws) =
        distributor::new(Config::default().workers(3).credit(16), |p: &Pkt| p.0).unwrap();
    let threads: Vec<_> = ws
        .into_iter()
        .enumerate()
        .map(|(i, mut w)| {
            std::thread::spawn(move || {
                let mut r = Rng::new(0xfeed + i as u64);
                let mut b = Vec::new();
                loop {
                    let first = w.next_ticket();
                    if w.recv_burst_wait(&mut b, 16, LONG).is_err() {
                        return;
                    }
                    let mut keep = Vec::new();
                    for (j, p) in b.drain(..).enumerate() {
                        match r.next_u64() % 6 {
                            0 => w.drop_at(first.nth(j), p).unwrap(),
                            1 | 2 if p.0 < FLOWS => {
                                w.reschedule_at(first.nth(j), (p.0 + FLOWS, p.1)).unwrap()
                            }
                            _ => keep.push(p),
                        }
                    }
                    w.done_burst(&mut keep).unwrap();
                }
            })
        })
        .collect();
    let mut order = FlowOrder::default();
    let mut input = Vec::new();
    let mut out = Vec::new();
    let mut sent = 0u64;
    while sent < PACKETS || !input.is_empty() {
        while input.len() < 24 && sent < PACKETS {
            input.push((sent % FLOWS, sent));
            sent += 1;
        }
        d.distribute_wait(&mut input, LONG).unwrap();
        d.collect(&mut out);
        order.check(&mut out);
    }
    d.flush(&mut out, LONG).unwrap();
    order.check(&mut out);
    let s = d.stats().snapshot();
    let dropped = s.get("dropped").unwrap();
    assert_eq!(
        order.back + dropped,
        PACKETS,
        "exactly once: returned + dropped"
    );
    assert!(dropped > 0 && s.get("rescheduled").unwrap() > 0);
    drop(d);
    for t in threads {
        t.join().unwrap();
    }
}
