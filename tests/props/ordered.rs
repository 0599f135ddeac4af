//! Property test: random schedules of an ordered distributor's and its workers' operations
//! (driven from one thread) against a sequential model of acceptance and release order;
//! see `tests/support/ordered_model.rs`.
#![cfg(all(not(loom), feature = "std"))]

use crate::support;

use proptest::prelude::*;
use support::ordered_model::{run, Op};

fn op() -> impl Strategy<Value = Op> {
    let w = 0usize..4;
    prop_oneof![
        4 => (0u8..16).prop_map(Op::Distribute),
        4 => (w.clone(), 0usize..6).prop_map(|(w, n)| Op::Recv(w, n)),
        3 => w.clone().prop_map(Op::Done),
        3 => (w.clone(), 0usize..6, 0u8..3).prop_map(|(w, k, kind)| Op::At(w, k, kind)),
        1 => w.clone().prop_map(Op::Drop),
        1 => w.clone().prop_map(Op::Resched),
        1 => (w.clone(), 0usize..4).prop_map(|(w, k)| Op::Leave(w, k)),
        1 => (w.clone(), 0usize..4).prop_map(|(w, k)| Op::LeaveThenWait(w, k)),
        1 => w.clone().prop_map(Op::Vanish),
        1 => w.prop_map(Op::Rejoin),
        2 => Just(Op::Collect),
        2 => (0u8..8).prop_map(Op::DistributeWait),
        2 => Just(Op::CollectWait),
        1 => Just(Op::Flush),
        1 => (0usize..6, 0u32..4).prop_map(|(b, h)| Op::Batching(b, h)),
    ]
}

proptest! {
    #[test]
    fn ordered_distributor_matches_model(
        workers in 1usize..4,
        credit in 1usize..17,
        window in 1usize..40,
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        if let Err(e) = run(workers, credit, window, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }
}
