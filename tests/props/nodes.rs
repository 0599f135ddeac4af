//! Property test: random schedules of the multi-node layout (`distributor::nodes`): inputs
//! at any node, distributes, worker receives, hand-backs, reschedules across nodes, drops,
//! collects, workers leaving and rejoining, flow buckets migrating between nodes, flushes,
//! a `tag` that panics, all
//! driven from one thread, checked against a model of the packets in the
//! layout; see `tests/support/nodes_model.rs`.
#![cfg(all(not(loom), feature = "std"))]

use crate::support;

use proptest::prelude::*;
use support::nodes_model::{run, Op};

fn op() -> impl Strategy<Value = Op> {
    let node = 0usize..3;
    let w = 0usize..2;
    prop_oneof![
        3 => (node.clone(), proptest::collection::vec(any::<u8>(), 0..6))
            .prop_map(|(n, f)| Op::Input(n, f)),
        4 => node.clone().prop_map(Op::Distribute),
        3 => (node.clone(), w.clone(), 0usize..5).prop_map(|(n, w, k)| Op::Recv(n, w, k)),
        3 => (node.clone(), w.clone(), 0usize..4).prop_map(|(n, w, k)| Op::Done(n, w, k)),
        1 => (node.clone(), w.clone(), any::<u8>()).prop_map(|(n, w, f)| Op::Resched(n, w, f)),
        1 => (node.clone(), w.clone()).prop_map(|(n, w)| Op::Drop(n, w)),
        2 => node.clone().prop_map(Op::Collect),
        1 => (node.clone(), w.clone()).prop_map(|(n, w)| Op::Leave(n, w)),
        1 => (node.clone(), w).prop_map(|(n, w)| Op::Rejoin(n, w)),
        1 => (node.clone(), any::<u8>(), node.clone()).prop_map(|(n, f, to)| Op::Migrate(n, f, to)),
        1 => node.clone().prop_map(Op::Flush),
        1 => (0u8..12).prop_map(Op::Panic),
        1 => (node, 0usize..5, 0u32..4).prop_map(|(n, b, h)| Op::Batching(n, b, h)),
    ]
}

/// Few flows, weighted towards reschedules and migrations: the reschedules a flow makes
/// into another before and after either flow's bucket moves.
fn resched_op() -> impl Strategy<Value = Op> {
    let node = 0usize..3;
    let w = 0usize..2;
    let flow = 0u8..4;
    prop_oneof![
        3 => (node.clone(), proptest::collection::vec(flow.clone(), 0..4))
            .prop_map(|(n, f)| Op::Input(n, f)),
        5 => node.clone().prop_map(Op::Distribute),
        3 => (node.clone(), w.clone(), 0usize..5).prop_map(|(n, w, k)| Op::Recv(n, w, k)),
        2 => (node.clone(), w.clone(), 0usize..4).prop_map(|(n, w, k)| Op::Done(n, w, k)),
        3 => (node.clone(), w.clone(), flow.clone()).prop_map(|(n, w, f)| Op::Resched(n, w, f)),
        1 => node.clone().prop_map(Op::Collect),
        3 => (node.clone(), flow, node).prop_map(|(n, f, to)| Op::Migrate(n, f, to)),
    ]
}

/// Loaded calls: inputs of up to 13 packets against batches of 2 to 7 (credit 6 to 14),
/// so that input for other nodes is staged across calls, pushed partly, given back, and
/// pushed before map adoptions, with reschedules and migrations among them.
fn staging_op() -> impl Strategy<Value = Op> {
    let node = 0usize..4;
    let w = 0usize..2;
    let flow = 0u8..8;
    prop_oneof![
        4 => (node.clone(), proptest::collection::vec(flow.clone(), 0..14))
            .prop_map(|(n, f)| Op::Input(n, f)),
        5 => node.clone().prop_map(Op::Distribute),
        3 => (node.clone(), w.clone(), 0usize..8).prop_map(|(n, w, k)| Op::Recv(n, w, k)),
        3 => (node.clone(), w.clone(), 0usize..8).prop_map(|(n, w, k)| Op::Done(n, w, k)),
        2 => (node.clone(), w.clone(), flow.clone()).prop_map(|(n, w, f)| Op::Resched(n, w, f)),
        1 => (node.clone(), w.clone()).prop_map(|(n, w)| Op::Drop(n, w)),
        1 => node.clone().prop_map(Op::Collect),
        2 => (node.clone(), flow, node.clone()).prop_map(|(n, f, to)| Op::Migrate(n, f, to)),
        1 => node.clone().prop_map(Op::Flush),
        1 => (node, 2usize..8, 0u32..4).prop_map(|(n, b, h)| Op::Batching(n, b, h)),
    ]
}

proptest! {
    #[test]
    fn staged_bridge_input_keeps_every_guarantee(
        nodes in 2usize..5,
        workers in 1usize..3,
        credit in 6usize..15,
        bridge in 2usize..9,
        ops in proptest::collection::vec(staging_op(), 0..120),
    ) {
        if let Err(e) = run(nodes, workers, credit, bridge, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }

    #[test]
    fn reschedules_keep_their_order_while_buckets_migrate(
        nodes in 2usize..4,
        workers in 1usize..3,
        credit in 1usize..4,
        bridge in 1usize..3,
        ops in proptest::collection::vec(resched_op(), 0..120),
    ) {
        if let Err(e) = run(nodes, workers, credit, bridge, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }

    #[test]
    fn nodes_match_model(
        nodes in 1usize..4,
        workers in 1usize..3,
        credit in 1usize..4,
        bridge in 1usize..5,
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        if let Err(e) = run(nodes, workers, credit, bridge, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }
}
