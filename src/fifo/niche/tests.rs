//! Unit tests of the niche ring: every item type, bursts, teardown and bad capacities.

// The crate may be `no_std`; the tests use the standard library's prelude.
use super::*;
use core::num::NonZeroU32;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
#[allow(unused_imports)]
use std::{boxed::Box, format, string::ToString, vec, vec::Vec};

/// Counts drops through a shared counter.
#[derive(Debug)]
struct Tracked(u64, Rc<Cell<usize>>);
impl Drop for Tracked {
    fn drop(&mut self) {
        self.1.set(self.1.get() + 1);
    }
}

fn nz(v: u32) -> NonZeroU32 {
    NonZeroU32::new(v).unwrap()
}

#[test]
fn capacity_rounds_up_and_bad_capacities_are_errors() {
    for (asked, got) in [(1, 1), (2, 2), (3, 4), (17, 32), (1000, 1024)] {
        let (tx, rx) = channel::<Box<u8>>(asked).unwrap();
        assert_eq!((tx.capacity(), rx.capacity()), (got, got));
    }
    assert_eq!(channel::<Box<u8>>(0).unwrap_err(), CapacityError::Zero);
    let e = channel::<Box<u8>>(usize::MAX).unwrap_err();
    assert!(matches!(e, CapacityError::TooLarge { .. }), "{e:?}");
    assert!(e.to_string().contains("too large"));
}

#[test]
#[cfg(not(miri))] // Miri's allocator would try to honour the 2^43-byte request
fn absurd_allocation_is_an_error_not_an_abort() {
    match channel::<Box<u8>>(1 << 40) {
        Err(CapacityError::AllocFailed { slots, .. }) => assert_eq!(slots, 1 << 40),
        // An overcommitting OS may hand out zeroed address space: nothing is touched.
        Ok((tx, _rx)) => assert_eq!(tx.capacity(), 1 << 40),
        Err(e) => panic!("unexpected {e:?}"),
    }
}

#[test]
fn full_and_empty_edges_keep_order_over_many_laps() {
    for cap in [1usize, 2, 4, 32] {
        let (mut tx, mut rx) = channel::<Box<u64>>(cap).unwrap();
        let mut next = 0u64;
        let mut expect = 0u64;
        for _ in 0..5 {
            assert!(rx.is_empty() && !tx.is_full());
            for _ in 0..cap {
                tx.push(Box::new(next)).unwrap();
                next += 1;
            }
            assert!(tx.is_full() && !rx.is_empty());
            assert_eq!(*tx.push(Box::new(99)).unwrap_err().into_inner(), 99);
            for _ in 0..cap {
                assert_eq!(*rx.pop().unwrap(), expect);
                expect += 1;
            }
            assert!(rx.pop().is_none());
        }
    }
}

#[test]
fn positions_wrap_past_usize_max() {
    let (mut tx, mut rx) = channel::<NonZeroU32>(4).unwrap();
    tx.tail = usize::MAX - 5;
    rx.head = usize::MAX - 5;
    let mut expect = 1;
    for v in 1..=40 {
        tx.push(nz(v)).unwrap();
        if v % 3 == 0 {
            while let Some(got) = rx.pop() {
                assert_eq!(got.get(), expect);
                expect += 1;
            }
        }
    }
    let mut out = [nz(1); 4];
    let k = rx.pop_burst(&mut out);
    assert_eq!(out[..k].iter().map(|v| v.get()).collect::<Vec<_>>(), [40]);
    assert!(tx.tail < 100 && rx.head == tx.tail, "both wrapped");
}

