//! Unit tests of the MPSC ring: runs, reservations, teardown and layouts.

// The crate may be `no_std`; the tests use the standard library's prelude.
use super::*;
#[allow(unused_imports)]
use std::{borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec};

/// The ring's slot buffer comes from `alloc_slots` (aligned to a cache line: see its
/// test in `fifo`), and both ends see the same one.
#[test]
fn the_slot_buffer_starts_on_a_cache_line() {
    let (tx, rx) = channel::<u64>(1000).unwrap();
    assert_eq!(tx.shared.buf as usize % crate::fifo::raw::SLOT_ALIGN, 0);
    assert_eq!(tx.shared.buf, rx.shared.buf);
}

/// Lazy release must not weaken the wrap protection: once the producers can see a
/// `head`, every descriptor stamp behind it is cleared (a producer may publish there
/// again, and a stamp from before must never match). Checked after every operation of
/// a mix of single pops (released in groups of 3), bursts, chunks and empty chunks, on
/// rings started at 0 and just below the wrap. Fails if `release` publishes `head`
/// before it clears the runs taken since the last publication.
#[test]
fn no_stamp_behind_the_published_head_survives_lazy_release() {
    fn check<W: WaitMode>(rx: &Consumer<u32, W>) {
        let sh = &*rx.shared;
        let head = sh.head.load(Ordering::Relaxed);
        for (d, r) in sh.runs.iter().enumerate() {
            let stamp = r.stamp.load(Ordering::Relaxed);
            if stamp == CLEARED {
                continue;
            }
            let index = ((stamp - 1) << sh.desc_shift) | d as u64;
            assert!(
                index.wrapping_sub(head) < 1 << 63,
                "descriptor {d}: a run at {index} is still stamped behind head {head}"
            );
        }
    }
    for start in [0, u64::MAX - 20] {
        let (mut tx, mut rx) = with_release_batch::<u32>(16, start, 3).unwrap();
        let mut next = 0u32;
        let mut expect = 0u32;
        for round in 0..40u32 {
            for _ in 0..(round % 5) {
                if tx.push(next).is_ok() {
                    next += 1;
                }
            }
            if round % 7 == 3 {
                drop(tx.write_chunk(2)); // published empty
            }
            let k = tx.push_burst(&[next, next + 1, next + 2][..(round % 4) as usize]);
            next += k as u32;
            check(&rx);
            for _ in 0..(round % 6) {
                match rx.pop() {
                    Some(v) => {
                        assert_eq!(v, expect);
                        expect += 1;
                    }
                    None => break,
                }
                check(&rx);
            }
            if round % 3 == 0 {
                let mut out = [0u32; 2];
                let n = rx.pop_burst(&mut out);
                assert_eq!(
                    &out[..n],
                    &(expect..expect + n as u32).collect::<Vec<_>>()[..]
                );
                expect += n as u32;
                check(&rx);
            }
            if round % 4 == 1 {
                if let Some(&v) = rx.peek() {
                    assert_eq!(v, expect);
                }
                check(&rx);
                // A read chunk of up to 3, of which the first (at most 2) are taken.
                let chunk = rx.read_chunk(3);
                let (a, b) = chunk.as_slices();
                let seen: Vec<u32> = a.iter().chain(b).copied().collect();
                assert_eq!(
                    seen,
                    (expect..expect + seen.len() as u32).collect::<Vec<_>>()
                );
                let k = seen.len().min(2);
                chunk.commit(k);
                expect += k as u32;
                check(&rx);
            }
        }
        while let Some(v) = rx.pop() {
            assert_eq!(v, expect);
            expect += 1;
            check(&rx);
        }
        assert_eq!(expect, next);
    }
}

