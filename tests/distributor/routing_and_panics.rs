//! Where each packet goes by the routing rules, and user code that panics (a tag, a
//! packet's `Drop`, a bridge packet) or a forgotten worker: nothing lost, order kept.
#![cfg(all(not(loom), feature = "std"))]

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use flowline::distributor::{self, Config, FlushError};

use super::guarantees::recv_all;
use crate::support::nodes_layout::two_nodes;
use crate::support::rng::Rng;

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
        Config::default().workers(WORKERS).credit(CREDIT),
        |p: &(u64, u64)| p.0,
    )
    .unwrap();
    // Each call publishes what it routed: this checks single calls.
    d.set_batching(1, 0);
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut next = move |n: u64| rng.next_u64() % n;
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
        Config::default().workers(2).credit(8),
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
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &Bomb| p.0).unwrap();
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

/// `drop_at` of a later packet whose `Drop` panics: the drop is counted and published
/// (by its position) before the packet's `Drop` runs, so the older packet still held and
/// the ones after it come back in order, and a flush ends. The same through an ordered
/// distributor, whose window gives the dropped packet's place up.
#[test]
fn a_packet_panicking_in_drop_at_leaves_the_worker_in_order() {
    let config = Config::default().workers(1).credit(8);
    let tag: fn(&Bomb) -> u64 = |p| p.0;
    let (d, ws) = distributor::new(config, tag).unwrap();
    drop_panicking_in_order(d, ws);
    let (d, ws) = distributor::new_ordered(config, 8).unwrap();
    let d = drop_panicking_in_order(d, ws);
    assert_eq!(d.waiting_for_order(), 0);
}

/// [`a_packet_panicking_in_drop_at_leaves_the_worker_in_order`] through `d` and its one
/// worker; returns `d`, flushed.
fn drop_panicking_in_order<S: distributor::Schedule<Bomb>>(
    mut d: distributor::Distributor<Bomb, S>,
    mut ws: Vec<distributor::Worker<Bomb>>,
) -> distributor::Distributor<Bomb, S> {
    d.set_batching(1, 0);
    d.distribute(&mut vec![Bomb(1, false), Bomb(2, true), Bomb(3, false)])
        .unwrap();
    let t = ws[0].next_ticket();
    let mut held = recv_all(&mut ws[0]);
    let third = held.pop().unwrap();
    let second = held.pop().unwrap();
    let first = held.pop().unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ws[0].drop_at(t.nth(1), second).map_err(|_| ())
    }));
    assert!(
        r.is_err(),
        "the packet's drop panicked, in the caller's hands"
    );
    ws[0].done(first).map_err(|_| ()).unwrap();
    ws[0].done(third).map_err(|_| ()).unwrap();
    let mut out = Vec::new();
    d.flush(&mut out, Duration::from_secs(10)).unwrap();
    assert_eq!(out.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(d.stats().snapshot().get("dropped"), Some(1));
    assert_eq!(d.in_flight(), 0);
    d
}

/// A node dropped with a packet in its inbound bridge whose `Drop` panics: the node's
/// final counts and its flushing mark are published before, so the other node's flush
/// ends (it could only time out).
#[test]
fn a_node_dropping_a_panicking_bridge_packet_lets_the_others_flush() {
    let ((n1, w1), (mut n0, _w0)) = two_nodes(1, 8, 8, |p: &Bomb| p.0);
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
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(2).credit(8), |p: &(u64, u64)| p.0).unwrap();
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

/// A deque lent to `distribute_deque` keeps, in order, what the call did not take: the
/// packets refused for credit, those after a panicking tag (the one it panicked on
/// included), and with no worker the backlog in front of the rest.
#[test]
fn a_deque_keeps_what_the_call_did_not_take() {
    let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(2), |p: &u64| {
        assert!(*p != 99, "tag of 99");
        *p
    })
    .unwrap();
    // Wrapped around its buffer: made contiguous when lent.
    let mut q: VecDeque<u64> = VecDeque::with_capacity(4);
    q.extend([0, 0, 0]);
    q.drain(..3);
    q.extend([7, 99, 8, 9]);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.distribute_deque(&mut q)));
    assert!(r.is_err());
    assert_eq!(q, [99, 8, 9]);
    q.pop_front();
    assert_eq!(d.distribute_deque(&mut q), Ok(1)); // 8 out (7 went before the panic); credit 2: 9 refused
    assert_eq!(q, [9]);
    // The worker leaves with 7 and 8 unprocessed: they come back in front of 9.
    let mut w = ws.pop().unwrap();
    let held = recv_all(&mut w);
    assert_eq!(held, [7, 8]);
    w.leave(held).unwrap();
    assert!(d.distribute_deque(&mut q).is_err());
    assert_eq!(q, [7, 8, 9]);
    // From an iterator: what is refused joins `rest`, after the older packets there.
    let mut rest = vec![1];
    assert!(d.distribute_from([2, 3], &mut rest).is_err());
    assert_eq!(rest, [1, 2, 3]);
}