#[test]
fn bursts_and_bulks_take_what_fits() {
    let (mut tx, mut rx) = channel::<NonZeroU32>(4).unwrap();
    let v: Vec<_> = (1..=6).map(nz).collect();
    assert!(tx.push_bulk(&[]));
    assert!(!tx.push_bulk(&v[..5]), "more than the capacity");
    assert_eq!(tx.push_burst(&v[..3]), 3);
    assert!(!tx.push_bulk(&v[3..5]), "one slot free, two asked");
    let mut one = [nz(9)];
    assert!(rx.pop_bulk(&mut one));
    assert_eq!(one[0].get(), 1);
    // Two free, but not as one run ahead of the slot that the fast check reads: the
    // burst falls back to slot by slot.
    assert_eq!(tx.push_burst(&v[3..6]), 2);
    let mut out = [nz(9); 8];
    assert!(!rx.pop_bulk(&mut out[..5]));
    assert!(rx.pop_bulk(&mut out[..4]));
    assert_eq!(
        out[..4].iter().map(|v| v.get()).collect::<Vec<_>>(),
        [2, 3, 4, 5]
    );
    assert!(rx.pop_bulk(&mut out[..0]));
    assert!(!rx.pop_bulk(&mut out[..1]));
    let mut got = Vec::new();
    assert!(rx.pop_bulk_into(&mut got, 0));
    assert!(!rx.pop_bulk_into(&mut got, 1));
    assert!(tx.push_bulk_iter(Vec::<NonZeroU32>::new()).is_ok());
    assert!(tx.push_bulk_iter(v.clone()).is_err());
    assert!(tx.push_bulk_iter(v[..4].to_vec()).is_ok());
    assert!(!rx.pop_bulk_into(&mut got, 5));
    assert!(rx.pop_bulk_into(&mut got, 4));
    assert_eq!(got, v[..4]);
}

#[test]
fn leftovers_are_dropped_exactly_once() {
    let drops = Rc::new(Cell::new(0));
    let (mut tx, mut rx) = channel::<Box<Tracked>>(8).unwrap();
    for i in 0..6 {
        tx.push(Box::new(Tracked(i, drops.clone()))).unwrap();
    }
    drop(rx.pop());
    assert_eq!(drops.get(), 1);
    drop(tx);
    assert!(rx.is_abandoned());
    drop(rx);
    assert_eq!(drops.get(), 6);
}

#[test]
fn a_panicking_item_drop_does_not_leak_the_rest() {
    #[derive(Debug)]
    struct Bomb(Rc<Cell<usize>>);
    impl Drop for Bomb {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
            if self.0.get() == 2 {
                panic!("bomb");
            }
        }
    }
    let drops = Rc::new(Cell::new(0));
    let (mut tx, rx) = channel::<Box<Bomb>>(4).unwrap();
    for _ in 0..4 {
        tx.push(Box::new(Bomb(drops.clone()))).unwrap();
    }
    drop(tx);
    assert!(catch_unwind(AssertUnwindSafe(|| drop(rx))).is_err());
    assert_eq!(drops.get(), 4, "every item dropped once");
}

#[test]
fn a_panicking_iterator_leaves_what_it_gave_in_the_ring() {
    let drops = Rc::new(Cell::new(0));
    let (mut tx, mut rx) = channel::<Box<Tracked>>(8).unwrap();
    let d = drops.clone();
    let mut it = (0..5u64).map(move |i| {
        assert!(i < 3, "iterator fails");
        Box::new(Tracked(i, d.clone()))
    });
    assert!(catch_unwind(AssertUnwindSafe(|| tx.push_burst_iter(&mut it))).is_err());
    // The items pushed before the panic are in, in order, and the ring goes on.
    tx.push(Box::new(Tracked(3, drops.clone()))).unwrap();
    let got: Vec<u64> = core::iter::from_fn(|| rx.pop()).map(|t| t.0).collect();
    assert_eq!(got, [0, 1, 2, 3]);
    assert_eq!(drops.get(), 4);
    // Bulk: an iterator that yields fewer than its len() promised.
    struct Liar(u64);
    impl Iterator for Liar {
        type Item = Box<u64>;
        fn next(&mut self) -> Option<Box<u64>> {
            self.0 += 1;
            (self.0 <= 2).then(|| Box::new(self.0))
        }
    }
    impl ExactSizeIterator for Liar {
        fn len(&self) -> usize {
            4
        }
    }
    let (mut tx, mut rx) = channel::<Box<u64>>(4).unwrap();
    assert!(tx.push_bulk_iter(Liar(0)).is_ok());
    assert_eq!(rx.pop().as_deref(), Some(&1));
    assert_eq!(rx.pop().as_deref(), Some(&2));
    assert!(rx.pop().is_none());
    tx.push(Box::new(3)).unwrap();
    assert_eq!(rx.pop().as_deref(), Some(&3));
}

