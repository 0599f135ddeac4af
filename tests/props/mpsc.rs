//! Property test: random sequences of MPSC operations from three interleaved producer
//! handles, including chunks held open while other producers push, against a model: a
//! `VecDeque` of runs in reservation order, plus the slots that single pops consumed and
//! have not released yet (lazy release, with a random release batch and a start index
//! that may be just below the wrap). Items count their drops (exactly once, leftovers
//! included).
#![cfg(not(loom))]

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

use flowline::fifo::mpsc::{self, Producer, WriteChunk};
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
    Push(usize),
    PushBurstIter(usize, usize),
    PushBulkIter(usize, usize),
    /// Open a chunk on producer p reserving up to n slots, and keep it open.
    OpenChunk(usize, usize),
    /// Close producer p's open chunk: commit k items, or drop it uncommitted (None).
    CloseChunk(usize, Option<usize>),
    Pop,
    Peek,
    PopBurstInto(usize),
    /// Bulk pop of n items into a Vec: all or nothing.
    PopBulkInto(usize),
    /// Read chunk of up to n items, then commit k of them (k clamped to the chunk).
    ReadChunk(usize, usize),
    ReleasePending,
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0usize..3;
    prop_oneof![
        p.clone().prop_map(Op::Push),
        (p.clone(), 0usize..5).prop_map(|(p, n)| Op::PushBurstIter(p, n)),
        (p.clone(), 0usize..5).prop_map(|(p, n)| Op::PushBulkIter(p, n)),
        (p.clone(), 0usize..5).prop_map(|(p, n)| Op::OpenChunk(p, n)),
        (p, proptest::option::of(0usize..5)).prop_map(|(p, k)| Op::CloseChunk(p, k)),
        Just(Op::Pop),
        Just(Op::Peek),
        (0usize..6).prop_map(Op::PopBurstInto),
        (0usize..6).prop_map(Op::PopBulkInto),
        (0usize..7, 0usize..7).prop_map(|(n, k)| Op::ReadChunk(n, k)),
        Just(Op::ReleasePending),
    ]
}

/// One reservation in the model: its slot count, its items once published (None while its
/// chunk is open), and how many of them the consumer has taken.
struct Run {
    key: u64,
    len: usize,
    items: Option<Vec<u64>>,
    taken: usize,
}

struct Model {
    runs: VecDeque<Run>,
    /// Slots reserved and not yet passed by the consumer.
    used: usize,
    /// Slots passed by single pops and not yet released to the producers.
    pending: usize,
    release_batch: usize,
}

impl Model {
    /// What the real consumer's `ready()` does: pass exhausted runs (freeing their
    /// remaining slots, which releases everything) and return the next item, stopping at
    /// an unpublished run (which also releases everything: nothing is left pending when
    /// the consumer finds nothing).
    fn ready(&mut self) -> Option<u64> {
        while let Some(front) = self.runs.front() {
            let Some(items) = front.items.as_ref() else {
                self.pending = 0;
                return None;
            };
            if front.taken < items.len() {
                return Some(items[front.taken]);
            }
            if front.len > front.taken {
                self.pending = 0;
            }
            self.used -= front.len - front.taken;
            self.runs.pop_front();
        }
        self.pending = 0;
        None
    }

    fn take(&mut self) -> Option<u64> {
        let v = self.ready()?;
        self.runs.front_mut().unwrap().taken += 1;
        self.used -= 1;
        Some(v)
    }

    /// A single pop: the slot stays pending until a batch is full.
    fn pop(&mut self) -> Option<u64> {
        let v = self.take()?;
        self.pending += 1;
        if self.pending >= self.release_batch {
            self.pending = 0;
        }
        Some(v)
    }

    /// Slots the producers count as used.
    fn producer_used(&self) -> usize {
        self.used + self.pending
    }

    /// Items published from the consumer's position on, across runs and their holes,
    /// up to the first unpublished run.
    fn available(&mut self) -> usize {
        self.ready();
        let mut n = 0;
        for run in &self.runs {
            let Some(items) = run.items.as_ref() else {
                break;
            };
            n += items.len() - run.taken;
        }
        n
    }

