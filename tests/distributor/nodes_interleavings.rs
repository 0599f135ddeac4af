//! The multi-node layout when a worker acts in the middle of a node's call: a `tag` hook
//! runs worker code at a chosen packet (what another thread may do at any time), so each
//! interleaving is deterministic. Each test failed before its fix (found by an attacker
//! review of the handover release order).
#![cfg(all(not(loom), feature = "std"))]

use std::cell::RefCell;

use flowline::distributor::nodes::{self, bucket_of, owner_of, NodesConfig};
use flowline::distributor::NoWorkers;

use crate::support::nodes_layout::two_nodes_single_calls;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pkt {
    flow: u64,
    seq: u64,
}

fn pkt(flow: u64, seq: u64) -> Pkt {
    Pkt { flow, seq }
}

/// Worker code to run when `hook_tag` tags the packet with this seq.
type Hook = Option<(u64, Box<dyn FnOnce()>)>;

thread_local! {
    /// Run once when `hook_tag` tags the packet with this seq.
    static HOOK: RefCell<Hook> = const { RefCell::new(None) };
    /// Taggings of the hooked packet to let pass first.
    static SKIP: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn hook_tag(p: &Pkt) -> u64 {
    let f = HOOK.with(|h| {
        let mut h = h.borrow_mut();
        if h.as_ref().is_some_and(|(s, _)| *s == p.seq) {
            if SKIP.with(|k| k.get()) > 0 {
                SKIP.with(|k| k.set(k.get() - 1));
                return None;
            }
            h.take().map(|(_, f)| f)
        } else {
            None
        }
    });
    if let Some(f) = f {
        f();
    }
    p.flow
}

/// Released packets wait at the new owner for a stalled worker's credit: only their
/// flows' new input waits behind them; another flow's input goes to the idle worker
/// (invariant 5). (With a first version of the one release queue, any waiting released
/// packet sent all local input back to the caller.)
#[test]
fn a_released_packet_waiting_for_credit_delays_only_its_flow() {
    let g = (0..).find(|&t| owner_of(t, 3) == 1).unwrap();
    let h = (0..)
        .find(|&t| owner_of(t, 3) == 0 && bucket_of(t) != bucket_of(g))
        .unwrap();
    let cfg = NodesConfig::default()
        .nodes(3)
        .workers_per_node(2)
        .credit(1)
        .bridge(8);
    let mut layout = nodes::new(cfg, hook_tag as fn(&Pkt) -> u64).unwrap();
    for (n, _) in &mut layout {
        n.set_batching(1, 0); // these tests check single calls
    }
    let (mut n2, _w2) = layout.pop().unwrap();
    let (mut n1, mut w1) = layout.pop().unwrap();
    let (mut n0, mut w0) = layout.pop().unwrap();
    let mut b = Vec::new();
    n1.distribute(&mut vec![pkt(g, 0)]).unwrap();
    w1[0].recv_burst(&mut b, 1).unwrap();
    let y = b.pop().unwrap();
    n1.migrate(bucket_of(g), 0).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    n2.distribute(&mut Vec::new()).unwrap();
    assert_eq!(n2.owner(g), 0);
    // Two packets of g enter at node 2, cross to node 0, held there.
    assert_eq!(n2.distribute(&mut vec![pkt(g, 1), pkt(g, 2)]), Ok(2));
    n0.distribute(&mut Vec::new()).unwrap();
    assert_eq!(n0.held(), 2);
    // Handover ends.
    w1[0].done(y).unwrap();
    for _ in 0..10 {
        n1.distribute(&mut Vec::new()).unwrap();
        n2.distribute(&mut Vec::new()).unwrap();
        if !n1.migrating() {
            break;
        }
    }
    assert!(!n1.migrating());
    // Node 0 releases: g/1 goes to its worker 0 (which stalls: it never receives), g/2
    // waits for that worker's credit.
    n0.distribute(&mut Vec::new()).unwrap();
    // h is another of node 0's flows; worker 1 is idle with full credit.
    let mut accepted = 0;
    let mut input = vec![pkt(h, 10)];
    for _ in 0..10 {
        accepted += n0.distribute(&mut input).unwrap();
    }
    let mut got = Vec::new();
    w0[1].recv_burst(&mut got, 8).unwrap();
    assert_eq!(accepted, 1, "h must not wait behind g's released packet");
}

/// A reschedule into a bucket held here, read by the last poll of a call (the local-input
/// step), is queued with the bucket's held packets in that call. (It used to stay set
/// aside until the next call, and if the handover ended in between, a newer reschedule
/// into the same flow went first.)
#[test]
fn a_reschedule_read_by_a_calls_last_poll_is_not_overtaken_after_the_handover() {
    let g = (0..).find(|&t| owner_of(t, 2) == 0).unwrap();
    let u = (0..).find(|&t| owner_of(t, 2) == 1).unwrap();
    let ((mut n1, w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 8, 8, hook_tag as fn(&Pkt) -> u64);
    let w1 = std::rc::Rc::new(RefCell::new(w1));
    let mut b = Vec::new();
    // g's handover 0 -> 1 stays pending while node 0's worker holds y.
    n0.distribute(&mut vec![pkt(g, 0)]).unwrap();
    w0[0].recv_burst(&mut b, 1).unwrap();
    let y = b.pop().unwrap();
    n0.migrate(bucket_of(g), 1).unwrap();
    n1.distribute(&mut Vec::new()).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    // Node 1's worker gets a and c of flow u.
    n1.distribute(&mut vec![pkt(u, 1), pkt(u, 2)]).unwrap();
    let (mut a, mut c) = {
        let mut w = w1.borrow_mut();
        w[0].recv_burst(&mut b, 8).unwrap();
        (b.remove(0), b.remove(0))
    };
    // The worker reschedules a into g (r, seq 1) while node 1's call runs, after its
    // first poll (here: while it tags the input; with threads, any time in the call).
    let ww = w1.clone();
    HOOK.with(|h| {
        *h.borrow_mut() = Some((
            99,
            Box::new(move || {
                a.flow = g;
                ww.borrow_mut()[0].reschedule(a).unwrap();
            }),
        ))
    });
    n1.distribute(&mut vec![pkt(u, 99)]).unwrap();
    // The old owner finishes; node 1 is not called meanwhile.
    w0[0].done(y).unwrap();
    for _ in 0..5 {
        n0.distribute(&mut Vec::new()).unwrap();
    }
    assert!(!n0.migrating(), "handover ended");
    // The worker reschedules c into g (r2, seq 2), later than r.
    c.flow = g;
    w1.borrow_mut()[0].reschedule(c).unwrap();
    let mut seen = Vec::new();
    for _ in 0..5 {
        n1.distribute(&mut Vec::new()).unwrap();
        let mut w = w1.borrow_mut();
        w[0].recv_burst(&mut b, 8).unwrap();
        for p in b.drain(..) {
            if p.flow == g {
                seen.push(p.seq);
            }
            w[0].done(p).unwrap();
        }
    }
    assert_eq!(seen, [1, 2], "r was read before r2");
}

/// The last worker leaves between two steps of one call (here while the node tags a
/// packet). The first step placed p1 of g and left p2 (no credit); the second step's poll
/// reads the leave (p1 comes back into the backlog) and finds no worker. The caller must
/// get p1 before p2. (The backlog used to go back in front of the queue of the step that
/// found no worker, after the released queue holding p2.)
#[test]
fn the_last_worker_leaving_mid_call_gives_a_flows_packets_back_in_order() {
    let g = (0..).find(|&t| owner_of(t, 2) == 1).unwrap();
    let h = (0..).find(|&t| owner_of(t, 2) == 0).unwrap();
    let ((mut n1, mut w1), (mut n0, w0)) =
        two_nodes_single_calls(1, 1, 8, hook_tag as fn(&Pkt) -> u64);
    let w0 = std::rc::Rc::new(RefCell::new(w0));
    let mut b = Vec::new();
    n1.distribute(&mut vec![pkt(g, 0)]).unwrap();
    w1[0].recv_burst(&mut b, 1).unwrap();
    let y = b.pop().unwrap();
    n1.migrate(bucket_of(g), 0).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    // p1, p2 of g enter at node 0: held.
    assert_eq!(n0.distribute(&mut vec![pkt(g, 1), pkt(g, 2)]), Ok(2));
    w1[0].done(y).unwrap();
    for _ in 0..5 {
        n1.distribute(&mut Vec::new()).unwrap();
    }
    assert!(!n1.migrating());
    // A packet of node 0's flow h enters at node 1 and crosses (it makes node 0 poll
    // again in a second pump step).
    assert_eq!(n1.distribute(&mut vec![pkt(h, 3)]), Ok(1));
    // Node 0's call: releases p1, p2 into inbound[0]; p1 is placed, p2 waits; while the
    // node tags p2 there, its only worker leaves (having received nothing).
    let ww = w0.clone();
    SKIP.with(|k| k.set(1)); // release_held tags p2 first
    HOOK.with(|hk| {
        *hk.borrow_mut() = Some((
            2,
            Box::new(move || {
                let w = ww.borrow_mut().pop().unwrap();
                w.leave(Vec::new()).unwrap();
            }),
        ))
    });
    let mut back = Vec::new();
    assert_eq!(n0.distribute(&mut back), Err(NoWorkers));
    let order: Vec<(u64, u64)> = back.iter().map(|p| (p.flow, p.seq)).collect();
    assert!(HOOK.with(|hk| hk.borrow().is_none()), "hook fired");
    let pos = |s| order.iter().position(|&(_, q)| q == s).unwrap();
    assert!(pos(1) < pos(2), "p1 before p2 in the give-back: {order:?}");
}

/// A released packet g/2 (entered at node 0, waiting for credit) and a reschedule r into
/// g read after it: r must go after g/2 (invariant 4; `behind` holds it back in the normal
/// path). The last worker leaves mid-call; the give-back must keep g/1 (hand-back),
/// g/2, r.
#[test]
fn with_no_worker_left_a_reschedule_goes_back_behind_a_released_packet_of_its_flow() {
    let g = (0..).find(|&t| owner_of(t, 2) == 1).unwrap();
    let h = (0..)
        .find(|&t| owner_of(t, 2) == 0 && bucket_of(t) != bucket_of(g))
        .unwrap();
    let k = (h + 1..)
        .find(|&t| owner_of(t, 2) == 0 && bucket_of(t) != bucket_of(g))
        .unwrap();
    let ((mut n1, mut w1), (mut n0, w0)) =
        two_nodes_single_calls(1, 2, 8, hook_tag as fn(&Pkt) -> u64);
    let w0 = std::rc::Rc::new(RefCell::new(w0));
    let mut b = Vec::new();
    // Node 0's worker holds q (flow k).
    assert_eq!(n0.distribute(&mut vec![pkt(k, 50)]), Ok(1));
    w0.borrow_mut()[0].recv_burst(&mut b, 1).unwrap();
    let q = b.pop().unwrap();
    // g's handover 1 -> 0 pending while node 1's worker holds y.
    n1.distribute(&mut vec![pkt(g, 0)]).unwrap();
    w1[0].recv_burst(&mut b, 1).unwrap();
    let y = b.pop().unwrap();
    n1.migrate(bucket_of(g), 0).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    assert_eq!(n0.distribute(&mut vec![pkt(g, 1), pkt(g, 2)]), Ok(2));
    w1[0].done(y).unwrap();
    for _ in 0..5 {
        n1.distribute(&mut Vec::new()).unwrap();
    }
    assert!(!n1.migrating());
    // A packet of h crosses to node 0 (a second pump step there).
    assert_eq!(n1.distribute(&mut vec![pkt(h, 3)]), Ok(1));
    // Node 0: releases g/1, g/2; g/1 placed (credit 2: q and g/1), g/2 waits. While the
    // node tags g/2, the worker reschedules q into g and leaves.
    let ww = w0.clone();
    SKIP.with(|s| s.set(1)); // release_held tags g/2 first
    HOOK.with(|hk| {
        *hk.borrow_mut() = Some((
            2,
            Box::new(move || {
                let mut w = ww.borrow_mut().pop().unwrap();
                let mut r = q;
                r.flow = g;
                w.reschedule(r).unwrap();
                w.leave(Vec::new()).unwrap();
            }),
        ))
    });
    let mut back = Vec::new();
    assert_eq!(n0.distribute(&mut back), Err(NoWorkers));
    assert!(HOOK.with(|hk| hk.borrow().is_none()), "hook fired");
    let order: Vec<(u64, u64)> = back.iter().map(|p| (p.flow, p.seq)).collect();
    let pos = |s| order.iter().position(|&(_, q)| q == s).unwrap();
    // The caller re-feeds the give-back after a worker rejoins: the worker's order for g.
    let mut w = n0.rejoin(0).unwrap();
    let mut seen = Vec::new();
    for _ in 0..10 {
        let _ = n0.distribute(&mut back);
        let mut got = Vec::new();
        w.recv_burst(&mut got, 8).unwrap();
        for p in got {
            if p.flow == g {
                seen.push(p.seq);
            }
            w.done(p).unwrap();
        }
    }
    assert!(pos(1) < pos(2), "hand-back g/1 before g/2: {order:?}");
    assert!(pos(2) < pos(50), "g/2 waited before r was read: {order:?}");
    assert_eq!(seen, [1, 2, 50]);
}

/// A bridged packet h/3 waits at node 0 for credit; a reschedule r into h is read after
/// it (held back behind it in the normal path). The last worker leaves after the bridge
/// step: give-back order h/3, r.
#[test]
fn with_no_worker_left_a_reschedule_goes_back_behind_a_bridged_packet_of_its_flow() {
    let h = (0..).find(|&t| owner_of(t, 2) == 0).unwrap();
    let k = (h + 1..).find(|&t| owner_of(t, 2) == 0).unwrap();
    let ((mut n1, _w1), (mut n0, w0)) =
        two_nodes_single_calls(1, 1, 8, hook_tag as fn(&Pkt) -> u64);
    let w0 = std::rc::Rc::new(RefCell::new(w0));
    let mut b = Vec::new();
    assert_eq!(n0.distribute(&mut vec![pkt(k, 50)]), Ok(1));
    w0.borrow_mut()[0].recv_burst(&mut b, 1).unwrap();
    let q = b.pop().unwrap();
    assert_eq!(n1.distribute(&mut vec![pkt(h, 3)]), Ok(1));
    let ww = w0.clone();
    HOOK.with(|hk| {
        *hk.borrow_mut() = Some((
            3,
            Box::new(move || {
                let mut w = ww.borrow_mut().pop().unwrap();
                let mut r = q;
                r.flow = h;
                w.reschedule(r).unwrap();
                w.leave(Vec::new()).unwrap();
            }),
        ))
    });
    let mut back = Vec::new();
    assert_eq!(n0.distribute(&mut back), Err(NoWorkers));
    assert!(HOOK.with(|hk| hk.borrow().is_none()), "hook fired");
    let order: Vec<(u64, u64)> = back.iter().map(|p| (p.flow, p.seq)).collect();
    let pos = |s| order.iter().position(|&(_, q)| q == s).unwrap();
    assert!(pos(3) < pos(50), "h/3 arrived before r was read: {order:?}");
}

/// Docs of `distribute`'s NoWorkers: "reschedules and packets for other nodes still go
/// onto their bridges". A reschedule into node 1's flow u, read by a later step's poll
/// together with the leave, comes back to node 0's caller instead.
#[test]
fn with_no_worker_left_a_reschedule_for_another_node_still_goes_to_it() {
    let h = (0..).find(|&t| owner_of(t, 2) == 0).unwrap();
    let k = (h + 1..).find(|&t| owner_of(t, 2) == 0).unwrap();
    let u = (0..).find(|&t| owner_of(t, 2) == 1).unwrap();
    let ((mut n1, _w1), (mut n0, w0)) =
        two_nodes_single_calls(1, 1, 8, hook_tag as fn(&Pkt) -> u64);
    let w0 = std::rc::Rc::new(RefCell::new(w0));
    let mut b = Vec::new();
    assert_eq!(n0.distribute(&mut vec![pkt(k, 50)]), Ok(1));
    w0.borrow_mut()[0].recv_burst(&mut b, 1).unwrap();
    let q = b.pop().unwrap();
    assert_eq!(n1.distribute(&mut vec![pkt(h, 3)]), Ok(1));
    let ww = w0.clone();
    HOOK.with(|hk| {
        *hk.borrow_mut() = Some((
            3,
            Box::new(move || {
                let mut w = ww.borrow_mut().pop().unwrap();
                let mut r = q;
                r.flow = u;
                w.reschedule(r).unwrap();
                w.leave(Vec::new()).unwrap();
            }),
        ))
    });
    let mut back = Vec::new();
    let sent_before = n0.bridge_stats().sent;
    assert_eq!(n0.distribute(&mut back), Err(NoWorkers));
    let order: Vec<(u64, u64)> = back.iter().map(|p| (p.flow, p.seq)).collect();
    assert!(
        !order.contains(&(u, 50)),
        "a reschedule for node 1's flow came back to node 0's caller: {order:?}"
    );
    // It waits for node 1's bridge, and crosses with node 0's next call.
    let _ = n0.distribute(&mut Vec::new());
    assert_eq!(
        n0.bridge_stats().sent - sent_before,
        1,
        "r crossed to node 1"
    );
}