#[test]
fn a_panicking_burst_closure_keeps_handed_items_taken() {
    let drops = Rc::new(Cell::new(0));
    let (mut tx, mut rx) = channel::<Box<Tracked>>(8).unwrap();
    for i in 0..5 {
        tx.push(Box::new(Tracked(i, drops.clone()))).unwrap();
    }
    let mut seen = Vec::new();
    let r = catch_unwind(AssertUnwindSafe(|| {
        rx.pop_burst_with(8, |t| {
            seen.push(t.0);
            assert!(t.0 < 2, "closure fails");
        })
    }));
    assert!(r.is_err());
    assert_eq!(seen, [0, 1, 2]);
    assert_eq!(
        drops.get(),
        3,
        "the three handed items were dropped by the closure"
    );
    let mut rest = Vec::new();
    assert_eq!(rx.pop_burst_into(&mut rest, 8), 2);
    assert_eq!(rest.iter().map(|t| t.0).collect::<Vec<_>>(), [3, 4]);
    drop(rest);
    drop((tx, rx));
    assert_eq!(drops.get(), 5);
}

#[test]
fn a_panicking_into_raw_changes_nothing() {
    #[derive(Debug)]
    struct Picky(u32);
    // SAFETY: round-trips through `NonZeroU32`; `from_raw` does not panic.
    unsafe impl Niche for Picky {
        fn into_raw(self) -> NonNull<()> {
            NonZeroU32::new(self.0).expect("Picky(0)").into_raw()
        }
        unsafe fn from_raw(raw: NonNull<()>) -> Self {
            // SAFETY: `raw` came from `into_raw`.
            Picky(unsafe { NonZeroU32::from_raw(raw) }.get())
        }
    }
    let (mut tx, mut rx) = channel::<Picky>(2).unwrap();
    tx.push(Picky(1)).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| tx.push(Picky(0)))).is_err());
    tx.push(Picky(2)).unwrap();
    assert_eq!(rx.pop().map(|p| p.0), Some(1));
    assert_eq!(rx.pop().map(|p| p.0), Some(2));
    assert!(rx.pop().is_none());
}

#[test]
fn a_panicking_into_raw_in_a_burst_publishes_what_was_moved() {
    /// A `Copy` handle whose `into_raw` refuses the value 13.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Unlucky(u32);
    // SAFETY: round-trips through `NonZeroU32`; `from_raw` does not panic.
    unsafe impl Niche for Unlucky {
        fn into_raw(self) -> NonNull<()> {
            assert!(self.0 != 13, "unlucky");
            NonZeroU32::new(self.0).unwrap().into_raw()
        }
        unsafe fn from_raw(raw: NonNull<()>) -> Self {
            // SAFETY: `raw` came from `into_raw`.
            Unlucky(unsafe { NonZeroU32::from_raw(raw) }.get())
        }
    }
    for bulk in [false, true] {
        let (mut tx, mut rx) = channel::<Unlucky>(8).unwrap();
        let items = [Unlucky(1), Unlucky(2), Unlucky(13), Unlucky(4)];
        let r = catch_unwind(AssertUnwindSafe(|| {
            if bulk {
                let _ = tx.push_bulk(&items);
            } else {
                let _ = tx.push_burst(&items);
            }
        }));
        assert!(r.is_err());
        // The two items moved before the panic are in, in order, and the ring goes on.
        tx.push(Unlucky(5)).unwrap();
        let got: Vec<u32> = core::iter::from_fn(|| rx.pop()).map(|u| u.0).collect();
        assert_eq!(got, [1, 2, 5]);
    }
    // A refused first item changes nothing.
    let (mut tx, mut rx) = channel::<Unlucky>(8).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| tx.push_burst(&[Unlucky(13)]))).is_err());
    assert!(rx.pop().is_none() && !tx.is_full());
}

