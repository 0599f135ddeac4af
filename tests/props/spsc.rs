//! Property test: random sequences of every SPSC operation against a `VecDeque` model, with
//! values that count their drops (exactly-once drop of everything, leftovers included). The
//! model also tracks lazy release: slots that single pops consumed and have not released
//! to the producer yet, and the consumer's cached view of the producer's index, so it knows
//! exactly when the producer sees room.
#![cfg(not(loom))]

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

use flowline::fifo::spsc;
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
    PushBurstFrom(usize),
    PushBulkIter(usize),
    WriteChunk {
        reserve: usize,
        commit: usize,
    },
    Pop,
    Peek,
    PopBurstInto(usize),
    PopBulkInto(usize),
    ReadChunk {
        take: usize,
        commit: usize,
        mutate: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Push),
        (0usize..6).prop_map(Op::PushBurstIter),
        (0usize..6).prop_map(Op::PushBurstFrom),
        (0usize..6).prop_map(Op::PushBulkIter),
        (0usize..6, 0usize..6).prop_map(|(reserve, commit)| Op::WriteChunk { reserve, commit }),
        Just(Op::Pop),
        Just(Op::Peek),
        (0usize..6).prop_map(Op::PopBurstInto),
        (0usize..6).prop_map(Op::PopBulkInto),
        (0usize..6, 0usize..6, any::<bool>()).prop_map(|(take, commit, mutate)| Op::ReadChunk {
            take,
            commit,
            mutate
        }),
    ]
}