/// Reads that take nothing store nothing (assign-unless-equal on the head line): bursts,
/// bulk pops, chunk commits and releases on an empty ring, and a second release in a
/// row; a burst that takes items stores once.
#[test]
fn empty_reads_and_releases_store_nothing() {
    let (mut tx, mut rx) = channel::<u32>(8).unwrap();
    assert_eq!(tx.push_burst(&[1, 2, 3]), 3);
    let mut out = [0; 8];
    assert_eq!(rx.pop_burst(&mut out), 3);
    let stores = rx.lines.stores();
    assert!(stores >= 1);
    assert_eq!(rx.pop_burst(&mut out), 0);
    assert!(!rx.pop_bulk(&mut out[..1]));
    rx.read_chunk(4).commit_all();
    assert_eq!(rx.pop_burst_into(&mut Vec::new(), 4), 0);
    assert!(!rx.pop_bulk_into(&mut Vec::new(), 2));
    rx.release_pending();
    rx.release_pending();
    assert_eq!(rx.pop(), None);
    assert_eq!(
        rx.lines.stores(),
        stores,
        "the consumer rewrote head on an empty ring"
    );
    assert_eq!(tx.push_burst(&[4]), 1);
    assert_eq!(rx.pop_burst(&mut out), 1);
    assert_eq!(rx.lines.stores(), stores + 1);
}

/// A bulk pop or a read chunk that comes up short, with nothing more published,
/// releases what single pops left pending: a consumer looping on `pop_bulk_into(slots)`
/// after one `pop` would otherwise wait forever on a producer that waits for that slot
/// (found by review; fails without the releases in `available` / `ready_contiguous`).
#[test]
fn short_bulk_pops_and_read_chunks_leave_nothing_pending() {
    for bulk in [true, false] {
        let (mut tx, mut rx) = channel::<u32>(16).unwrap();
        rx.set_lazy_release(true);
        assert_eq!(rx.release_batch, 2);
        assert_eq!(tx.push_burst(&[1; 16]), 16);
        assert_eq!(rx.pop(), Some(1));
        assert!(tx.push(2).is_err(), "the popped slot is still pending");
        if bulk {
            let mut v = Vec::new();
            assert!(!rx.pop_bulk_into(&mut v, 16));
        } else {
            // Not committed: the chunk releases nothing itself.
            assert_eq!(rx.read_chunk(16).len(), 15);
        }
        assert_eq!(
            tx.push(2),
            Ok(()),
            "bulk = {bulk}: the pending slot was not released"
        );
    }
}

/// Single pops publish `head` once per group, at once when they find nothing more, and
/// on `release_pending`; the consumer counts its consumed slots as free at once.
#[test]
fn single_pops_release_in_groups() {
    let (mut tx, mut rx) = channel::<u32>(1024).unwrap();
    assert_eq!(rx.release_batch, 1, "every pop releases by default");
    rx.set_lazy_release(true);
    assert_eq!(rx.release_batch, 128);
    assert_eq!(tx.push_burst(&[7; 1024]), 1024);
    for _ in 0..127 {
        assert_eq!(rx.pop(), Some(7));
    }
    assert_eq!((tx.len(), rx.len()), (1024, 897));
    assert!(tx.push(1).is_err(), "127 pending slots were released early");
    assert_eq!(rx.pop(), Some(7)); // the 128th: a group
    assert_eq!(tx.len(), 896);
    assert_eq!(rx.pop(), Some(7));
    rx.release_pending();
    assert_eq!(tx.len(), 895);
    let mut popped = 0;
    while rx.len() > 1 {
        rx.pop().unwrap();
        popped += 1;
    }
    // 894 pops since the last release: released in 6 groups, 126 still pending.
    assert_eq!((popped, tx.len()), (894, 1 + 894 % 128));
    assert_eq!(rx.pop(), Some(7));
    assert_eq!(rx.pop(), None); // found nothing: everything is released
    assert_eq!(tx.len(), 0);
}

