//! Property test: random sequences of every `niche` ring operation against a `VecDeque`
//! model, with boxed items that count their drops (exactly-once drop of everything,
//! leftovers included), and the `Copy` slice forms with non-zero integers. The model is
//! exact: an index-free ring has no lazy publication, so a push fits exactly when the model
//! holds fewer than `capacity` items and a pop finds exactly what the model holds.
#![cfg(not(loom))]

use std::cell::Cell;
use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::rc::Rc;

use flowline::fifo::niche;
use proptest::prelude::*;

#[derive(Debug)]
struct Item {
    id: u64,
    drops: Rc<Cell<u64>>,
}
impl Drop for Item {
    fn drop(&mut self) {
        self.drops.set(self.drops.get() + 1);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Push,
    PushBurstIter(usize),
    PushBulkIter(usize),
    Pop,
    PopBurstInto(usize),
    PopBulkInto(usize),
    PopBurstWith(usize),
    Check,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Push),
        (0usize..10).prop_map(Op::PushBurstIter),
        (0usize..10).prop_map(Op::PushBulkIter),
        Just(Op::Pop),
        (0usize..10).prop_map(Op::PopBurstInto),
        (0usize..10).prop_map(Op::PopBulkInto),
        (0usize..10).prop_map(Op::PopBurstWith),
        Just(Op::Check),
    ]
}

#[derive(Clone, Debug)]
enum SliceOp {
    Push,
    PushBurst(usize),
    PushBulk(usize),
    Pop,
    PopBurst(usize),
    PopBulk(usize),
}

fn slice_op() -> impl Strategy<Value = SliceOp> {
    prop_oneof![
        Just(SliceOp::Push),
        (0usize..10).prop_map(SliceOp::PushBurst),
        (0usize..10).prop_map(SliceOp::PushBulk),
        Just(SliceOp::Pop),
        (0usize..10).prop_map(SliceOp::PopBurst),
        (0usize..10).prop_map(SliceOp::PopBulk),
    ]
}