proptest! {
    #[test]
    fn matches_vecdeque_model(
        cap in 1usize..6,
        batch in 1usize..5,
        ops in proptest::collection::vec(op(), 0..120),
    ) {
        let drops = Rc::new(Cell::new(0u64));
        let (mut tx, mut rx) = spsc::with_release_batch::<Item>(cap, 0, batch).unwrap();
        let cap = tx.capacity();
        let batch = batch.min(cap);
        let mut model: VecDeque<u64> = VecDeque::new();
        // Slots consumed by single pops and not yet released to the producer.
        let mut pending = 0usize;
        // The consumer's cached count of available items (its view of the producer's index).
        let mut cached = 0usize;
        // The consumer looks for `want` items: its cached view, or (releasing what is
        // pending first) a fresh one.
        fn avail(want: usize, cached: &mut usize, pending: &mut usize, len: usize) -> usize {
            if *cached < want {
                *pending = 0;
                *cached = len;
            }
            *cached
        }
        let mut next = 0u64;
        let mut created = 0u64;
        let mk = |next: u64, n: usize| -> Vec<Item> {
            (0..n).map(|i| Item { id: next + i as u64, drops: drops.clone() }).collect()
        };
        for op in ops {
            match op {
                Op::Push => {
                    let it = mk(next, 1).pop().unwrap();
                    created += 1;
                    let r = tx.push(it);
                    prop_assert_eq!(r.is_ok(), model.len() + pending < cap);
                    if r.is_ok() { model.push_back(next); next += 1; }
                }
                Op::PushBurstIter(n) => {
                    let items = mk(next, n);
                    created += n as u64;
                    let mut it = items.into_iter();
                    let k = tx.push_burst_iter(&mut it);
                    prop_assert_eq!(k, n.min(cap - model.len() - pending));
                    prop_assert_eq!(it.len(), n - k);
                    for _ in 0..k { model.push_back(next); next += 1; }
                }
                Op::PushBurstFrom(n) => {
                    let mut items = mk(next, n);
                    created += n as u64;
                    let k = tx.push_burst_from(&mut items);
                    prop_assert_eq!(k, n.min(cap - model.len() - pending));
                    // What did not fit stays, in order (and is dropped here, once).
                    let left: Vec<u64> = items.iter().map(|i| i.id).collect();
                    prop_assert_eq!(left, (next + k as u64..next + n as u64).collect::<Vec<_>>());
                    for _ in 0..k { model.push_back(next); next += 1; }
                    next += (n - k) as u64;
                }
                Op::PushBulkIter(n) => {
                    let items = mk(next, n);
                    created += n as u64;
                    let ok = tx.push_bulk_iter(items).is_ok();
                    prop_assert_eq!(ok, n <= cap - model.len() - pending);
                    if ok { for _ in 0..n { model.push_back(next); next += 1; } }
                }
                Op::WriteChunk { reserve, commit } => {
                    let mut c = tx.write_chunk(reserve);
                    let len = c.len();
                    prop_assert_eq!(len, reserve.min(cap - model.len() - pending));
                    let k = commit.min(len);
                    let (a, b) = c.as_mut_slices();
                    for (i, s) in a.iter_mut().chain(b.iter_mut()).take(k).enumerate() {
                        s.write(Item { id: next + i as u64, drops: drops.clone() });
                    }
                    created += k as u64;
                    // SAFETY: the first k slots were written just above.
                    unsafe { c.commit(k) };
                    for _ in 0..k { model.push_back(next); next += 1; }
                }
                Op::Pop => {
                    let got = rx.pop().map(|i| i.id);
                    let a = avail(1, &mut cached, &mut pending, model.len());
                    prop_assert_eq!(got, if a > 0 { model.pop_front() } else { None });
                    if a > 0 {
                        cached -= 1;
                        pending += 1;
                        // A group is full, or the pop took the last item the consumer saw.
                        if pending >= batch || cached == 0 { pending = 0; }
                    }
                }
                Op::Peek => {
                    let got = rx.peek().map(|i| i.id);
                    let a = avail(1, &mut cached, &mut pending, model.len());
                    prop_assert_eq!(got, if a > 0 { model.front().copied() } else { None });
                }
                Op::PopBurstInto(n) => {
                    let mut v = Vec::new();
                    let k = rx.pop_burst_into(&mut v, n);
                    let a = avail(n, &mut cached, &mut pending, model.len());
                    prop_assert_eq!(k, n.min(a));
                    cached -= k;
                    pending = 0;
                    for it in v { prop_assert_eq!(Some(it.id), model.pop_front()); }
                }
                Op::PopBulkInto(n) => {
                    let mut v = Vec::new();
                    let ok = rx.pop_bulk_into(&mut v, n);
                    let a = avail(n, &mut cached, &mut pending, model.len());
                    prop_assert_eq!(ok, n <= a);
                    prop_assert_eq!(v.len(), if ok { n } else { 0 });
                    if ok {
                        cached -= n;
                        pending = 0;
                    }
                    for it in v { prop_assert_eq!(Some(it.id), model.pop_front()); }
                }
                Op::ReadChunk { take, commit, mutate } => {
                    let mut c = rx.read_chunk(take);
                    let len = c.len();
                    let a = avail(take, &mut cached, &mut pending, model.len());
                    prop_assert_eq!(len, take.min(a));
                    {
                        let (a, b) = c.as_slices();
                        let ids: Vec<u64> = a.iter().chain(b).map(|i| i.id).collect();
                        let want: Vec<u64> = model.iter().take(len).copied().collect();
                        prop_assert_eq!(ids, want);
                    }
                    if mutate {
                        let (a, b) = c.as_mut_slices();
                        for (it, m) in a.iter_mut().chain(b.iter_mut()).zip(model.iter_mut()) {
                            it.id += 1000;
                            *m += 1000;
                        }
                    }
                    let k = commit.min(len);
                    c.commit(k);
                    cached -= k;
                    pending = 0;
                    for _ in 0..k { model.pop_front(); }
                }
            }
            prop_assert_eq!(tx.len(), model.len() + pending);
            prop_assert_eq!(rx.len(), model.len());
            prop_assert_eq!(tx.free(), cap - model.len() - pending);
            prop_assert_eq!(drops.get() + model.len() as u64, created);
        }
        drop(tx);
        drop(rx);
        prop_assert_eq!(drops.get(), created, "every item dropped exactly once");
    }
}