    /// What a read chunk of up to `want` items lends: one contiguous stretch of slots, so
    /// it continues into the next run only after a run without holes.
    fn contiguous(&mut self, want: usize) -> Vec<u64> {
        let mut out = Vec::new();
        if self.ready().is_none() {
            return out;
        }
        for run in &self.runs {
            let Some(items) = run.items.as_ref() else {
                break;
            };
            out.extend(&items[run.taken..]);
            if out.len() >= want || items.len() < run.len {
                break;
            }
        }
        out.truncate(want);
        out
    }

    fn reserve(&mut self, key: u64, len: usize, items: Option<Vec<u64>>) {
        if len > 0 {
            self.runs.push_back(Run {
                key,
                len,
                items,
                taken: 0,
            });
            self.used += len;
        }
    }
}

fn items(drops: &Rc<Cell<u64>>, from: u64, n: usize) -> impl Iterator<Item = Item> + '_ {
    (from..from + n as u64).map(move |id| Item {
        id,
        drops: Rc::clone(drops),
    })
}

proptest! {
    #[test]
    fn matches_model(
        cap in 1usize..9,
        batch in 1usize..9,
        near_wrap in any::<bool>(),
        ops in proptest::collection::vec(op(), 0..150),
    ) {
        let drops = Rc::new(Cell::new(0u64));
        let start = if near_wrap { u64::MAX - 5 } else { 0 };
        let (tx, mut rx) = mpsc::with_release_batch::<Item>(cap, start, batch).unwrap();
        let cap = tx.capacity();
        // A handle that never pushes: the producers' view of the ring.
        let view = tx.clone();
        // Producers live behind raw pointers so that a chunk (which borrows its producer
        // mutably) can stay open across loop iterations. A producer with an open chunk is
        // never used through its pointer until the chunk is closed, so the two never alias.
        let ptrs: [*mut Producer<Item>; 3] = [
            Box::into_raw(Box::new(tx.clone())),
            Box::into_raw(Box::new(tx.clone())),
            Box::into_raw(Box::new(tx)),
        ];
        let prod = |p: usize| -> &'static mut Producer<Item> {
            // SAFETY: the pointer comes from Box::into_raw above and is freed only at the
            // end; callers use it only while no chunk borrows producer p.
            unsafe { &mut *{ ptrs[p] } }
        };
        let mut chunks: [Option<(u64, WriteChunk<'static, Item>)>; 3] = [None, None, None];
        let mut m = Model {
            runs: VecDeque::new(),
            used: 0,
            pending: 0,
            release_batch: batch.min(cap),
        };
        let mut next = 0u64;
        let mut created = 0u64;
        let mut key = 0u64;
        for op in ops {
            match op {
                Op::Push(p) | Op::PushBurstIter(p, _) | Op::PushBulkIter(p, _) | Op::OpenChunk(p, _)
                    if chunks[p].is_some() => {} // producer p is parked on its open chunk
                Op::Push(p) => {
                    created += 1;
                    let ok = prod(p).push(items(&drops, next, 1).next().unwrap()).is_ok();
                    prop_assert_eq!(ok, m.producer_used() < cap);
                    if ok {
                        m.reserve(key, 1, Some(vec![next]));
                    }
                    key += 1;
                    next += 1;
                }
                Op::PushBurstIter(p, n) => {
                    let mut it = items(&drops, next, n);
                    let k = prod(p).push_burst_iter(&mut it);
                    prop_assert_eq!(it.count(), n - k); // leftovers are dropped here
                    created += n as u64;
                    let reserved = n.min(cap - m.producer_used());
                    prop_assert_eq!(k, reserved);
                    m.reserve(key, reserved, Some((next..next + k as u64).collect()));
                    key += 1;
                    next += n as u64;
                }
                Op::PushBulkIter(p, n) => {
                    let batch: Vec<Item> = items(&drops, next, n).collect();
                    created += n as u64;
                    let ok = prod(p).push_bulk_iter(batch).is_ok();
                    prop_assert_eq!(ok, n <= cap - m.producer_used());
                    if ok {
                        m.reserve(key, n, Some((next..next + n as u64).collect()));
                    }
                    key += 1;
                    next += n as u64;
                }
                Op::OpenChunk(p, n) => {
                    let c = prod(p).write_chunk(n);
                    let reserved = n.min(cap - m.producer_used());
                    prop_assert_eq!(c.len(), reserved);
                    m.reserve(key, reserved, None);
                    chunks[p] = Some((key, c));
                    key += 1;
                }
                Op::CloseChunk(p, k) => {
                    if let Some((rk, mut c)) = chunks[p].take() {
                        let ids: Vec<u64> = match k {
                            Some(k) => {
                                let k = k.min(c.len());
                                let (a, b) = c.as_mut_slices();
                                for (s, it) in a.iter_mut().chain(b.iter_mut()).zip(items(&drops, next, k)) {
                                    s.write(it);
                                }
                                // SAFETY: the first k slots were written just above.
                                unsafe { c.commit(k) };
                                created += k as u64;
                                next += k as u64;
                                (next - k as u64..next).collect()
                            }
                            None => {
                                drop(c); // published empty
                                Vec::new()
                            }
                        };
                        if let Some(run) = m.runs.iter_mut().find(|r| r.key == rk) {
                            run.items = Some(ids);
                        }
                    }
                }
                Op::Pop => {
                    let got = rx.pop().map(|i| i.id);
                    prop_assert_eq!(got, m.pop());
                }
                Op::ReleasePending => {
                    rx.release_pending();
                    m.pending = 0;
                }
                Op::Peek => {
                    let got = rx.peek().map(|i| i.id);
                    prop_assert_eq!(got, m.ready());
                }
                Op::PopBurstInto(n) => {
                    let mut v = Vec::new();
                    rx.pop_burst_into(&mut v, n);
                    let mut want = Vec::new();
                    if n == 0 {
                        m.ready();
                    }
                    while want.len() < n {
                        match m.take() {
                            Some(id) => want.push(id),
                            None => break,
                        }
                    }
                    if !want.is_empty() {
                        m.pending = 0;
                    }
                    let got: Vec<u64> = v.iter().map(|i| i.id).collect();
                    prop_assert_eq!(got, want);
                }
                Op::PopBulkInto(n) => {
                    let mut v = Vec::new();
                    let ok = rx.pop_bulk_into(&mut v, n);
                    prop_assert_eq!(ok, m.available() >= n);
                    if !ok {
                        m.pending = 0; // short: found nothing more, released
                    }
                    let want: Vec<u64> = if ok {
                        (0..n).map(|_| m.take().unwrap()).collect()
                    } else {
                        Vec::new()
                    };
                    if !want.is_empty() {
                        m.pending = 0;
                    }
                    let got: Vec<u64> = v.iter().map(|i| i.id).collect();
                    prop_assert_eq!(got, want);
                }
                Op::ReadChunk(n, k) => {
                    let want = m.contiguous(n);
                    let c = rx.read_chunk(n);
                    let (a, b) = c.as_slices();
                    let got: Vec<u64> = a.iter().chain(b).map(|i| i.id).collect();
                    prop_assert_eq!(&got, &want);
                    let k = k.min(c.len());
                    c.commit(k);
                    for _ in 0..k {
                        m.take();
                    }
                    m.pending = 0; // a commit always publishes
                }
            }
            prop_assert_eq!(rx.len(), m.used);
            prop_assert_eq!(rx.free(), cap - m.used);
            prop_assert_eq!(view.len(), m.producer_used());
        }
        drop(view);
        for c in chunks.iter_mut() {
            drop(c.take()); // open chunks are published empty
        }
        for p in ptrs {
            // SAFETY: from Box::into_raw above; no chunk borrows it any more.
            drop(unsafe { Box::from_raw(p) });
        }
        drop(rx);
        prop_assert_eq!(drops.get(), created, "every item dropped exactly once");
    }
}