proptest! {
    #[test]
    fn owned_items_match_vecdeque_model(
        cap in 1usize..9,
        ops in proptest::collection::vec(op(), 0..150),
    ) {
        let drops = Rc::new(Cell::new(0u64));
        let (mut tx, mut rx) = niche::channel::<Box<Item>>(cap).unwrap();
        let cap = tx.capacity();
        let mut model: VecDeque<u64> = VecDeque::new();
        let mut next = 0u64;
        let mut created = 0u64;
        let mk = |next: u64, n: usize| -> Vec<Box<Item>> {
            (0..n).map(|i| Box::new(Item { id: next + i as u64, drops: drops.clone() })).collect()
        };
        for op in ops {
            match op {
                Op::Push => {
                    let it = mk(next, 1).pop().unwrap();
                    created += 1;
                    let r = tx.push(it);
                    prop_assert_eq!(r.is_ok(), model.len() < cap);
                    if r.is_ok() { model.push_back(next); next += 1; }
                }
                Op::PushBurstIter(n) => {
                    let items = mk(next, n);
                    created += n as u64;
                    let mut it = items.into_iter();
                    let k = tx.push_burst_iter(&mut it);
                    prop_assert_eq!(k, n.min(cap - model.len()));
                    prop_assert_eq!(it.len(), n - k);
                    for _ in 0..k { model.push_back(next); next += 1; }
                }
                Op::PushBulkIter(n) => {
                    let items = mk(next, n);
                    created += n as u64;
                    let r = tx.push_bulk_iter(items);
                    prop_assert_eq!(r.is_ok(), n <= cap - model.len());
                    if let Err(back) = r {
                        prop_assert_eq!(back.len(), n, "a refused bulk gives every item back");
                    } else {
                        for _ in 0..n { model.push_back(next); next += 1; }
                    }
                }
                Op::Pop => {
                    prop_assert_eq!(rx.pop().map(|i| i.id), model.pop_front());
                }
                Op::PopBurstInto(n) => {
                    let mut v = Vec::new();
                    let k = rx.pop_burst_into(&mut v, n);
                    prop_assert_eq!(k, n.min(model.len()));
                    for it in v { prop_assert_eq!(Some(it.id), model.pop_front()); }
                }
                Op::PopBulkInto(n) => {
                    let mut v = Vec::new();
                    let ok = rx.pop_bulk_into(&mut v, n);
                    prop_assert_eq!(ok, n <= model.len());
                    prop_assert_eq!(v.len(), if ok { n } else { 0 });
                    for it in v { prop_assert_eq!(Some(it.id), model.pop_front()); }
                }
                Op::PopBurstWith(n) => {
                    let mut ids = Vec::new();
                    let k = rx.pop_burst_with(n, |it| ids.push(it.id));
                    prop_assert_eq!(k, n.min(model.len()));
                    let want: Vec<u64> = model.drain(..k).collect();
                    prop_assert_eq!(ids, want);
                }
                Op::Check => {}
            }
            prop_assert_eq!(rx.is_empty(), model.is_empty());
            prop_assert_eq!(tx.is_full(), model.len() == cap);
            prop_assert_eq!(drops.get() + model.len() as u64, created);
        }
        drop(tx);
        prop_assert!(rx.is_abandoned());
        drop(rx);
        prop_assert_eq!(drops.get(), created, "every item dropped exactly once");
    }

    #[test]
    fn slice_forms_match_vecdeque_model(
        cap in 1usize..9,
        ops in proptest::collection::vec(slice_op(), 0..150),
    ) {
        let (mut tx, mut rx) = niche::channel::<NonZeroU32>(cap).unwrap();
        let cap = tx.capacity();
        let mut model: VecDeque<u32> = VecDeque::new();
        let mut next = 1u32;
        let mk = |next: u32, n: usize| -> Vec<NonZeroU32> {
            (0..n as u32).map(|i| NonZeroU32::new(next + i).unwrap()).collect()
        };
        for op in ops {
            match op {
                SliceOp::Push => {
                    let ok = tx.push(mk(next, 1)[0]).is_ok();
                    prop_assert_eq!(ok, model.len() < cap);
                    if ok { model.push_back(next); next += 1; }
                }
                SliceOp::PushBurst(n) => {
                    let k = tx.push_burst(&mk(next, n));
                    prop_assert_eq!(k, n.min(cap - model.len()));
                    for _ in 0..k { model.push_back(next); next += 1; }
                }
                SliceOp::PushBulk(n) => {
                    let ok = tx.push_bulk(&mk(next, n));
                    prop_assert_eq!(ok, n <= cap - model.len());
                    if ok { for _ in 0..n { model.push_back(next); next += 1; } }
                }
                SliceOp::Pop => {
                    prop_assert_eq!(rx.pop().map(NonZeroU32::get), model.pop_front());
                }
                SliceOp::PopBurst(n) => {
                    let mut out = vec![NonZeroU32::MAX; n];
                    let k = rx.pop_burst(&mut out);
                    prop_assert_eq!(k, n.min(model.len()));
                    let want: Vec<u32> = model.drain(..k).collect();
                    prop_assert_eq!(out[..k].iter().map(|v| v.get()).collect::<Vec<_>>(), want);
                }
                SliceOp::PopBulk(n) => {
                    let mut out = vec![NonZeroU32::MAX; n];
                    let ok = rx.pop_bulk(&mut out);
                    prop_assert_eq!(ok, n <= model.len());
                    if ok {
                        let want: Vec<u32> = model.drain(..n).collect();
                        prop_assert_eq!(out.iter().map(|v| v.get()).collect::<Vec<_>>(), want);
                    } else {
                        prop_assert!(out.iter().all(|v| *v == NonZeroU32::MAX), "nothing taken");
                    }
                }
            }
            prop_assert_eq!(rx.is_empty(), model.is_empty());
            prop_assert_eq!(tx.is_full(), model.len() == cap);
        }
    }
}