#[test]
fn held_reservation_blocks_consumer_not_producers() {
    let (mut a, mut rx) = channel::<u32>(16).unwrap();
    let mut b = a.clone();
    let mut c = a.clone();
    a.push(0).unwrap();
    let mut held = a.write_chunk(2); // reserves indices 1..3
                                     // Two other producers push around the held reservation; neither waits.
    assert!(b.push_bulk(&[10, 11]));
    assert_eq!(c.push(20), Ok(()));
    // The consumer drains everything before the held slot, then stops.
    assert_eq!(rx.pop(), Some(0));
    assert_eq!(rx.pop(), None);
    let (s, _) = held.as_mut_slices();
    s[0].write(1);
    s[1].write(2);
    // SAFETY: both reserved slots written above.
    unsafe { held.commit(2) };
    let mut v = Vec::new();
    rx.pop_burst_into(&mut v, 16);
    assert_eq!(v, [1, 2, 10, 11, 20]);
}

#[test]
fn dropped_and_partial_chunks_leave_skippable_holes() {
    let (mut tx, mut rx) = channel::<u32>(8).unwrap();
    drop(tx.write_chunk(3)); // published empty
    let mut c = tx.write_chunk(3);
    c.as_mut_slices().0[0].write(5);
    // SAFETY: slot 0 written.
    unsafe { c.commit(1) };
    tx.push(6).unwrap();
    assert_eq!(rx.len(), 7);
    let mut out = [0u32; 8];
    assert_eq!(rx.pop_burst(&mut out), 2);
    assert_eq!(&out[..2], &[5, 6]);
    assert_eq!(rx.len(), 0);
    // The ring is fully reusable after the holes.
    assert!(tx.push_bulk(&[1; 8]));
}

#[test]
fn consumer_dropped_after_skipping_a_hole() {
    let (mut tx, mut rx) = channel::<Box<u8>>(4).unwrap();
    let mut c = tx.write_chunk(3);
    c.as_mut_slices().0[0].write(Box::new(1));
    // SAFETY: slot 0 written.
    unsafe { c.commit(1) };
    assert_eq!(rx.pop().as_deref(), Some(&1));
    assert_eq!(rx.pop(), None); // skips the 2 empty slots
    tx.push(Box::new(2)).unwrap();
    drop(rx);
    drop(tx); // drops the one leftover exactly once (Miri checks leaks and double frees)
}

/// Single pops and peeks take each item once, in order, with rings of 1, 2 and 4 slots,
/// released at once and in groups, started at 0 and just below the index wrap, with
/// bursts between them that leave runs partly read: the slot they read is chosen by a
/// conditional move on "at the end of the run seen" (`fifo::speculation`), which must
/// never pick the slot before on a path that reads. Fails if it does.
#[test]
fn single_pops_and_peeks_take_each_item_once_across_the_wrap() {
    for cap in [1usize, 2, 4] {
        for start in [0, u64::MAX - 6] {
            for batch in [1, 3] {
                let (mut tx, mut rx) = with_release_batch::<u64>(cap, start, batch).unwrap();
                let (mut next_in, mut next_out) = (0u64, 0u64);
                for round in 0..12u64 {
                    if round % 3 == 0 {
                        let burst: Vec<u64> = (next_in..next_in + cap as u64).collect();
                        next_in += tx.push_burst(&burst) as u64;
                    } else if tx.push(next_in).is_ok() {
                        next_in += 1;
                    }
                    for _ in 0..1 + round % 2 {
                        match rx.peek().copied() {
                            Some(v) => {
                                assert_eq!(v, next_out, "peek, {cap} slots, start {start}");
                                assert_eq!(rx.pop(), Some(next_out));
                                next_out += 1;
                            }
                            None => assert_eq!(rx.pop(), None),
                        }
                    }
                }
                while let Some(v) = rx.pop() {
                    assert_eq!(v, next_out);
                    next_out += 1;
                }
                assert_eq!(next_in, next_out);
            }
        }
    }
}

