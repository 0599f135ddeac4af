//! Property test: random schedules of pipeline and worker operations (driven from one
//! thread) against a sequential model; see `tests/support/pipeline_model.rs`.
#![cfg(all(not(loom), feature = "std"))]

use crate::support;

use flowline::distributor::StageType;
use proptest::prelude::*;
use support::pipeline_model::{run, Op};

fn op() -> impl Strategy<Value = Op> {
    let w = 0usize..4;
    prop_oneof![
        3 => proptest::collection::vec(any::<u8>(), 0..6).prop_map(Op::Distribute),
        4 => (w.clone(), 0usize..6).prop_map(|(w, n)| Op::Recv(w, n)),
        2 => w.clone().prop_map(Op::Done),
        1 => w.clone().prop_map(Op::Poison),
        1 => w.clone().prop_map(Op::Drop),
        3 => (w.clone(), any::<u8>()).prop_map(|(w, f)| Op::Forward(w, f)),
        3 => (w.clone(), 0usize..8, any::<u8>()).prop_map(|(w, k, f)| Op::ForwardAt(w, k, f)),
        1 => (w.clone(), 0usize..4).prop_map(|(w, k)| Op::Leave(w, k)),
        1 => w.prop_map(Op::Rejoin),
        1 => Just(Op::Collect),
        1 => (0usize..12).prop_map(Op::Limit),
        1 => (0usize..4, any::<u8>()).prop_map(|(w, m)| Op::Link(w, m)),
        1 => (0usize..4, 0u8..3).prop_map(|(s, p)| Op::Priority(s, p)),
    ]
}

fn stage() -> impl Strategy<Value = StageType> {
    prop_oneof![
        Just(StageType::Atomic),
        Just(StageType::Ordered),
        Just(StageType::Parallel)
    ]
}

proptest! {
    #[test]
    fn pipeline_matches_model(
        workers in 1usize..4,
        credit in 1usize..5,
        stages in proptest::collection::vec(stage(), 1..4),
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        if let Err(e) = run(workers, credit, &stages, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }
}
