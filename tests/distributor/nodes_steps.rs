//! The multi-node layout step by step, with workers driven by hand: a migration's
//! handover, full bridges, stalled and worker-less nodes, the layout-wide flush, panicking
//! tags, dropped nodes, and reschedules against released and bridged packets.
#![cfg(all(not(loom), feature = "std"))]

use std::time::Duration;

use flowline::distributor::nodes::{
    self, bucket_of, owner_of, MigrateError, NodesConfig, NodesError, BUCKETS,
};
use flowline::distributor::{FlushError, NoWorkers};

use super::nodes_threads::{tag, Pkt, WAIT};
use crate::support::nodes_layout::{two_nodes, two_nodes_single_calls};

/// A flow owned by node 0, its bucket, and one other flow of each owner.
fn migrating_flow() -> (u64, usize) {
    let f = (0..).find(|&f| owner_of(f, 2) == 0).unwrap();
    (f, bucket_of(f))
}

#[test]
fn a_migration_holds_the_flow_at_its_new_owner_until_the_old_one_is_done() {
    let (f, b) = migrating_flow();
    // Another flow of node 1 (not in the migrating bucket): it must keep moving.
    let g = (0..)
        .find(|&g| owner_of(g, 2) == 1 && bucket_of(g) != b)
        .unwrap();
    let ((mut n1, mut w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    let mut b0 = Vec::new();
    let mut b1 = Vec::new();
    // p0 of f enters at node 0 and reaches node 0's worker, which holds it (stalls).
    n0.distribute(&mut vec![pkt(f, 0)]).unwrap();
    w0[0].recv_burst(&mut b0, 8).unwrap();
    assert_eq!(b0, [pkt(f, 0)]);
    n0.migrate(b, 1).unwrap();
    assert_eq!(n0.migrate(b, 1), Err(MigrateError::Busy));
    assert!(n0.migrating() && n0.owner(f) == 1 && !n0.owns(f));
    // p1 of f enters at node 0 after the migration: it stays with node 0's caller until
    // the handover ends. p2 of f enters at node 1: node 1 holds it. Node 1's other flow
    // goes on.
    let mut input = vec![pkt(f, 1)];
    n0.distribute(&mut input).unwrap();
    assert_eq!(input, [pkt(f, 1)]);
    n1.distribute(&mut vec![pkt(f, 2)]).unwrap();
    for round in 0..5 {
        n1.distribute(&mut vec![pkt(g, round)]).unwrap();
        n0.distribute(&mut Vec::new()).unwrap();
        w1[0].recv_burst(&mut b1, 8).unwrap();
        assert!(b1.iter().all(|p| p.flow == g), "{b1:?}: f must wait");
        w1[0].done_burst(&mut b1).unwrap();
    }
    assert!(n0.migrating(), "node 0's worker still holds p0");
    let (mut out0, mut out1) = (Vec::new(), Vec::new());
    n1.distribute(&mut Vec::new()).unwrap();
    n1.collect(&mut out1);
    assert_eq!(out1.len(), 5);
    assert_eq!(n1.held(), 1, "p1 held at node 1");
    // Node 0's worker finishes p0: the handover ends, node 1 routes p2, and p1 (fed
    // again at node 0) goes to node 1 now.
    w0[0].done_burst(&mut b0).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    assert!(!n0.migrating());
    assert_eq!(n0.bridge_stats().migrations, 1);
    n0.distribute(&mut input).unwrap();
    assert!(input.is_empty());
    n1.distribute(&mut Vec::new()).unwrap();
    w1[0].recv_burst(&mut b1, 8).unwrap();
    // Entered at two nodes: each entry's order holds; how they interleave is open.
    b1.sort_by_key(|p| p.seq);
    assert_eq!(b1, [pkt(f, 1), pkt(f, 2)]);
    w1[0].done_burst(&mut b1).unwrap();
    n1.distribute(&mut Vec::new()).unwrap();
    n0.collect(&mut out0);
    n1.collect(&mut out1);
    assert_eq!(out0, [pkt(f, 0)]);
    assert_eq!(out1.iter().filter(|p| p.flow == f).count(), 2);
    assert_eq!(n1.bridge_stats().held, 1);
    assert!(n1.owns(f) && !n0.owns(f));
    // Node 1 owns the bucket now: it can send it back.
    n1.migrate(b, 0).unwrap();
}

#[test]
fn packets_already_on_the_old_owners_bridge_finish_there_first() {
    let (f, b) = migrating_flow();
    let ((mut n1, mut w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 8, 16, tag as fn(&Pkt) -> u64);
    // Entering at node 1, packets 0..4 of f cross to node 0's bridge by the old map.
    let mut input: Vec<Pkt> = (0..4).map(|s| pkt(f, s)).collect();
    n1.distribute(&mut input).unwrap();
    assert!(input.is_empty());
    n0.migrate(b, 1).unwrap();
    // Node 1 adopts the new map: packets 4..8 of f stay at node 1 (held).
    let mut input: Vec<Pkt> = (4..8).map(|s| pkt(f, s)).collect();
    n1.distribute(&mut input).unwrap();
    assert_eq!(n1.held(), 4);
    let mut seen = Vec::new();
    let mut b0 = Vec::new();
    let mut b1 = Vec::new();
    for _ in 0..20 {
        n0.distribute(&mut Vec::new()).unwrap();
        n1.distribute(&mut Vec::new()).unwrap();
        if w0[0].recv_burst(&mut b0, 2).unwrap() > 0 {
            seen.extend(b0.iter().map(|p| (0, p.seq)));
            w0[0].done_burst(&mut b0).unwrap();
        }
        if w1[0].recv_burst(&mut b1, 2).unwrap() > 0 {
            seen.extend(b1.iter().map(|p| (1, p.seq)));
            w1[0].done_burst(&mut b1).unwrap();
        }
    }
    assert_eq!(
        seen,
        (0..8).map(|s| (usize::from(s >= 4), s)).collect::<Vec<_>>(),
        "0..4 at node 0, then 4..8 at node 1"
    );
    assert!(!n0.migrating());
}

#[test]
fn bad_migrations_are_errors() {
    let (f, b) = migrating_flow();
    let ((mut n1, _w1), (mut n0, _w0)) = two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    assert_eq!(
        n0.migrate(BUCKETS, 1),
        Err(MigrateError::NoSuchBucket(BUCKETS))
    );
    assert_eq!(n0.migrate(b, 2), Err(MigrateError::NoSuchNode(2)));
    assert_eq!(n0.migrate(b, 0), Err(MigrateError::SameNode));
    assert_eq!(n1.migrate(b, 0), Err(MigrateError::NotOwner));
    assert!(n0.owns(f));
    // Every error says what to do.
    assert!(MigrateError::Busy.to_string().contains("migrating()"));
    assert!(MigrateError::NotOwner.to_string().contains("owner"));
    drop(n1);
    assert_eq!(n0.migrate(b, 1), Err(MigrateError::NodeGone));
}

#[test]
fn a_dropped_old_owner_ends_its_handover_so_the_new_owner_goes_on() {
    let (f, b) = migrating_flow();
    let ((mut n1, mut w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    n0.distribute(&mut vec![pkt(f, 0)]).unwrap();
    let mut b0 = Vec::new();
    w0[0].recv_burst(&mut b0, 8).unwrap(); // held by node 0's worker
    n0.migrate(b, 1).unwrap();
    n1.distribute(&mut vec![pkt(f, 1)]).unwrap();
    assert_eq!(n1.held(), 1);
    drop(n0);
    n1.distribute(&mut Vec::new()).unwrap();
    let mut b1 = Vec::new();
    w1[0].recv_burst(&mut b1, 8).unwrap();
    assert_eq!(b1, [pkt(f, 1)], "released once the old owner is gone");
}

/// A flow owned by node 1, and one owned by node 0.
fn flows_by_owner() -> (u64, u64) {
    let f1 = (0..).find(|&f| owner_of(f, 2) == 1).unwrap();
    let f0 = (0..).find(|&f| owner_of(f, 2) == 0).unwrap();
    (f0, f1)
}

fn pkt(flow: u64, seq: u64) -> Pkt {
    Pkt {
        flow,
        entry: 0,
        seq,
        then: u64::MAX,
        moved: false,
    }
}

#[test]
fn a_full_bridge_leaves_packets_with_the_caller_in_order() {
    let (f0, f1) = flows_by_owner();
    let ((mut n1, mut w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 4, 4, tag as fn(&Pkt) -> u64);
    // Node 1 does not run yet: its bridge takes 4 packets of flow f1, the rest stay.
    let mut burst: Vec<Pkt> = (0..10).map(|s| pkt(f1, s)).collect();
    burst.insert(3, pkt(f0, 100));
    assert_eq!(n0.distribute(&mut burst), Ok(5));
    assert_eq!(
        burst.iter().map(|p| p.seq).collect::<Vec<_>>(),
        [4, 5, 6, 7, 8, 9],
        "later packets of the blocked destination stay, in order"
    );
    assert_eq!(n0.bridge_stats().sent, 4);
    assert_eq!(n0.bridge_stats().bursts, 1);
    // Node 0's own flow went to its worker meanwhile.
    let mut b = Vec::new();
    w0[0].recv_burst(&mut b, 8).unwrap();
    assert_eq!(b, [pkt(f0, 100)]);
    w0[0].done_burst(&mut b).unwrap();
    // Node 1 now runs: it reads the bridge, its worker gets the first 4 in order.
    assert_eq!(n1.distribute(&mut Vec::new()), Ok(0));
    assert_eq!(n1.bridge_stats().received, 4);
    w1[0].recv_burst(&mut b, 8).unwrap();
    assert_eq!(b.iter().map(|p| p.seq).collect::<Vec<_>>(), [0, 1, 2, 3]);
    w1[0].done_burst(&mut b).unwrap();
    let mut out1 = Vec::new();
    assert_eq!(n1.collect(&mut out1), 4);
    // The retry moves the rest.
    assert_eq!(n0.distribute(&mut burst), Ok(4));
    assert_eq!(burst.len(), 2);
    let mut out0 = Vec::new();
    assert_eq!(n0.collect(&mut out0), 1);
}

#[test]
fn a_node_whose_workers_stall_delays_only_its_flows() {
    let (f0, f1) = flows_by_owner();
    let ((mut n1, mut w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 4, 8, tag as fn(&Pkt) -> u64);
    let mut out0 = Vec::new();
    let mut b = Vec::new();
    let mut waiting = Vec::new();
    for round in 0..50u64 {
        let mut burst = vec![pkt(f0, 2 * round), pkt(f1, round), pkt(f0, 2 * round + 1)];
        waiting.append(&mut burst);
        n0.distribute(&mut waiting).unwrap();
        // Node 1 runs too, but its worker (stalled) takes nothing.
        n1.distribute(&mut Vec::new()).unwrap();
        assert!(
            waiting.iter().all(|p| p.flow == f1),
            "only the stalled node's flow waits"
        );
        w0[0].recv_burst(&mut b, 8).unwrap();
        w0[0].done_burst(&mut b).unwrap();
        n0.collect(&mut out0);
    }
    assert_eq!(out0.len(), 100, "node 0's flow kept moving");
    // Node 1 holds its worker's credit (4) and the one packet it read next (it reads its
    // bridge again only once that is placed); the bridge holds 8; the rest stayed with
    // node 0's caller, in order.
    assert_eq!(n1.held(), 4 + 1);
    assert_eq!(waiting.len(), 50 - 5 - 8);
    assert!(waiting.windows(2).all(|w| w[0].seq < w[1].seq));
    // The worker wakes up: everything of f1 comes back at node 1, once, in order.
    let mut out1 = Vec::new();
    while out1.len() < 50 {
        n0.distribute(&mut waiting).unwrap();
        n1.distribute(&mut Vec::new()).unwrap();
        w1[0].recv_burst(&mut b, 8).unwrap();
        w1[0].done_burst(&mut b).unwrap();
        n1.collect(&mut out1);
    }
    assert_eq!(out1, (0..50).map(|s| pkt(f1, s)).collect::<Vec<_>>());
}

#[test]
fn a_node_without_workers_gives_its_flows_packets_back() {
    let (f0, f1) = flows_by_owner();
    let ((mut n1, mut w1), (mut n0, _w0)) = two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    w1.pop().unwrap().leave(Vec::new()).unwrap();
    // Node 0 sends two packets of f1 to node 1 over the bridge.
    let mut burst = vec![pkt(f1, 1), pkt(f1, 2)];
    assert_eq!(n0.distribute(&mut burst), Ok(2));
    // Node 1 has no worker: its own input for f1 and what came over the bridge come back;
    // a packet for node 0 still goes over.
    let mut mine = vec![pkt(f1, 3), pkt(f0, 4)];
    assert_eq!(n1.distribute(&mut mine), Err(NoWorkers));
    let mut seqs: Vec<u64> = mine.iter().map(|p| p.seq).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(n1.bridge_stats().sent, 1);
    assert_eq!(
        n1.flush(&mut Vec::new(), Duration::from_millis(10)),
        Err(FlushError::NoWorkers(Vec::new()))
    );
}

#[test]
fn a_flush_waits_for_the_other_nodes_and_times_out_without_loss() {
    let (_f0, f1) = flows_by_owner();
    let ((mut n1, mut w1), (mut n0, _w0)) = two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    n0.distribute(&mut vec![pkt(f1, 1)]).unwrap();
    // Node 0 holds nothing, but the packet has not come back anywhere: no flush ends.
    assert_eq!(n0.held(), 0);
    assert!(matches!(
        n0.flush(&mut Vec::new(), Duration::from_millis(5)),
        Err(FlushError::Timeout { in_flight: 0, .. })
    ));
    let t = std::thread::spawn(move || {
        let mut out = Vec::new();
        n1.distribute(&mut Vec::new()).unwrap();
        let mut b = Vec::new();
        w1[0].recv_burst(&mut b, 8).unwrap();
        w1[0].done_burst(&mut b).unwrap();
        n1.flush(&mut out, WAIT).unwrap();
        out
    });
    n0.flush(&mut Vec::new(), WAIT).unwrap();
    assert_eq!(t.join().unwrap(), [pkt(f1, 1)]);
}

#[test]
fn bad_layouts_are_errors() {
    let c = |nodes, bridge| {
        NodesConfig::default()
            .nodes(nodes)
            .workers_per_node(1)
            .credit(8)
            .bridge(bridge)
    };
    assert_eq!(nodes::new(c(0, 8), tag).err(), Some(NodesError::NoNodes));
    assert_eq!(
        nodes::new(c(nodes::MAX_NODES + 1, 8), tag).err(),
        Some(NodesError::TooManyNodes(nodes::MAX_NODES + 1))
    );
    assert!(matches!(
        nodes::new(c(2, 0), tag).err(),
        Some(NodesError::Bridge(_))
    ));
    assert!(NodesError::TooManyNodes(65)
        .to_string()
        .contains("at most 64"));
}

#[test]
fn ownership_is_spread_and_agrees_with_the_nodes() {
    let counts = (0..3000u64).fold([0usize; 3], |mut c, t| {
        c[owner_of(t, 3)] += 1;
        c
    });
    assert!(
        counts.iter().all(|&c| (800..1200).contains(&c)),
        "{counts:?}"
    );
    assert!((0..100).all(|t| owner_of(t, 1) == 0));
    let cfg = NodesConfig::default()
        .nodes(3)
        .workers_per_node(1)
        .credit(8)
        .bridge(8);
    let mut layout = nodes::new(cfg, tag as fn(&Pkt) -> u64).unwrap();
    for (n, _) in &mut layout {
        n.set_batching(1, 0);
    }
    for t in 0..300 {
        let owners: Vec<usize> = layout
            .iter()
            .filter(|(n, _)| n.owns(t))
            .map(|(n, _)| n.id())
            .collect();
        assert_eq!(owners, [owner_of(t, 3)], "tag {t}: exactly one owner");
    }
}

#[test]
fn a_reschedule_read_by_collect_goes_out_before_later_input() {
    let (f0, f1) = flows_by_owner();
    let ((mut n1, mut w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    n0.distribute(&mut vec![pkt(f0, 0)]).unwrap();
    let mut b = Vec::new();
    w0[0].recv_burst(&mut b, 8).unwrap();
    let mut p = b.pop().unwrap();
    p.flow = f1;
    w0[0].reschedule(p).unwrap();
    // Node 0 reads the reschedule here, then a later packet of f1 enters at node 0.
    n0.collect(&mut Vec::new());
    assert_eq!(n0.held(), 1);
    n0.distribute(&mut vec![pkt(f1, 1)]).unwrap();
    n1.distribute(&mut Vec::new()).unwrap();
    w1[0].recv_burst(&mut b, 8).unwrap();
    assert_eq!(
        b.iter().map(|p| p.seq).collect::<Vec<_>>(),
        [0, 1],
        "the rescheduled packet is the flow's next packet"
    );
}

#[test]
fn a_reschedule_for_a_dropped_node_goes_back_to_the_caller() {
    let (f0, f1) = flows_by_owner();
    let (ends1, (mut n0, mut w0)) = two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    drop(ends1);
    n0.distribute(&mut vec![pkt(f0, 0)]).unwrap();
    let mut b = Vec::new();
    w0[0].recv_burst(&mut b, 8).unwrap();
    let mut p = b.pop().unwrap();
    p.flow = f1;
    p.moved = true;
    w0[0].reschedule(p).unwrap();
    let mut burst = vec![pkt(f1, 1)];
    n0.distribute(&mut burst).unwrap();
    let mut p0 = pkt(f1, 0);
    p0.moved = true;
    assert_eq!(
        burst,
        [p0, pkt(f1, 1)],
        "both stay with the caller, the older first"
    );
    // Nothing is in flight any more: the flush ends.
    n0.flush(&mut Vec::new(), WAIT).unwrap();
    assert_eq!(n0.held(), 0);
}

thread_local! {
    /// `panicky_tag` panics when this reaches 0 (then disarms); `u64::MAX`: never.
    static COUNTDOWN: std::cell::Cell<u64> = const { std::cell::Cell::new(u64::MAX) };
}

fn panicky_tag(p: &Pkt) -> u64 {
    COUNTDOWN.with(|c| match c.get() {
        u64::MAX => {}
        0 => {
            c.set(u64::MAX);
            panic!("tag panics (test)");
        }
        k => c.set(k - 1),
    });
    p.flow
}

/// A `tag` that panics at its k-th call, for every k through a run of two nodes with tiny
/// bridges and credits and cross-node reschedules, both nodes and both workers driven by
/// this thread: whatever call panics, every packet still comes back exactly once.
#[test]
fn a_panicking_tag_loses_no_packet_wherever_it_panics() {
    panicking_tag_run(false);
}

/// The same with each node migrating the bucket of one of its flows to the other at the
/// start: wherever the tag panics (in the handover's own steps too), no packet is lost or
/// duplicated and both handovers end.
#[test]
fn a_panicking_tag_during_migrations_loses_nothing_and_the_handovers_end() {
    panicking_tag_run(true);
}

fn panicking_tag_run(migrate: bool) {
    let (f0, f1) = flows_by_owner();
    let f0b = (f0 + 1..).find(|&f| owner_of(f, 2) == 0).unwrap();
    let f1b = (f1 + 1..).find(|&f| owner_of(f, 2) == 1).unwrap();
    let flows = [f0, f1, f0b, f1b];
    let mut panicked_somewhere = 0;
    let step = if cfg!(miri) { 60 } else { 1 };
    for k in (0..120u64).step_by(step) {
        let (ends1, ends0) = two_nodes(1, 2, 2, panicky_tag as fn(&Pkt) -> u64);
        let mut ends = vec![ends0, ends1];
        // 12 packets entering at each node; every third is rescheduled to a flow of the
        // other owner by the worker that gets it.
        let mut input: Vec<Vec<Pkt>> = (0..2)
            .map(|entry| {
                (0..12u64)
                    .map(|seq| {
                        let flow = flows[(seq as usize + entry) % 4];
                        let then = if seq % 3 == 0 {
                            flows[(seq as usize + entry + 1) % 4]
                        } else {
                            u64::MAX
                        };
                        Pkt {
                            flow,
                            entry,
                            seq,
                            then,
                            moved: false,
                        }
                    })
                    .collect()
            })
            .collect();
        let mut back = Vec::new();
        COUNTDOWN.with(|c| c.set(k));
        let mut rounds = 0;
        let mut to_migrate = if migrate { [f0, f1] } else { [u64::MAX; 2] };
        while back.len() < 24 || ends.iter().any(|(node, _)| node.migrating()) {
            rounds += 1;
            assert!(rounds < 10_000, "k = {k}: stuck with {} back", back.len());
            for (n, (node, ws)) in ends.iter_mut().enumerate() {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    if to_migrate[n] != u64::MAX {
                        match node.migrate(bucket_of(to_migrate[n]), 1 - n) {
                            // Busy: started by a call whose end the tag cut short.
                            Ok(()) | Err(MigrateError::Busy) => to_migrate[n] = u64::MAX,
                            Err(e) => panic!("k = {k}: migrate: {e}"),
                        }
                    }
                    node.distribute(&mut input[n]).unwrap();
                    let mut b = Vec::new();
                    if ws[0].recv_burst(&mut b, 8).unwrap() > 0 {
                        for mut p in b {
                            if p.then != u64::MAX {
                                p.flow = p.then;
                                p.then = u64::MAX;
                                p.moved = true;
                                ws[0].reschedule(p).unwrap();
                            } else {
                                ws[0].done(p).unwrap();
                            }
                        }
                    }
                    node.collect(&mut back);
                }));
                if r.is_err() {
                    panicked_somewhere += 1;
                }
            }
        }
        COUNTDOWN.with(|c| c.set(u64::MAX));
        let mut ids: Vec<(usize, u64)> = back.iter().map(|p| (p.entry, p.seq)).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 24, "k = {k}: every packet back once");
        assert_eq!(back.len(), 24, "k = {k}: none twice");
        for (node, _) in &ends {
            assert_eq!(node.held(), 0, "k = {k}");
            if migrate {
                assert!(!node.migrating(), "k = {k}");
                assert_eq!(node.bridge_stats().migrations, 1, "k = {k}");
            }
        }
    }
    assert!(
        panicked_somewhere > 60 / step,
        "the tag panicked in most runs"
    );
}

#[test]
fn a_flush_never_swallows_a_reschedule_for_a_dropped_node() {
    let (f0, f1) = flows_by_owner();
    let (ends1, (mut n0, mut w0)) = two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    drop(ends1);
    n0.distribute(&mut vec![pkt(f0, 0)]).unwrap();
    let mut b = Vec::new();
    w0[0].recv_burst(&mut b, 8).unwrap();
    let mut p = b.pop().unwrap();
    p.flow = f1;
    p.moved = true;
    w0[0].reschedule(p).unwrap();
    // The flush reads the reschedule, cannot deliver it and keeps it: not idle.
    assert!(matches!(
        n0.flush(&mut Vec::new(), Duration::from_millis(20)),
        Err(FlushError::Timeout { in_flight: 1, .. })
    ));
    assert_eq!(n0.held(), 1);
    // The next distribute hands it to the caller; then the flush ends.
    let mut v = Vec::new();
    n0.distribute(&mut v).unwrap();
    assert_eq!(v, [p]);
    n0.flush(&mut Vec::new(), WAIT).unwrap();
}

#[test]
fn no_workers_gives_a_flows_backlog_back_before_its_later_input() {
    let (f0, _f1) = flows_by_owner();
    let ((mut n1, _w1), (mut n0, mut w0)) = two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    n0.distribute(&mut vec![pkt(f0, 1)]).unwrap();
    // A packet of node 0's flow enters at node 1 and crosses.
    let mut x = pkt(f0, 100);
    x.entry = 1;
    n1.distribute(&mut vec![x]).unwrap();
    // Node 0's only worker leaves without receiving: packet 1 goes to the backlog.
    w0.pop().unwrap().leave(Vec::new()).unwrap();
    let mut burst = vec![pkt(f0, 2)];
    assert_eq!(n0.distribute(&mut burst), Err(NoWorkers));
    let order: Vec<(usize, u64)> = burst.iter().map(|p| (p.entry, p.seq)).collect();
    let pos = |k| order.iter().position(|&e| e == k).unwrap();
    assert_eq!(order.len(), 3);
    assert!(
        pos((0, 1)) < pos((0, 2)),
        "the older packet first: {order:?}"
    );
}

#[test]
fn a_reschedule_read_with_no_worker_left_still_goes_first() {
    let (f0, f1) = flows_by_owner();
    let ((mut n1, mut w1), (mut n0, mut w0)) =
        two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    n0.distribute(&mut vec![pkt(f0, 0)]).unwrap();
    let mut w = w0.pop().unwrap();
    let mut b = Vec::new();
    w.recv_burst(&mut b, 8).unwrap();
    let mut p = b.pop().unwrap();
    p.flow = f1;
    p.moved = true;
    w.reschedule(p).unwrap();
    w.leave(Vec::new()).unwrap();
    // Node 0 has no worker now; the reschedule and the later packet of f1 both cross.
    let mut burst = vec![pkt(f1, 1)];
    assert_eq!(n0.distribute(&mut burst), Err(NoWorkers));
    assert!(burst.is_empty());
    n1.distribute(&mut Vec::new()).unwrap();
    w1[0].recv_burst(&mut b, 8).unwrap();
    assert_eq!(b, [p, pkt(f1, 1)]);
}

#[test]
fn a_dropped_node_counts_what_it_held_so_the_others_can_flush() {
    let (f0, _f1) = flows_by_owner();
    let ((mut n1, _w1), (mut n0, mut w0)) = two_nodes_single_calls(1, 8, 8, tag as fn(&Pkt) -> u64);
    n0.distribute(&mut (0..4).map(|s| pkt(f0, s)).collect())
        .unwrap();
    let mut w = w0.pop().unwrap();
    let mut b = Vec::new();
    w.recv_burst(&mut b, 3).unwrap();
    w.drop_packet(b.remove(0)).unwrap();
    // Leaves with one unprocessed; one it held is lost, one it never received.
    b.pop();
    w.leave(b).unwrap();
    n0.collect(&mut Vec::new());
    drop(n0);
    n1.flush(&mut Vec::new(), Duration::from_secs(5)).unwrap();
}

/// A reschedule into a flow that has just migrated to this node must not overtake an
/// older reschedule into the same flow that waits here for credit. Flow `f` (node 1) is
/// rescheduled into `g` twice, from packets p1 then p2 that both entered at node 1; the
/// first reschedule is held at node 1 while `g` migrates there from node 0, and released
/// when every worker at node 1 is busy; the second is read after that. `g` must see the
/// first one first.
#[test]
fn a_reschedule_does_not_overtake_an_older_one_released_by_a_handover() {
    let f = (0..).find(|&t| owner_of(t, 2) == 1).unwrap();
    let g = (0..)
        .find(|&t| owner_of(t, 2) == 0 && bucket_of(t) != bucket_of(f))
        .unwrap();
    let z = (0..)
        .find(|&t| owner_of(t, 2) == 1 && t != f && bucket_of(t) != bucket_of(g))
        .unwrap();
    let ((mut n1, mut w1), (mut n0, mut w0)) = two_nodes(2, 1, 8, tag as fn(&Pkt) -> u64);
    let mut b = Vec::new();
    // Node 0's worker holds a packet of g, so g's handover to node 1 stays pending.
    n0.distribute(&mut vec![pkt(g, 0)]).unwrap();
    w0[0].recv_burst(&mut b, 1).unwrap();
    let y = b.pop().unwrap();
    n0.migrate(bucket_of(g), 1).unwrap();
    n1.distribute(&mut Vec::new()).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    // p1 of f runs at node 1 and is rescheduled into g: node 1 holds it (g migrating in).
    n1.distribute(&mut vec![pkt(f, 1)]).unwrap();
    w1[0].recv_burst(&mut b, 1).unwrap();
    let mut p1 = b.pop().expect("p1 at node 1's first worker");
    p1.flow = g;
    w1[0].reschedule(p1).unwrap();
    // Both of node 1's workers get busy: one with a packet of z, one with p2 of f.
    n1.distribute(&mut vec![pkt(z, 0), pkt(f, 2)]).unwrap();
    w1[0].recv_burst(&mut b, 1).unwrap();
    let zp = b.pop().expect("z at the first worker");
    w1[1].recv_burst(&mut b, 1).unwrap();
    let mut p2 = b.pop().expect("p2 at the second worker");
    assert_eq!((zp.flow, p2.seq), (z, 2));
    // The handover ends: p1's reschedule is released, but no worker has credit.
    w0[0].done(y).unwrap();
    for _ in 0..20 {
        n0.distribute(&mut Vec::new()).unwrap();
        n1.distribute(&mut Vec::new()).unwrap();
        if !n0.migrating() && n1.held() == 0 {
            break;
        }
    }
    assert!(!n0.migrating(), "handover ended");
    // p2 is rescheduled into g after that, and the first worker gets its credit back.
    p2.flow = g;
    w1[1].reschedule(p2).unwrap();
    w1[0].done(zp).unwrap();
    let mut seen = Vec::new();
    for _ in 0..20 {
        n1.distribute(&mut Vec::new()).unwrap();
        for w in w1.iter_mut() {
            w.recv_burst(&mut b, 8).unwrap();
            for p in b.drain(..) {
                if p.flow == g {
                    seen.push(p.seq);
                }
                w.done(p).unwrap();
            }
        }
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(seen, [1, 2], "g's reschedules in the order they were made");
}

/// Three nodes: flow `g` (node 1's) migrates to node 0, whose workers reschedule into it
/// while node 2 sends it packets. Node 0 holds both kinds until node 1 is done with `g`,
/// and must release them in the order it read them: p of `g`, read from node 2's bridge
/// first, then the reschedule r its worker made after, then q of `g`, read from node 2
/// after r. (Released per source, node 0's own reschedules went before every other
/// source's packets.)
#[test]
fn packets_held_for_a_handover_are_released_in_the_order_they_were_read_across_sources() {
    let g = (0..).find(|&t| owner_of(t, 3) == 1).unwrap();
    let f = (0..).find(|&t| owner_of(t, 3) == 0).unwrap();
    let cfg = NodesConfig::default()
        .nodes(3)
        .workers_per_node(1)
        .credit(8)
        .bridge(8);
    let mut layout = nodes::new(cfg, tag as fn(&Pkt) -> u64).unwrap();
    for (n, _) in &mut layout {
        n.set_batching(1, 0); // this test checks single calls
    }
    let (mut n2, _w2) = layout.pop().unwrap();
    let (mut n1, mut w1) = layout.pop().unwrap();
    let (mut n0, mut w0) = layout.pop().unwrap();
    let mut b = Vec::new();
    // Node 1's worker holds a packet of g, so g's handover to node 0 stays pending.
    n1.distribute(&mut vec![pkt(g, 0)]).unwrap();
    w1[0].recv_burst(&mut b, 1).unwrap();
    let y = b.pop().unwrap();
    n1.migrate(bucket_of(g), 0).unwrap();
    for n in [&mut n0, &mut n2] {
        n.distribute(&mut Vec::new()).unwrap();
    }
    assert_eq!(n2.owner(g), 0, "node 2 routes g to node 0 now");
    // p of g enters at node 2 and crosses to node 0, which holds it.
    assert_eq!(n2.distribute(&mut vec![pkt(g, 1)]), Ok(1));
    n0.distribute(&mut Vec::new()).unwrap();
    assert_eq!(n0.held(), 1, "p held at node 0");
    // A packet of f runs at node 0 and is rescheduled into g: held after p.
    n0.distribute(&mut vec![pkt(f, 2)]).unwrap();
    w0[0].recv_burst(&mut b, 1).unwrap();
    let mut r = b.pop().expect("f's packet at node 0's worker");
    r.flow = g;
    w0[0].reschedule(r).unwrap();
    n0.distribute(&mut Vec::new()).unwrap();
    // q of g, read by node 0 after the reschedule.
    assert_eq!(n2.distribute(&mut vec![pkt(g, 3)]), Ok(1));
    n0.distribute(&mut Vec::new()).unwrap();
    assert_eq!(n0.held(), 3, "p, r and q held at node 0");
    // The handover ends.
    w1[0].done(y).unwrap();
    let mut seen = Vec::new();
    for _ in 0..20 {
        n1.distribute(&mut Vec::new()).unwrap();
        n2.distribute(&mut Vec::new()).unwrap();
        n0.distribute(&mut Vec::new()).unwrap();
        w0[0].recv_burst(&mut b, 8).unwrap();
        for p in b.drain(..) {
            seen.push(p.seq);
            w0[0].done(p).unwrap();
        }
        if seen.len() == 3 {
            break;
        }
    }
    assert!(!n1.migrating(), "handover ended");
    assert_eq!(seen, [1, 2, 3], "g's packets in the order node 0 read them");
}

/// The other side of the rule above: a reschedule read before a packet of its flow
/// arrives over a bridge goes first, even when it had to wait for credit and that packet
/// waits in the node too. Flow `t` (node 1) is at node 1's first worker, which has no
/// credit left; the second worker reschedules a packet into `t` (r); then p of `t`
/// enters at node 0 and crosses the bridge. Once the first worker finishes, `t` must get
/// r before p.
#[test]
fn a_reschedule_read_before_a_bridged_packet_of_its_flow_goes_first() {
    let t = (0..).find(|&f| owner_of(f, 2) == 1).unwrap();
    let u = (0..).find(|&f| owner_of(f, 2) == 1 && f != t).unwrap();
    let ((mut n1, mut w1), (mut n0, _w0)) = two_nodes(2, 1, 8, tag as fn(&Pkt) -> u64);
    let mut b = Vec::new();
    n1.distribute(&mut vec![pkt(t, 0)]).unwrap();
    n1.distribute(&mut vec![pkt(u, 0)]).unwrap();
    w1[0].recv_burst(&mut b, 1).unwrap();
    let x = b.pop().expect("t's first packet at the first worker");
    assert_eq!(x.flow, t);
    w1[1].recv_burst(&mut b, 1).unwrap();
    let mut r = b.pop().expect("u at the second worker");
    r.flow = t;
    r.seq = 1;
    w1[1].reschedule(r).unwrap();
    // Node 1 reads r (no credit for t), then p arrives over the bridge (no credit either).
    n1.distribute(&mut Vec::new()).unwrap();
    n0.distribute(&mut vec![pkt(t, 2)]).unwrap();
    n1.distribute(&mut Vec::new()).unwrap();
    assert_eq!(n1.bridge_stats().received, 1, "p waits at node 1");
    w1[0].done(x).unwrap();
    let mut seen = Vec::new();
    for _ in 0..10 {
        n1.distribute(&mut Vec::new()).unwrap();
        for w in w1.iter_mut() {
            w.recv_burst(&mut b, 8).unwrap();
            for p in b.drain(..) {
                seen.push(p.seq);
                w.done(p).unwrap();
            }
        }
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(seen, [1, 2], "r was read before p arrived");
}

/// A light call (less than a batch of input) places new flows on the least loaded worker,
/// one by one, as without batching.
#[test]
fn a_light_call_spreads_new_flows_over_the_workers() {
    let cfg = NodesConfig::default()
        .nodes(1)
        .workers_per_node(2)
        .credit(64)
        .bridge(8);
    let mut layout = nodes::new(cfg, |p: &u64| *p).unwrap();
    let (mut node, mut ws) = layout.pop().unwrap();
    node.distribute(&mut (0..20).collect()).unwrap();
    let got: Vec<usize> = ws
        .iter_mut()
        .map(|w| {
            let mut b = Vec::new();
            w.recv_burst(&mut b, 64).unwrap();
            b.len()
        })
        .collect();
    assert!(got[0].abs_diff(got[1]) <= 1, "per worker: {got:?}");
}

/// Input staged for a bridge is held by the node: `held` counts it.
#[test]
fn held_counts_input_staged_for_a_bridge() {
    let ((_n1, _w1), (mut n0, _w0)) = two_nodes(1, 32, 64, tag as fn(&Pkt) -> u64);
    n0.set_batching(16, 16);
    let (f0, f1) = flows_by_owner();
    let mut input: Vec<Pkt> = (0..15).map(|i| pkt(f1, i)).collect();
    input.push(pkt(f0, 0));
    assert_eq!(n0.distribute(&mut input), Ok(16));
    assert_eq!(n0.bridge_stats().sent, 0, "staged for node 1");
    assert_eq!(
        n0.held(),
        16,
        "1 at the local worker, 15 waiting for the bridge"
    );
}

/// A hold of 0 publishes a bridge's batch at the end of the call that staged it, as a
/// lane's.
#[test]
fn hold_zero_publishes_a_bridge_batch_at_the_end_of_the_call() {
    let ((_n1, _w1), (mut n0, mut w0)) = two_nodes(1, 32, 64, tag as fn(&Pkt) -> u64);
    n0.set_batching(16, 0);
    let (f0, f1) = flows_by_owner();
    let mut input: Vec<Pkt> = (0..15).map(|i| pkt(f1, i)).collect();
    input.push(pkt(f0, 0));
    assert_eq!(n0.distribute(&mut input), Ok(16));
    let mut b = Vec::new();
    assert_eq!(
        w0[0].recv_burst(&mut b, 64),
        Ok(1),
        "the lane's batch went out"
    );
    assert_eq!(n0.bridge_stats().sent, 15, "and the bridge's");
}