#[test]
fn full_and_wrap_with_capacity_1_and_2() {
    for cap in [1usize, 2] {
        let (mut tx, mut rx) = channel::<u64>(cap).unwrap();
        for round in 0..6u64 {
            for i in 0..cap as u64 {
                tx.push(round * 10 + i).unwrap();
            }
            assert_eq!(tx.push(99), Err(crate::fifo::PushError::Full(99)));
            assert!(tx.write_chunk(1).is_empty());
            for i in 0..cap as u64 {
                assert_eq!(rx.peek(), Some(&(round * 10 + i)));
                assert_eq!(rx.pop(), Some(round * 10 + i));
            }
            assert_eq!(rx.pop(), None);
        }
    }
}

#[test]
fn capacity_errors() {
    assert_eq!(channel::<u8>(0).unwrap_err(), CapacityError::Zero);
    assert!(matches!(
        channel::<()>((1 << 31) + 1),
        Err(CapacityError::TooLarge { max, .. }) if max == 1 << 31
    ));
}

#[test]
fn leftovers_dropped_exactly_once_including_partly_consumed_run() {
    use std::rc::Rc;
    let probe = Rc::new(());
    {
        let (mut tx, mut rx) = channel::<Rc<()>>(8).unwrap();
        let mut tx2 = tx.clone();
        assert!(tx
            .push_bulk_iter((0..3).map(|_| Rc::clone(&probe)).collect::<Vec<_>>())
            .is_ok());
        tx2.push(Rc::clone(&probe)).unwrap();
        drop(tx.write_chunk(2)); // an empty run in between
        tx2.push(Rc::clone(&probe)).unwrap();
        assert_eq!(Rc::strong_count(&probe), 6);
        drop(rx.pop()); // the consumer stops inside the first run
        assert_eq!(Rc::strong_count(&probe), 5);
        drop(rx);
        assert!(tx.is_abandoned());
        drop((tx, tx2));
    }
    assert_eq!(Rc::strong_count(&probe), 1, "every leftover dropped once");
}

#[test]
fn producers_in_threads_keep_per_producer_order() {
    let n: u32 = if cfg!(miri) { 100 } else { 100_000 };
    let (tx, mut rx) = channel::<(u32, u32)>(64).unwrap();
    let ts: Vec<_> = (0..3u32)
        .map(|p| {
            let mut tx = tx.clone();
            std::thread::spawn(move || {
                let mut i = 0;
                while i < n {
                    let batch: Vec<(u32, u32)> =
                        (i..(i + 1 + i % 5).min(n)).map(|x| (p, x)).collect();
                    i += tx.push_burst(&batch) as u32;
                }
            })
        })
        .collect();
    drop(tx);
    let mut next = [0u32; 3];
    let mut buf = [(0, 0); 16];
    loop {
        let k = rx.pop_burst(&mut buf);
        for &(p, x) in &buf[..k] {
            assert_eq!(x, next[p as usize]);
            next[p as usize] += 1;
        }
        if k == 0 && rx.is_abandoned() && rx.is_empty() {
            break;
        }
    }
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(next, [n; 3]);
}

/// `push_burst_from` moves what fits across the wrap point as one run, keeps the rest in
/// the `Vec` in order, and every item is dropped once (the ring drops what is left in it;
/// Miri checks the leaks and double drops).
#[test]
fn push_burst_from_moves_what_fits_across_the_wrap() {
    let (mut tx, mut rx) = channel::<String>(4).unwrap();
    for i in 0..3 {
        tx.push(i.to_string()).unwrap();
        assert_eq!(rx.pop().as_deref(), Some(i.to_string().as_str()));
    }
    let mut v: Vec<String> = (10..15).map(|i| i.to_string()).collect();
    assert_eq!(tx.push_burst_from(&mut v), 4);
    assert_eq!(v, ["14"]);
    assert_eq!(tx.push_burst_from(&mut v), 0, "full: nothing moves");
    assert_eq!(v, ["14"]);
    assert_eq!(rx.pop().as_deref(), Some("10"));
    assert_eq!(rx.pop().as_deref(), Some("11"));
    assert_eq!(tx.push_burst_from(&mut v), 1);
    assert!(v.is_empty());
    assert_eq!(rx.pop().as_deref(), Some("12"));
    // "13" and "14" are dropped with the ring.
}

