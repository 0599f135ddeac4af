//! Property test: random sequences of handle create / add / drop and handle-less adds,
//! spread over several threads' handles, against a model total per shard.
#![cfg(not(loom))]

use std::sync::Arc;

use flowline::counter::{CounterGroup, ShardedCounter};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Take(usize),
    Add(usize, u32),
    Drop(usize),
    AddNoHandle(u32),
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..4).prop_map(Op::Take),
        (0usize..4, any::<u32>()).prop_map(|(i, n)| Op::Add(i, n)),
        (0usize..4).prop_map(Op::Drop),
        any::<u32>().prop_map(Op::AddNoHandle),
        Just(Op::Reset),
    ]
}

proptest! {
    #[test]
    fn sum_matches_model(shards in 1usize..4, ops in proptest::collection::vec(op(), 0..100)) {
        let c = Arc::new(ShardedCounter::new(shards));
        let g = Arc::new(CounterGroup::new(["a", "b"], shards));
        // Four "threads'" handle slots; a slot may be empty.
        let mut hs: Vec<Option<_>> = (0..4).map(|_| None).collect();
        let mut ghs: Vec<Option<_>> = (0..4).map(|_| None).collect();
        let mut total = 0u64;
        let mut gtotal = [0u64; 2];
        let mut live = 0usize;
        for op in ops {
            match op {
                Op::Take(i) => {
                    if hs[i].is_none() {
                        let h = c.try_handle();
                        prop_assert_eq!(h.is_ok(), live < shards);
                        let gh = g.try_handle();
                        prop_assert_eq!(gh.is_ok(), live < shards);
                        if let (Ok(h), Ok(gh)) = (h, gh) {
                            hs[i] = Some(h);
                            ghs[i] = Some(gh);
                            live += 1;
                        }
                    }
                }
                Op::Add(i, n) => {
                    if let (Some(h), Some(gh)) = (hs[i].as_mut(), ghs[i].as_mut()) {
                        h.add(u64::from(n));
                        gh.add_all([1, u64::from(n)]);
                        total += u64::from(n);
                        gtotal[0] += 1;
                        gtotal[1] += u64::from(n);
                    }
                }
                Op::Drop(i) => {
                    if hs[i].take().is_some() {
                        ghs[i] = None;
                        live -= 1;
                    }
                }
                Op::AddNoHandle(n) => {
                    c.add(u64::from(n));
                    total += u64::from(n);
                }
                Op::Reset => {
                    c.reset();
                    total = 0;
                }
            }
            prop_assert_eq!(c.sum(), total);
            prop_assert_eq!(*g.snapshot().values(), gtotal);
        }
    }
}