#[test]
fn push_burst_from_moves_the_front_and_keeps_the_rest() {
    let (mut tx, mut rx) = channel::<Box<u32>>(4).unwrap();
    let mut v: Vec<Box<u32>> = (1..=6).map(Box::new).collect();
    assert_eq!(tx.push_burst_from(&mut v), 4);
    assert_eq!(v, [Box::new(5), Box::new(6)]);
    assert_eq!(tx.push_burst_from(&mut v), 0, "full");
    assert_eq!(v.len(), 2);
    assert_eq!(rx.pop(), Some(Box::new(1)));
    assert_eq!(
        tx.push_burst_from(&mut v),
        1,
        "one slot free: one slot read per item"
    );
    assert_eq!(v, [Box::new(6)]);
    let got: Vec<u32> = core::iter::from_fn(|| rx.pop()).map(|b| *b).collect();
    assert_eq!(got, [2, 3, 4, 5]);
    assert_eq!(tx.push_burst_from(&mut Vec::new()), 0);
}

/// A panicking `into_raw` in the middle: the items before it are published, the items
/// after it stay in the `Vec`, in order, each dropped once in the end.
#[test]
fn push_burst_from_keeps_the_items_after_a_panicking_into_raw() {
    struct Counted(Box<u32>, Rc<Cell<usize>>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.set(self.1.get() + 1);
        }
    }
    // SAFETY: round-trips through a `Box` of the pair; `from_raw` does not panic.
    unsafe impl Niche for Counted {
        fn into_raw(self) -> NonNull<()> {
            assert!(*self.0 != 3, "refused");
            Box::new(self).into_raw()
        }
        unsafe fn from_raw(raw: NonNull<()>) -> Self {
            // SAFETY: `raw` came from `into_raw` (a `Box<Counted>`).
            *unsafe { <Box<Counted> as Niche>::from_raw(raw) }
        }
    }
    let drops = Rc::new(Cell::new(0));
    let (mut tx, mut rx) = channel::<Counted>(8).unwrap();
    let mut v: Vec<Counted> = (1..=5)
        .map(|i| Counted(Box::new(i), drops.clone()))
        .collect();
    let r = catch_unwind(AssertUnwindSafe(|| tx.push_burst_from(&mut v)));
    assert!(r.is_err());
    assert_eq!(drops.get(), 1, "only the refused item is gone");
    assert_eq!(v.iter().map(|c| *c.0).collect::<Vec<_>>(), [4, 5]);
    let got: Vec<u32> = core::iter::from_fn(|| rx.pop()).map(|c| *c.0).collect();
    assert_eq!(got, [1, 2]);
    drop(v);
    drop((tx, rx));
    assert_eq!(drops.get(), 5, "every item dropped exactly once");
}

#[test]
fn a_burst_is_seen_whole_or_not_at_all() {
    // The run's first slot is written last: a consumer looking at the next slot sees
    // either none of a burst or all of it. Checked from inside the burst, through an
    // iterator that looks at the consumer's slot before yielding each item.
    let (mut tx, rx) = channel::<Box<u32>>(8).unwrap();
    let mut seen_early = false;
    let rx = &rx;
    let mut it = (0..4u32).map(|i| {
        seen_early |= !rx.is_empty();
        Box::new(i)
    });
    assert_eq!(tx.push_burst_iter(&mut it), 4);
    drop(it);
    assert!(
        !seen_early,
        "a consumer saw part of a burst before it was complete"
    );
    assert!(!rx.is_empty());
}

#[test]
fn pointer_like_items_round_trip() {
    let mut a = 5u8;
    let (mut tx, mut rx) = channel::<&mut u8>(2).unwrap();
    tx.push(&mut a).unwrap();
    *rx.pop().unwrap() += 1;
    drop((tx, rx));
    assert_eq!(a, 6);
    let shared = alloc::sync::Arc::new(7u32);
    let (mut tx, mut rx) = channel::<alloc::sync::Arc<u32>>(2).unwrap();
    tx.push(shared.clone()).unwrap();
    tx.push(shared.clone()).unwrap();
    assert_eq!(alloc::sync::Arc::strong_count(&shared), 3);
    assert_eq!(rx.pop().as_deref(), Some(&7));
    assert_eq!(alloc::sync::Arc::strong_count(&shared), 2);
    drop((tx, rx));
    assert_eq!(alloc::sync::Arc::strong_count(&shared), 1);
    let mut x = 1u64;
    let (mut tx, mut rx) = channel::<NonNull<u64>>(2).unwrap();
    tx.push(NonNull::from(&mut x)).unwrap();
    // SAFETY: the pointer is to `x`, alive and not otherwise borrowed.
    unsafe { *rx.pop().unwrap().as_ptr() = 2 };
    assert_eq!(x, 2);
    let (mut tx, mut rx) = channel::<NonZeroUsize>(2).unwrap();
    tx.push(NonZeroUsize::new(usize::MAX).unwrap()).unwrap();
    assert_eq!(rx.pop().map(NonZeroUsize::get), Some(usize::MAX));
    let (mut tx, mut rx) = channel::<NonZeroU8>(2).unwrap();
    tx.push(NonZeroU8::new(255).unwrap()).unwrap();
    assert_eq!(rx.pop().map(NonZeroU8::get), Some(255));
    #[cfg(target_pointer_width = "64")]
    {
        let (mut tx, mut rx) = channel::<core::num::NonZeroU64>(2).unwrap();
        tx.push(core::num::NonZeroU64::new(u64::MAX).unwrap())
            .unwrap();
        assert_eq!(rx.pop().map(|v| v.get()), Some(u64::MAX));
    }
}

