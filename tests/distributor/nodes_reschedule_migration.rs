//! The multi-node layout when a flow's bucket migrates while its packets are rescheduled
//! into another flow: the reschedules a flow's packets make into flow `g` before the
//! handover (at the old owner) and after it (at the new owner) must reach `g`'s workers
//! in the order they were made. Nodes and workers are driven step by step from one
//! thread, so each interleaving is deterministic.
#![cfg(all(not(loom), feature = "std"))]

use flowline::distributor::nodes::{self, bucket_of, owner_of, NodesConfig};
use flowline::distributor::Worker;

use crate::support::nodes_layout::{two_nodes, two_nodes_single_calls};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pkt {
    flow: u64,
    seq: u64,
    /// The flow a worker reschedules it into (`u64::MAX`: none).
    then: u64,
}

fn tag(p: &Pkt) -> u64 {
    p.flow
}

fn pkt(flow: u64, seq: u64) -> Pkt {
    Pkt {
        flow,
        seq,
        then: u64::MAX,
    }
}

/// A packet of `flow` that its worker reschedules into `then`.
fn resched(flow: u64, seq: u64, then: u64) -> Pkt {
    Pkt { flow, seq, then }
}

type Node = nodes::NodeDistributor<Pkt, fn(&Pkt) -> u64>;

/// One turn of a worker: takes what it was sent and hands it back in order, rescheduling
/// the packets that ask for it; records the sequence numbers of `g`'s packets it ran.
fn work(w: &mut Worker<Pkt>, g: u64, seen: &mut Vec<u64>) {
    let mut b = Vec::new();
    w.recv_burst(&mut b, 64).unwrap();
    for mut p in b {
        if p.flow == g {
            seen.push(p.seq);
        }
        if p.then != u64::MAX {
            p.flow = p.then;
            p.then = u64::MAX;
            w.reschedule(p).unwrap();
        } else {
            w.done(p).unwrap();
        }
    }
}

/// Drives both nodes and their workers until `want` packets of `g` ran.
fn drive(
    n0: &mut Node,
    w0: &mut [Worker<Pkt>],
    n1: &mut Node,
    w1: &mut [Worker<Pkt>],
    g: u64,
    seen: &mut Vec<u64>,
    want: usize,
) {
    let mut out = Vec::new();
    for _ in 0..50 {
        n1.distribute(&mut Vec::new()).unwrap();
        n0.distribute(&mut Vec::new()).unwrap();
        work(&mut w0[0], g, seen);
        work(&mut w1[0], g, seen);
        n0.collect(&mut out);
        n1.collect(&mut out);
        if seen.len() >= want && !n0.migrating() && !n1.migrating() {
            break;
        }
    }
}