/// `pop_burst_with` hands items over in order across runs and the wrap point; when the
/// closure panics, the items handed over stay consumed and the rest stay in the ring, each
/// dropped once (Miri checks the leaks and double drops).
#[test]
fn pop_burst_with_keeps_the_rest_when_the_closure_panics() {
    let (mut tx, mut rx) = channel::<String>(4).unwrap();
    let mut tx2 = tx.clone();
    for i in 0..3 {
        tx.push(i.to_string()).unwrap();
        assert!(rx.pop().is_some());
    }
    tx.push("a".to_string()).unwrap();
    tx2.push("b".to_string()).unwrap();
    tx.push("c".to_string()).unwrap();
    let mut got = Vec::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rx.pop_burst_with(8, |s| {
            let stop = s == "b";
            got.push(s);
            assert!(!stop, "the closure panics at b");
        })
    }));
    assert!(r.is_err());
    assert_eq!(got, ["a", "b"]);
    assert_eq!(rx.pop().as_deref(), Some("c"), "c stayed in the ring");
    tx.push("d".to_string()).unwrap();
    tx.push("e".to_string()).unwrap();
    let mut rest = Vec::new();
    assert_eq!(rx.pop_burst_with(1, |s| rest.push(s)), 1);
    assert_eq!(rest, ["d"]);
    // "e" is dropped with the ring.
}

/// A read chunk's iterator moves items out in order across the wrap point; dropped early,
/// it releases what it yielded and leaves the rest; forgotten, it still never lets an item
/// it yielded be read again (each item is dropped once: Miri checks).
#[test]
fn read_chunk_into_iter_yields_each_item_once() {
    let (mut tx, mut rx) = channel::<String>(4).unwrap();
    for i in 0..3 {
        tx.push(i.to_string()).unwrap();
        assert!(rx.pop().is_some());
    }
    for s in ["a", "b", "c", "d"] {
        tx.push(s.to_string()).unwrap();
    }
    let mut it = rx.read_chunk(4).into_iter();
    assert_eq!(it.len(), 4);
    assert_eq!(it.next().as_deref(), Some("a"));
    assert_eq!(it.next().as_deref(), Some("b"));
    drop(it);
    tx.push("e".to_string()).unwrap();
    tx.push("f".to_string()).unwrap();
    assert!(tx.push("g".to_string()).is_err(), "two slots were released");
    let mut it = rx.read_chunk(1).into_iter();
    assert_eq!(it.next().as_deref(), Some("c"));
    assert_eq!(it.next(), None);
    core::mem::forget(it);
    let rest: Vec<String> = rx.read_chunk(8).into_iter().collect();
    assert_eq!(rest, ["d", "e", "f"]);
    assert_eq!(rx.pop(), None);
}

/// `try_pop` tells a ring that is empty for now from one whose producer is gone, and never
/// says `Disconnected` while an item pushed before the producer left is still there.
#[test]
fn try_pop_sees_every_item_before_disconnected() {
    let n: u64 = if cfg!(miri) { 200 } else { 20_000 };
    let (mut tx, mut rx) = channel::<u64>(16).unwrap();
    let t = std::thread::spawn(move || {
        for i in 0..n {
            while tx.push(i).is_err() {
                std::thread::yield_now();
            }
        }
    });
    let mut next = 0;
    loop {
        match rx.try_pop() {
            Ok(v) => {
                assert_eq!(v, next);
                next += 1;
            }
            Err(PopError::Empty) => std::thread::yield_now(),
            Err(PopError::Disconnected) => break,
        }
    }
    t.join().unwrap();
    assert_eq!(next, n);
}