#[test]
fn abandoned_ends_are_seen() {
    let (tx, rx) = channel::<Box<u8>>(2).unwrap();
    assert!(!tx.is_abandoned() && !rx.is_abandoned());
    drop(rx);
    assert!(tx.is_abandoned());
    let (tx, rx) = channel::<Box<u8>>(2).unwrap();
    drop(tx);
    assert!(rx.is_abandoned());
    assert!(format!("{rx:?}").contains("capacity: 2"));
}

#[test]
fn two_threads_move_boxed_items_in_order() {
    let n: u64 = if cfg!(miri) { 60 } else { 200_000 };
    for cap in [1usize, 4, 64] {
        let (mut tx, mut rx) = channel::<Box<u64>>(cap).unwrap();
        let t = std::thread::spawn(move || {
            let mut i = 0u64;
            let mut k = 0u64;
            while i < n {
                k += 1;
                let sent = match k % 4 {
                    0 => {
                        let mut it = (i..n.min(i + 5)).map(Box::new);
                        tx.push_burst_iter(&mut it) as u64
                    }
                    1 => {
                        let m = (n - i).min(3) as usize;
                        if tx
                            .push_bulk_iter((0..m).map(|j| Box::new(i + j as u64)))
                            .is_ok()
                        {
                            m as u64
                        } else {
                            0
                        }
                    }
                    _ => u64::from(tx.push(Box::new(i)).is_ok()),
                };
                if sent == 0 {
                    std::thread::yield_now();
                }
                i += sent;
            }
        });
        let mut expect = 0u64;
        let mut buf = Vec::new();
        let mut k = 0u64;
        while expect < n {
            k += 1;
            buf.clear();
            match k % 3 {
                0 => {
                    rx.pop_burst_into(&mut buf, 7);
                }
                1 => {
                    let m = (n - expect).min(2) as usize;
                    let _ = rx.pop_bulk_into(&mut buf, m);
                }
                _ => buf.extend(rx.pop()),
            }
            if buf.is_empty() {
                std::thread::yield_now();
            }
            for v in &buf {
                assert_eq!(**v, expect);
                expect += 1;
            }
        }
        t.join().unwrap();
        assert!(rx.pop().is_none() && rx.is_abandoned());
    }
}

/// `try_pop` tells a ring that is empty for now from one whose producer is gone, and never
/// says `Disconnected` while an item pushed before the producer left is still there.
#[test]
fn try_pop_sees_every_item_before_disconnected() {
    let n: u64 = if cfg!(miri) { 200 } else { 20_000 };
    let (mut tx, mut rx) = channel::<core::num::NonZeroU64>(16).unwrap();
    let t = std::thread::spawn(move || {
        for i in 0..n {
            while tx.push(core::num::NonZeroU64::new(i + 1).unwrap()).is_err() {
                std::thread::yield_now();
            }
        }
    });
    let mut next = 0;
    loop {
        match rx.try_pop() {
            Ok(v) => {
                assert_eq!(v.get() - 1, next);
                next += 1;
            }
            Err(PopError::Empty) => std::thread::yield_now(),
            Err(PopError::Disconnected) => break,
        }
    }
    t.join().unwrap();
    assert_eq!(next, n);
}
