//! Property test: random schedules of distributor and worker operations (driven from one
//! thread) against a sequential model of the flow table; see `tests/support/dist_model.rs`.
#![cfg(all(not(loom), feature = "std"))]

use crate::support;

use proptest::prelude::*;
use support::dist_model::{run, Op};

fn op() -> impl Strategy<Value = Op> {
    let w = 0usize..5;
    prop_oneof![
        3 => proptest::collection::vec(any::<u8>(), 0..6).prop_map(Op::Distribute),
        3 => (w.clone(), 0usize..6).prop_map(|(w, n)| Op::Recv(w, n)),
        3 => w.clone().prop_map(Op::Done),
        1 => w.clone().prop_map(Op::Drop),
        1 => (w.clone(), any::<u8>()).prop_map(|(w, f)| Op::Resched(w, f)),
        3 => (w.clone(), 0usize..8, any::<u8>(), any::<u8>())
            .prop_map(|(w, k, kind, f)| Op::AnyOrder(w, k, kind, f)),
        1 => (w.clone(), 0usize..4).prop_map(|(w, k)| Op::Leave(w, k)),
        1 => w.clone().prop_map(Op::Rejoin),
        1 => Just(Op::Add),
        1 => w.prop_map(Op::Remove),
        1 => Just(Op::Collect),
        1 => (0usize..6, 0u32..4).prop_map(|(b, h)| Op::Batching(b, h)),
    ]
}

proptest! {
    #[test]
    fn distributor_matches_model(
        workers in 1usize..4,
        credit in 1usize..5,
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        if let Err(e) = run(workers, credit, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }
}