/// Flow `f` migrates from node 0 to node 1; `g` is node 1's. Node 0's worker reschedules
/// p1 of `f` into `g` (r1) just before the handover ends, and node 0's bridge to node 1 is
/// full, so r1 waits at node 0 for room. After the handover, p3 of `f` runs at node 1 and
/// is rescheduled into `g` (r3), which node 1 routes to its own worker. r1 must still run
/// first: it was made first, from an older packet of `f` (both entered at node 1).
#[test]
fn a_reschedule_waiting_for_the_bridge_is_not_overtaken_after_its_flow_migrates() {
    let f = (0..).find(|&t| owner_of(t, 2) == 0).unwrap();
    let g = (0..)
        .find(|&t| owner_of(t, 2) == 1 && bucket_of(t) != bucket_of(f))
        .unwrap();
    let h = (0..)
        .find(|&t| owner_of(t, 2) == 1 && bucket_of(t) != bucket_of(f) && t != g)
        .unwrap();
    let ((mut n1, mut w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 8, 1, tag as fn(&Pkt) -> u64);
    let mut b = Vec::new();
    // p1 of f enters at node 1, crosses to node 0 and reaches its worker.
    assert_eq!(n1.distribute(&mut vec![resched(f, 1, g)]), Ok(1));
    n0.distribute(&mut Vec::new()).unwrap();
    w0[0].recv_burst(&mut b, 8).unwrap();
    let mut p1 = b.pop().expect("p1 at node 0's worker");
    // f's bucket moves to node 1; node 1 adopts the new map.
    n0.migrate(bucket_of(f), 1).unwrap();
    n1.distribute(&mut Vec::new()).unwrap();
    // A packet of h fills node 0's one-slot bridge to node 1.
    assert_eq!(n0.distribute(&mut vec![pkt(h, 0)]), Ok(1));
    // Node 0's worker reschedules p1 into g: r1, for node 1, finds the bridge full.
    p1.flow = g;
    p1.then = u64::MAX;
    w0[0].reschedule(p1).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    // p3 of f enters at node 1; its worker reschedules it into g (r3) before node 0 has
    // pushed r1.
    assert_eq!(n1.distribute(&mut vec![resched(f, 3, g)]), Ok(1));
    let mut seen = Vec::new();
    work(&mut w1[0], g, &mut seen);
    drive(&mut n0, &mut w0, &mut n1, &mut w1, g, &mut seen, 2);
    assert!(!n0.migrating(), "handover ended");
    assert_eq!(seen, [1, 3], "g's reschedules in the order they were made");
}

/// The same with the bridge not full: r1 is on node 0's bridge to node 1 when the
/// handover ends, behind a packet node 1 read earlier and placed only now (a node reads a
/// bridge again only once what it read from it before is placed), so node 1 does not read
/// r1 in the call that routes p3.
#[test]
fn a_reschedule_on_the_bridge_is_not_overtaken_after_its_flow_migrates() {
    let f = (0..).find(|&t| owner_of(t, 2) == 0).unwrap();
    let g = (0..)
        .find(|&t| owner_of(t, 2) == 1 && bucket_of(t) != bucket_of(f))
        .unwrap();
    let h = (0..)
        .find(|&t| owner_of(t, 2) == 1 && bucket_of(t) != bucket_of(f) && t != g)
        .unwrap();
    let ((mut n1, mut w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 2, 8, tag as fn(&Pkt) -> u64);
    let mut b = Vec::new();
    assert_eq!(n1.distribute(&mut vec![resched(f, 1, g)]), Ok(1));
    n0.distribute(&mut Vec::new()).unwrap();
    w0[0].recv_burst(&mut b, 8).unwrap();
    let mut p1 = b.pop().expect("p1 at node 0's worker");
    n0.migrate(bucket_of(f), 1).unwrap();
    n1.distribute(&mut Vec::new()).unwrap();
    // Node 1's worker holds x0 and x1 of h (all its credit); y of h crosses from node 0
    // and waits at node 1.
    assert_eq!(n1.distribute(&mut vec![pkt(h, 0), pkt(h, 1)]), Ok(2));
    let mut xs = Vec::new();
    w1[0].recv_burst(&mut xs, 8).unwrap();
    assert_eq!(xs.len(), 2);
    assert_eq!(n0.distribute(&mut vec![pkt(h, 2)]), Ok(1));
    n1.distribute(&mut Vec::new()).unwrap();
    assert_eq!(n1.bridge_stats().received, 1, "y waits at node 1");
    // r1 goes onto the bridge behind y.
    p1.flow = g;
    p1.then = u64::MAX;
    w0[0].reschedule(p1).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    // The worker finishes x0 and x1; p3 of f enters at node 1 and is routed with y.
    w1[0].done_burst(&mut xs).unwrap();
    let mut input = vec![resched(f, 3, g)];
    n1.distribute(&mut input).unwrap();
    assert!(input.is_empty());
    let mut seen = Vec::new();
    work(&mut w1[0], g, &mut seen);
    drive(&mut n0, &mut w0, &mut n1, &mut w1, g, &mut seen, 2);
    assert!(!n0.migrating(), "handover ended");
    assert_eq!(seen, [1, 3], "g's reschedules in the order they were made");
}

/// Flow `g` migrates from node 1 to node 0 while flow `f` migrates from node 0 to node 1.
/// Node 0's worker reschedules p1 of `f` into `g` (r1) while `g`'s handover is pending:
/// node 0 holds r1. Then `f`'s handover ends, p3 of `f` runs at node 1 and is rescheduled
/// into `g` (r3) while node 1 still finishes `g`'s packets. r1 must run first.
#[test]
fn a_reschedule_held_for_a_handover_is_not_overtaken_by_one_made_at_the_old_owner() {
    let f = (0..).find(|&t| owner_of(t, 2) == 0).unwrap();
    let g = (0..)
        .find(|&t| owner_of(t, 2) == 1 && bucket_of(t) != bucket_of(f))
        .unwrap();
    let ((mut n1, mut w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    let mut b = Vec::new();
    // Node 1's worker holds y of g, so g's handover to node 0 stays pending.
    n1.distribute(&mut vec![pkt(g, 0)]).unwrap();
    w1[0].recv_burst(&mut b, 8).unwrap();
    let y = b.pop().expect("y at node 1's worker");
    n1.migrate(bucket_of(g), 0).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    // p1 of f enters at node 1, runs at node 0 and is rescheduled into g: held there.
    assert_eq!(n1.distribute(&mut vec![resched(f, 1, g)]), Ok(1));
    n0.distribute(&mut Vec::new()).unwrap();
    w0[0].recv_burst(&mut b, 8).unwrap();
    let mut p1 = b.pop().expect("p1 at node 0's worker");
    p1.flow = g;
    p1.then = u64::MAX;
    w0[0].reschedule(p1).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    // f's bucket moves to node 1 and its handover ends (nothing of f is left at node 0).
    n0.migrate(bucket_of(f), 1).unwrap();
    for _ in 0..5 {
        n1.distribute(&mut Vec::new()).unwrap();
        n0.distribute(&mut Vec::new()).unwrap();
    }
    // p3 of f enters at node 1 and reaches node 1's worker, behind y; the worker finishes
    // y and reschedules p3 into g (r3) before node 1 looks again.
    n1.distribute(&mut vec![resched(f, 3, g)]).unwrap();
    w1[0].recv_burst(&mut b, 8).unwrap();
    assert_eq!(b, [resched(f, 3, g)], "p3 at node 1's worker");
    let mut p3 = b.pop().unwrap();
    w1[0].done(y).unwrap();
    p3.flow = g;
    p3.then = u64::MAX;
    w1[0].reschedule(p3).unwrap();
    let mut seen = Vec::new();
    drive(&mut n0, &mut w0, &mut n1, &mut w1, g, &mut seen, 2);
    assert!(!n0.migrating() && !n1.migrating(), "handovers ended");
    assert_eq!(seen, [1, 3], "g's reschedules in the order they were made");
}

/// Three nodes: flow `f` migrates from node 2 to node 1, and `g` is node 0's. r1 (from p1
/// of `f`, made at node 2) reaches node 0 before the handover ends and waits there for
/// credit; r3 (from p3 of `f`, made at node 1 after the handover) comes over the other
/// bridge, which node 0 places first. r1 must still run first.
#[test]
fn reschedules_over_two_bridges_keep_their_order_after_their_flow_migrates() {
    let f = (0..).find(|&t| owner_of(t, 3) == 2).unwrap();
    let g = (0..).find(|&t| owner_of(t, 3) == 0).unwrap();
    let cfg = NodesConfig::default()
        .nodes(3)
        .workers_per_node(1)
        .credit(1)
        .bridge(8);
    let mut layout = nodes::new(cfg, tag as fn(&Pkt) -> u64).unwrap();
    for (n, _) in &mut layout {
        n.set_batching(1, 0); // this test checks single calls
    }
    let (mut n2, mut w2) = layout.pop().unwrap();
    let (mut n1, mut w1) = layout.pop().unwrap();
    let (mut n0, mut w0) = layout.pop().unwrap();
    let mut b = Vec::new();
    // Node 0's worker holds y of g: no credit left there.
    n0.distribute(&mut vec![pkt(g, 0)]).unwrap();
    w0[0].recv_burst(&mut b, 8).unwrap();
    let y = b.pop().expect("y at node 0's worker");
    // p1 of f enters at node 1 and runs at node 2.
    assert_eq!(n1.distribute(&mut vec![resched(f, 1, g)]), Ok(1));
    n2.distribute(&mut Vec::new()).unwrap();
    w2[0].recv_burst(&mut b, 8).unwrap();
    let mut p1 = b.pop().expect("p1 at node 2's worker");
    n2.migrate(bucket_of(f), 1).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    n1.distribute(&mut Vec::new()).unwrap();
    // r1 crosses to node 0 and waits there; the handover ends.
    p1.flow = g;
    p1.then = u64::MAX;
    w2[0].reschedule(p1).unwrap();
    for _ in 0..5 {
        n2.distribute(&mut Vec::new()).unwrap();
        n0.distribute(&mut Vec::new()).unwrap();
        n1.distribute(&mut Vec::new()).unwrap();
    }
    assert!(!n2.migrating(), "handover ended");
    assert_eq!(n0.bridge_stats().received, 1, "r1 waits at node 0");
    // p3 of f enters at node 1, runs there, and is rescheduled into g: r3 crosses to
    // node 0 too. Then node 0's worker finishes y.
    assert_eq!(n1.distribute(&mut vec![resched(f, 3, g)]), Ok(1));
    let mut seen = Vec::new();
    work(&mut w1[0], g, &mut seen);
    n1.distribute(&mut Vec::new()).unwrap();
    w0[0].done(y).unwrap();
    for _ in 0..20 {
        n0.distribute(&mut Vec::new()).unwrap();
        n1.distribute(&mut Vec::new()).unwrap();
        n2.distribute(&mut Vec::new()).unwrap();
        work(&mut w0[0], g, &mut seen);
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(seen, [1, 3], "g's reschedules in the order they were made");
}

/// Flow `f` migrates from node 0 to node 1; `g` and `h` are node 1's. Node 0 has input of
/// `h` staged for node 1 when its worker reschedules p1 of `f` into `g` (r1): r1 goes out
/// behind that input, and the handover must wait for both to reach node 1, or r3 (from
/// p3 of `f`, held at node 1) runs first.
#[test]
fn a_reschedule_behind_staged_input_still_ends_the_handover_in_order() {
    let f = (0..).find(|&t| owner_of(t, 2) == 0).unwrap();
    let g = (0..)
        .find(|&t| owner_of(t, 2) == 1 && bucket_of(t) != bucket_of(f))
        .unwrap();
    let h = (0..)
        .find(|&t| owner_of(t, 2) == 1 && bucket_of(t) != bucket_of(f) && t != g)
        .unwrap();
    let ((mut n1, mut w1), (mut n0, mut w0)) = two_nodes(1, 32, 4, tag as fn(&Pkt) -> u64);
    n1.set_batching(1, 0);
    n0.set_batching(16, 16);
    let mut b = Vec::new();
    assert_eq!(n1.distribute(&mut vec![resched(f, 1, g)]), Ok(1));
    n0.distribute(&mut Vec::new()).unwrap();
    w0[0].recv_burst(&mut b, 8).unwrap();
    let mut p1 = b.pop().expect("p1 at node 0's worker");
    n0.migrate(bucket_of(f), 1).unwrap();
    n1.distribute(&mut Vec::new()).unwrap();
    assert_eq!(n1.distribute(&mut vec![resched(f, 3, g)]), Ok(1)); // held at node 1
                                                                   // A loaded call: 13 of h staged for node 1 (fewer than a batch), 3 of f back (its
                                                                   // bucket is draining out of node 0).
    let mut input: Vec<Pkt> = (0..13).map(|i| pkt(h, i)).collect();
    input.extend((100..103).map(|i| pkt(f, i)));
    assert_eq!(n0.distribute(&mut input), Ok(13));
    assert_eq!(n0.bridge_stats().sent, 0, "staged");
    p1.flow = g;
    p1.then = u64::MAX;
    w0[0].reschedule(p1).unwrap();
    let (mut seen, mut out) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        n0.distribute(&mut Vec::new()).unwrap();
        n1.distribute(&mut Vec::new()).unwrap();
        work(&mut w1[0], g, &mut seen);
        n1.collect(&mut out);
    }
    for _ in 0..20 {
        n1.distribute(&mut Vec::new()).unwrap();
        n0.distribute(&mut Vec::new()).unwrap();
        work(&mut w0[0], g, &mut seen);
        work(&mut w1[0], g, &mut seen);
        n0.collect(&mut out);
        n1.collect(&mut out);
        if seen.len() >= 2 && !n0.migrating() {
            break;
        }
    }
    assert!(!n0.migrating(), "handover ended");
    assert_eq!(seen, [1, 3], "g's reschedules in the order they were made");
}
