//! Unit tests of the SPSC ring: operations against a model, teardown, layouts and line counts.

// The crate may be `no_std`; the tests use the standard library's prelude.
use super::*;
use std::cell::Cell;
use std::rc::Rc;
#[allow(unused_imports)]
use std::{borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec};

/// Counts drops through a shared counter.
#[derive(Debug)]
struct Tracked(u64, Rc<Cell<usize>>);
impl Drop for Tracked {
    fn drop(&mut self) {
        self.1.set(self.1.get() + 1);
    }
}

/// The ring's slot buffer comes from `alloc_slots` (aligned to a cache line: see its
/// test in `fifo`), and both ends see the same one.
#[test]
fn the_slot_buffer_starts_on_a_cache_line() {
    let (tx, rx) = channel::<u64>(1000).unwrap();
    assert_eq!(tx.shared.buf as usize % crate::fifo::raw::SLOT_ALIGN, 0);
    assert_eq!(tx.shared.buf, rx.shared.buf);
}

/// Pauses in `reads` reads that each find new items when no pause pays off: one after
/// `hold` reads, the hold doubling from 2 up to 4096.
fn expected_pauses(reads: usize) -> usize {
    let (mut expected, mut done, mut hold) = (0, 0, 2);
    loop {
        done += hold + 1;
        if done > reads {
            return expected;
        }
        expected += 1;
        hold = (hold * 2).min(4096);
    }
}

/// Operations that move nothing store nothing (assign-unless-equal on the index
/// lines): bursts and chunk commits of zero items on a full or empty ring, and a
/// release with nothing pending; those that move items store once.
#[test]
fn empty_publications_and_releases_store_nothing() {
    let (mut tx, mut rx) = channel::<u32>(4).unwrap();
    assert_eq!(tx.push_burst(&[1, 2, 3, 4]), 4);
    assert_eq!(tx.lines.stores(), 1);
    // Full ring: a burst, a bulk push, an empty chunk commit.
    assert_eq!(tx.push_burst(&[5]), 0);
    assert!(!tx.push_bulk(&[5]));
    // SAFETY: nothing is committed.
    unsafe { tx.write_chunk(2).commit(0) };
    assert_eq!(tx.write_chunk(2).fill_from_iter(&mut [5, 6].into_iter()), 0);
    assert_eq!(tx.push_burst_from(&mut vec![5]), 0);
    assert_eq!(
        tx.lines.stores(),
        1,
        "the producer rewrote tail on a full ring"
    );
    let mut out = [0; 4];
    assert_eq!(rx.pop_burst(&mut out), 4);
    assert_eq!(rx.lines.stores(), 1);
    // Empty ring: a burst, a bulk pop, an empty chunk commit, a partial commit of 0.
    assert_eq!(rx.pop_burst(&mut out), 0);
    assert!(!rx.pop_bulk(&mut out[..1]));
    rx.read_chunk(2).commit_all();
    assert_eq!(rx.pop_burst_into(&mut Vec::new(), 4), 0);
    rx.release_pending();
    assert_eq!(
        rx.lines.stores(),
        1,
        "the consumer rewrote head on an empty ring"
    );
    // A chunk commit of 0 after single pops still releases what they left pending
    // (a 64-slot ring with lazy release releases single pops in groups of 8).
    let (mut tx, mut rx) = channel::<u32>(64).unwrap();
    rx.set_lazy_release(true);
    assert_eq!(tx.push_burst(&[1, 2, 3]), 3);
    assert_eq!(rx.pop(), Some(1));
    assert_eq!(
        (rx.lines.stores(), rx.head - rx.released),
        (0, 1),
        "one pop pending"
    );
    rx.read_chunk(1).commit(0);
    assert_eq!(
        (rx.lines.stores(), rx.head - rx.released),
        (1, 0),
        "released once"
    );
}

/// Single pops on a 1024-slot ring release in groups of `MAX_RELEASE_BATCH` (16): the
/// producer sees no room after 15 pops from a full ring, 16 slots after the 16th, and
/// everything once a pop takes the last item this end knows of.
#[test]
fn single_pops_release_in_groups_of_sixteen() {
    let (mut tx, mut rx) = channel::<u32>(1024).unwrap();
    assert_eq!(rx.release_batch, 1, "every pop releases by default");
    rx.set_lazy_release(true);
    assert_eq!(rx.release_batch, MAX_RELEASE_BATCH);
    assert_eq!(MAX_RELEASE_BATCH, 16);
    assert_eq!(tx.push_burst(&[7; 1024]), 1024);
    for _ in 0..15 {
        assert_eq!(rx.pop(), Some(7));
    }
    assert_eq!(tx.free(), 0, "15 pending slots were released early");
    assert!(tx.push(1).is_err());
    assert_eq!(rx.pop(), Some(7)); // the 16th: a group
    assert_eq!(tx.free(), 16);
    let mut popped = 16;
    while rx.pop().is_some() {
        popped += 1;
    }
    assert_eq!(popped, 1024);
    assert_eq!(tx.free(), 1024, "the last pop released the rest");
}

/// A ring with polite polling turned on for every read (by default only large reads
/// may pause).
fn polite_channel<T>(
    ends: Result<(Producer<T>, Consumer<T>), CapacityError>,
) -> (Producer<T>, Consumer<T>) {
    let (tx, mut rx) = ends.unwrap();
    rx.set_polite(crate::fifo::spsc::PolitePolling::On);
    (tx, rx)
}

/// Polite polling never hides an item: a pop right after a push on the same thread
/// gets it, and since each pause there brings one item, pauses become rare.
#[test]
fn a_same_thread_producer_makes_polite_pauses_rare_and_misses_nothing() {
    let n: u64 = if cfg!(miri) { 2_000 } else { 100_000 };
    let (mut tx, mut rx) = polite_channel(channel::<u64>(64));
    for i in 0..n {
        tx.push(i).unwrap();
        assert_eq!(rx.pop(), Some(i));
    }
    // A pause comes after `hold` fruitful reads, each pop is one read, and each pause
    // doubles the hold (2, 4, ... up to 4096): 11 pauses in the first 4105 pops, then
    // one per 4097.
    let expected = expected_pauses(n as usize);
    assert_eq!(rx.polite.waits, expected);
    assert!(expected <= 11 + n as usize / 4097);
}

/// Ten reads of a consumer trailing a producer on another core, as seen from one
/// thread: before a read without a pause, one new item is there; before a paused read,
/// the producer has published a line's worth (8). Every item comes out in order;
/// returns how many of the ten reads paused.
fn trail(rx: &mut Consumer<u64>, tx: &mut Producer<u64>, how: Drain) -> usize {
    let before = rx.polite.waits;
    let mut next = 0u64;
    for _ in 0..10 {
        let k = if rx.polite.should_wait() { 8 } else { 1 };
        for i in 0..k {
            tx.push(next + i).unwrap();
        }
        match how {
            Drain::Pops => {
                for i in 0..k {
                    assert_eq!(rx.pop(), Some(next + i));
                }
            }
            Drain::RefreshThenBurst | Drain::BurstInto | Drain::SmallBurstInto => {
                if how == Drain::RefreshThenBurst {
                    assert_eq!(rx.refresh(), k as usize);
                }
                // More room than items: one read of the index, not two. A small burst
                // asks for 16 items (128 bytes), the others for 64 (512 bytes).
                let max = if how == Drain::SmallBurstInto { 16 } else { 64 };
                let mut v = Vec::new();
                assert_eq!(rx.pop_burst_into(&mut v, max), k as usize);
                assert_eq!(v, (next..next + k).collect::<Vec<_>>());
            }
        }
        next += k;
    }
    let waits = rx.polite.waits - before;
    // Nothing more. With polite polling on for pops this read pauses too and, finding
    // nothing, ends the streak; a pop that may not pause leaves the state alone.
    assert_eq!(rx.pop(), None);
    waits
}

/// How `trail` takes each round's items.
#[derive(Clone, Copy, PartialEq)]
enum Drain {
    Pops,
    BurstInto,
    SmallBurstInto,
    RefreshThenBurst,
}

/// A consumer trailing a producer pauses before each read with nothing left, whether
/// it pops or bursts; by default only reads that ask for 256 bytes or more pause; with
/// polite polling off, or through `refresh` (the distributor's, which polls many rings
/// in turn), none does.
#[test]
fn polite_pauses_happen_only_where_allowed() {
    // Each case on a fresh ring: a trail ends with a read that pauses and finds
    // nothing, which doubles the hold for whatever comes next.
    for (how, expected, what) in [
        (Drain::Pops, 8, "all but the first two reads"),
        (
            Drain::BurstInto,
            8,
            "pop_burst_into pauses as pops do (one read)",
        ),
        (Drain::RefreshThenBurst, 0, "refresh never pauses"),
    ] {
        let (mut tx, mut rx) = polite_channel(channel::<u64>(64));
        assert_eq!(trail(&mut rx, &mut tx, how), expected, "{what}");
    }
    let (mut tx, mut rx) = channel::<u64>(64).unwrap();
    assert_eq!(rx.polite(), PolitePolling::Off, "the default");
    assert_eq!(
        trail(&mut rx, &mut tx, Drain::BurstInto),
        0,
        "the default, off: large bursts never pause"
    );
    let (mut tx, mut rx) = channel::<u64>(64).unwrap();
    rx.set_polite(PolitePolling::LargeReads);
    assert_eq!(
        trail(&mut rx, &mut tx, Drain::Pops),
        0,
        "large reads: single pops never pause"
    );
    assert_eq!(
        trail(&mut rx, &mut tx, Drain::SmallBurstInto),
        0,
        "large reads: a burst asking for 128 bytes never pauses"
    );
    assert_eq!(
        trail(&mut rx, &mut tx, Drain::BurstInto),
        8,
        "large reads: a burst asking for 512 bytes pauses as with polite polling on"
    );
    let (mut tx, mut rx) = channel::<u64>(64).unwrap();
    rx.set_polite(PolitePolling::Off);
    rx.set_polite(crate::fifo::spsc::PolitePolling::On);
    rx.set_polite(crate::fifo::spsc::PolitePolling::Off);
    assert_eq!(
        trail(&mut rx, &mut tx, Drain::Pops),
        0,
        "turned on, then off"
    );
    rx.set_polite(crate::fifo::spsc::PolitePolling::On);
    assert_eq!(trail(&mut rx, &mut tx, Drain::Pops), 8, "back on");
}

/// Under `LargeReads`, reads too small to pause (single pops, small bursts) go
/// straight to the producer's index and leave the polite state alone: however many of
/// them found items, the next large read does not pause on their account (nor does a
/// small read that finds nothing end the large reads' streak). A consumer of
/// zero-sized items never pauses, whatever it asks for.
#[test]
fn reads_that_may_not_pause_leave_the_polite_state_alone() {
    let (mut tx, mut rx) = channel::<u64>(64).unwrap();
    rx.set_polite(PolitePolling::LargeReads);
    for i in 0..5 {
        tx.push(i).unwrap();
        assert_eq!(
            rx.pop(),
            Some(i),
            "each pop reads the index and finds an item"
        );
        let mut v = Vec::new();
        tx.push(100 + i).unwrap();
        assert_eq!(rx.pop_burst_into(&mut v, 16), 1, "a 128-byte burst: small");
    }
    assert!(
        !rx.polite.should_wait(),
        "ten fruitful small reads fed no streak"
    );
    // A large read that finds the ring empty: it would pause after a streak.
    let mut v = Vec::new();
    assert_eq!(rx.pop_burst_into(&mut v, 64), 0);
    assert_eq!(rx.polite.waits, 0);
    // Large reads still build their own streak: two fruitful ones, then a pause.
    for i in 0..2 {
        tx.push(i).unwrap();
        assert_eq!(rx.pop_burst_into(&mut v, 64), 1);
    }
    assert!(rx.polite.should_wait());
    assert_eq!(rx.pop_burst_into(&mut v, 64), 0);
    assert_eq!(rx.polite.waits, 1);
    // Zero-sized items move no lines: no read pauses, even one asking for usize::MAX.
    let (mut tx, mut rx) = channel::<()>(64).unwrap();
    rx.set_polite(PolitePolling::LargeReads);
    let mut v = Vec::new();
    for _ in 0..4 {
        tx.push(()).unwrap();
        assert_eq!(rx.pop_burst_into(&mut v, usize::MAX), 1);
    }
    assert_eq!(rx.pop_burst_into(&mut v, usize::MAX), 0);
    assert_eq!(rx.polite.waits, 0);
}

/// A producer on the consumer's own thread that pushes a line's worth (or more) before
/// each drain: a pause brings no more than a read without one, so pauses become rare
/// (they double the hold each time), and no item is missed.
#[test]
fn same_thread_batches_make_polite_pauses_rare() {
    for batch in [8u64, 32] {
        let rounds: u64 = if cfg!(miri) { 1_000 } else { 20_000 };
        let (mut tx, mut rx) = polite_channel(channel::<u64>(64));
        for r in 0..rounds {
            for i in 0..batch {
                tx.push(r * batch + i).unwrap();
            }
            for i in 0..batch {
                assert_eq!(rx.pop(), Some(r * batch + i));
            }
        }
        // One read per batch, each finding `batch`: pauses as for one item per read.
        let expected = expected_pauses(rounds as usize);
        assert_eq!(rx.polite.waits, expected, "batch {batch}");
    }
}

/// The pause's bookkeeping (the gain, a wrapping difference of `tail` values) is right
/// across the index wrap: a trail that starts just below `usize::MAX` pauses as one
/// from zero does, and every item comes out in order.
#[test]
fn polite_pauses_are_counted_right_across_the_index_wrap() {
    let (mut tx, mut rx) = polite_channel(with_start_index::<u64>(64, usize::MAX - 3));
    assert_eq!(
        trail(&mut rx, &mut tx, Drain::Pops),
        8,
        "all but the first two reads, as without the wrap"
    );
}

#[test]
fn capacity_rounds_up_to_power_of_two() {
    for (asked, got) in [(1, 1), (2, 2), (3, 4), (1000, 1024), (1024, 1024)] {
        let (tx, rx) = channel::<u64>(asked).unwrap();
        assert_eq!((tx.capacity(), rx.capacity()), (got, got));
    }
}

#[test]
fn bad_capacities_are_errors_with_messages() {
    assert_eq!(channel::<u8>(0).unwrap_err(), CapacityError::Zero);
    let e = channel::<u64>(usize::MAX).unwrap_err();
    assert!(matches!(e, CapacityError::TooLarge { .. }), "{e:?}");
    assert!(e.to_string().contains("too large"));
    let e = channel::<[u8; 4096]>(1 << 60).unwrap_err();
    assert!(matches!(e, CapacityError::TooLarge { .. }), "{e:?}");
    // A ZST ring is fine at any sane size and never allocates.
    let (mut tx, mut rx) = channel::<()>(1 << 40).unwrap();
    tx.push(()).unwrap();
    assert_eq!(rx.pop(), Some(()));
}

#[test]
#[cfg(not(miri))] // Miri's allocator would try to honour the 2^43-byte request
fn absurd_allocation_is_an_error_not_an_abort() {
    // 2^40 slots of 8 bytes: 8 TiB, within the index and isize limits.
    match channel::<u64>(1 << 40) {
        Err(CapacityError::AllocFailed { slots, .. }) => assert_eq!(slots, 1 << 40),
        Ok(_) => {} // an overcommitting OS may hand out the address space; nothing touched
        Err(e) => panic!("unexpected {e:?}"),
    }
}

#[test]
fn full_and_empty_edges_capacity_1_and_2() {
    for cap in [1usize, 2] {
        let (mut tx, mut rx) = channel::<u32>(cap).unwrap();
        for round in 0..5u32 {
            for i in 0..cap as u32 {
                assert_eq!(tx.push(round * 10 + i), Ok(()));
            }
            assert!(tx.is_full() && rx.is_full());
            assert_eq!(tx.push(99), Err(crate::fifo::PushError::Full(99)));
            assert_eq!(tx.write_chunk(1).len(), 0);
            for i in 0..cap as u32 {
                assert_eq!(rx.peek(), Some(&(round * 10 + i)));
                assert_eq!(rx.pop(), Some(round * 10 + i));
            }
            assert!(rx.is_empty() && tx.is_empty());
            assert_eq!(rx.pop(), None);
            assert_eq!(rx.peek(), None);
            assert!(rx.read_chunk(1).is_empty());
        }
    }
}

/// Single pops and peeks take each item once, in order, with every ring size from one
/// slot up, eager and lazy, started at 0 and just below the index wrap: the slot they read
/// is chosen by a conditional move on "at the end of what was seen" (`fifo::speculation`),
/// which must never pick the slot before on a path that reads. Fails if it does (an item
/// read twice, or one skipped).
#[test]
fn single_pops_and_peeks_take_each_item_once_across_the_wrap() {
    for slots in [1usize, 2, 4] {
        for start in [0, usize::MAX - 6] {
            for lazy in [false, true] {
                let (mut tx, mut rx) = with_start_index::<u64>(slots, start).unwrap();
                rx.set_lazy_release(lazy);
                let (mut next_in, mut next_out) = (0u64, 0u64);
                for round in 0..12usize {
                    // Fill by 1..=slots items, then drain by 1..=slots, varying per round.
                    for _ in 0..1 + round % slots {
                        if tx.push(next_in).is_ok() {
                            next_in += 1;
                        }
                    }
                    for _ in 0..1 + (round / 2) % slots {
                        match rx.peek().copied() {
                            Some(v) => {
                                assert_eq!(v, next_out, "peek, {slots} slots, start {start}");
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
fn index_counters_wrap_around() {
    let start = usize::MAX - 5;
    let (mut tx, mut rx) = with_start_index::<u64>(4, start).unwrap();
    let mut next_in = 0u64;
    let mut next_out = 0u64;
    for _ in 0..20 {
        let batch: Vec<u64> = (next_in..next_in + 3).collect();
        next_in += tx.push_burst(&batch) as u64;
        assert!(tx.len() <= 4);
        let mut out = [0u64; 4];
        let n = rx.pop_burst(&mut out[..2]);
        for &v in &out[..n] {
            assert_eq!(v, next_out);
            next_out += 1;
        }
    }
    while let Some(v) = rx.pop() {
        assert_eq!(v, next_out);
        next_out += 1;
    }
    assert_eq!(next_in, next_out);
    assert!(next_in > 20, "the indices crossed usize::MAX");
}

/// The distributor's read-ahead of hand-backs: it reads the producer's index into the
/// cached view and changes nothing else (no release, no item moved), `max` bounds only
/// the hint, and the items then pop in order, across the index wrap and the ring's end.
#[test]
fn refresh_and_prefetch_only_reads_the_index() {
    let (mut tx, mut rx) = with_start_index::<u64>(8, usize::MAX - 2).unwrap();
    assert_eq!(rx.refresh_and_prefetch(64), 0);
    assert_eq!(tx.push_burst(&[1, 2, 3, 4, 5]), 5);
    assert_eq!(rx.refresh_and_prefetch(2), 5);
    assert_eq!(rx.cached_tail.wrapping_sub(rx.head), 5, "the cached view");
    assert_eq!(rx.lines.stores(), 0, "nothing released");
    assert_eq!(tx.len(), 5, "nothing taken");
    let mut out = [0u64; 8];
    assert_eq!(rx.pop_burst(&mut out), 5);
    assert_eq!(out[..5], [1, 2, 3, 4, 5]);
    assert_eq!(tx.push_burst(&[6, 7, 8, 9, 10, 11, 12, 13]), 8);
    assert_eq!(rx.refresh_and_prefetch(64), 8);
    assert_eq!(rx.pop_burst(&mut out), 8);
    assert_eq!(out, [6, 7, 8, 9, 10, 11, 12, 13]);
    assert_eq!(rx.refresh_and_prefetch(64), 0);
}

#[test]
fn chunks_wrap_into_two_slices() {
    let (mut tx, mut rx) = channel::<u32>(4).unwrap();
    let _ = tx.push_burst(&[0, 1, 2]);
    assert_eq!(rx.pop_burst(&mut [0; 3]), 3);
    // head = tail = 3: a 4-slot chunk is 1 slot at the end + 3 at the start.
    let mut c = tx.write_chunk(4);
    let (a, b) = c.as_mut_slices();
    assert_eq!((a.len(), b.len()), (1, 3));
    for (i, s) in a.iter_mut().chain(b.iter_mut()).enumerate() {
        s.write(10 + i as u32);
    }
    // SAFETY: all four slots written above.
    unsafe { c.commit(4) };
    let rc = rx.read_chunk(4);
    assert_eq!(rc.as_slices(), (&[10][..], &[11, 12, 13][..]));
    rc.commit(3);
    assert_eq!(rx.pop(), Some(13));
}

/// `push_burst_from` and `pop_burst_into` move items as bytes, in two copies where the
/// run crosses the end of the buffer: every item arrives once, in order, and is dropped
/// once (by the receiver, by the `Vec` that kept what did not fit, or by the ring);
/// also across the index wrap and for zero-sized items.
#[test]
fn vec_bursts_move_each_item_once_across_the_buffer_end() {
    for start in [0, 3, usize::MAX - 5] {
        let drops = Rc::new(Cell::new(0));
        let (mut tx, mut rx) = with_start_index::<Tracked>(4, start).unwrap();
        let mut model = std::collections::VecDeque::new();
        let mut next = 0u64;
        let mut made = 0;
        for round in 0..12 {
            let n = [3usize, 5, 1, 0][round % 4];
            let mut v: Vec<Tracked> = (next..next + n as u64)
                .map(|i| Tracked(i, drops.clone()))
                .collect();
            made += n;
            let k = tx.push_burst_from(&mut v);
            assert_eq!(k, n.min(4 - model.len()));
            model.extend(next..next + k as u64);
            let left: Vec<u64> = v.iter().map(|t| t.0).collect();
            assert_eq!(left, (next + k as u64..next + n as u64).collect::<Vec<_>>());
            next += n as u64;
            let before = drops.get();
            drop(v);
            assert_eq!(drops.get(), before + n - k, "leftovers dropped once");
            let mut out = Vec::with_capacity(1); // grows inside the call
            out.push(Tracked(u64::MAX, drops.clone()));
            made += 1;
            let got = rx.pop_burst_into(&mut out, [2, 4, 3][round % 3]);
            let ids: Vec<u64> = out.iter().map(|t| t.0).collect();
            let want: Vec<u64> = core::iter::once(u64::MAX)
                .chain(model.drain(..got))
                .collect();
            assert_eq!(ids, want, "in order, after what `out` held");
            drop(out);
        }
        drop((tx, rx));
        assert_eq!(drops.get(), made, "every item dropped exactly once");
    }
    // Zero-sized items: nothing to copy, the counts still move.
    let (mut tx, mut rx) = channel::<()>(4).unwrap();
    let mut v = vec![(); 6];
    assert_eq!(tx.push_burst_from(&mut v), 4);
    assert_eq!(v.len(), 2);
    let mut out = Vec::new();
    assert_eq!(rx.pop_burst_into(&mut out, 3), 3);
    assert_eq!((out.len(), rx.len()), (3, 1));
}

#[test]
fn uncommitted_chunks_publish_and_release_nothing() {
    // Drops counted in a static (not through an Rc), so the value the test deliberately
    // leaks owns no heap memory (Miri checks for leaks).
    use std::sync::atomic::{AtomicUsize, Ordering as O};
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    #[derive(Debug)]
    struct D(u32);
    impl Drop for D {
        fn drop(&mut self) {
            DROPS.fetch_add(1, O::Relaxed);
        }
    }
    let (mut tx, mut rx) = channel::<D>(4).unwrap();
    {
        let mut c = tx.write_chunk(2);
        c.as_mut_slices().0[0].write(D(1));
        // dropped without commit: nothing published; the written value is not dropped
    }
    assert!(rx.is_empty());
    assert_eq!(DROPS.load(O::Relaxed), 0);
    tx.push(D(2)).unwrap(); // reuses the slot, no drop of the stale value
    assert_eq!(DROPS.load(O::Relaxed), 0);
    {
        let c = rx.read_chunk(1);
        assert_eq!(c.as_slices().0[0].0, 2);
    }
    assert_eq!(rx.len(), 1, "an uncommitted read chunk releases nothing");
    assert_eq!(DROPS.load(O::Relaxed), 0);
    rx.read_chunk(1).commit_all();
    assert_eq!(DROPS.load(O::Relaxed), 1);
    drop((tx, rx));
    assert_eq!(DROPS.load(O::Relaxed), 1);
}

#[test]
#[should_panic(expected = "only 1 slots were reserved")]
fn write_commit_beyond_reservation_panics() {
    let (mut tx, _rx) = channel::<u8>(1).unwrap();
    let c = tx.write_chunk(5);
    // SAFETY: never reached past the assertion; the panic is the point.
    unsafe { c.commit(2) };
}

#[test]
#[should_panic(expected = "only 0 items were lent")]
fn read_commit_beyond_loan_panics() {
    let (_tx, mut rx) = channel::<u8>(1).unwrap();
    rx.read_chunk(5).commit(1);
}

#[test]
fn leftovers_dropped_exactly_once_whichever_end_goes_last() {
    for producer_last in [false, true] {
        let drops = Rc::new(Cell::new(0));
        let (mut tx, mut rx) = channel::<Tracked>(8).unwrap();
        for i in 0..6 {
            tx.push(Tracked(i, drops.clone())).unwrap();
        }
        assert_eq!(rx.pop().map(|t| t.0), Some(0));
        assert_eq!(drops.get(), 1);
        if producer_last {
            drop(rx);
            assert_eq!(drops.get(), 1);
            assert!(tx.is_abandoned());
            drop(tx);
        } else {
            drop(tx);
            assert!(rx.is_abandoned());
            drop(rx);
        }
        assert_eq!(drops.get(), 6);
    }
}

#[test]
fn bulk_is_all_or_nothing_and_iterators_keep_leftovers() {
    let (mut tx, mut rx) = channel::<u8>(4).unwrap();
    assert!(tx.push_bulk(&[1, 2, 3]));
    assert!(!tx.push_bulk(&[4, 5]));
    assert_eq!(tx.len(), 3);
    let mut it = [4u8, 5, 6].into_iter();
    assert_eq!(tx.push_burst_iter(&mut it), 1);
    assert_eq!(it.as_slice(), &[5, 6]);
    let it = tx.push_bulk_iter([7u8]).unwrap_err();
    assert_eq!(it.len(), 1);
    let mut out = [0u8; 5];
    assert!(!rx.pop_bulk(&mut out));
    assert!(rx.pop_bulk(&mut out[..4]));
    assert_eq!(out[..4], [1, 2, 3, 4]);
    let mut v = vec![];
    assert!(!rx.pop_bulk_into(&mut v, 1));
    assert!(tx.push_bulk_iter(vec![8u8, 9]).is_ok());
    assert!(rx.pop_bulk_into(&mut v, 2));
    assert_eq!(v, [8, 9]);
}

#[test]
fn bulk_iter_with_lying_len_stores_what_it_yields() {
    struct Liar(u8);
    impl Iterator for Liar {
        type Item = u8;
        fn next(&mut self) -> Option<u8> {
            (self.0 < 2).then(|| {
                self.0 += 1;
                self.0
            })
        }
    }
    impl ExactSizeIterator for Liar {
        fn len(&self) -> usize {
            3 // claims 3, yields 2
        }
    }
    let (mut tx, mut rx) = channel::<u8>(4).unwrap();
    assert!(tx.push_bulk_iter(Liar(0)).is_ok());
    assert_eq!(rx.len(), 2);
    assert_eq!((rx.pop(), rx.pop(), rx.pop()), (Some(1), Some(2), None));
}

#[test]
fn pop_burst_with_panicking_closure_drops_nothing_twice() {
    let drops = Rc::new(Cell::new(0));
    let (mut tx, mut rx) = channel::<Tracked>(4).unwrap();
    for i in 0..3 {
        tx.push(Tracked(i, drops.clone())).unwrap();
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rx.pop_burst_with(3, |t| {
            if t.0 == 1 {
                panic!("worker bug");
            }
        })
    }));
    assert!(r.is_err());
    // Items 0 and 1 were handed to the closure (and dropped by it); item 2 remains.
    assert_eq!(drops.get(), 2);
    assert_eq!(rx.pop().map(|t| t.0), Some(2));
    drop((tx, rx));
    assert_eq!(drops.get(), 3);
}

#[test]
fn threads_pass_sequence_in_order() {
    let n: u64 = if cfg!(miri) { 300 } else { 200_000 };
    let (mut tx, mut rx) = channel::<u64>(16).unwrap();
    let t = std::thread::spawn(move || {
        let mut i = 0;
        while i < n {
            let burst: Vec<u64> = (i..(i + 1 + i % 7).min(n)).collect();
            i += tx.push_burst(&burst) as u64;
        }
    });
    let mut expect = 0;
    let mut buf = [0u64; 5];
    while expect < n {
        let k = rx.pop_burst(&mut buf[..1 + (expect % 5) as usize]);
        for &v in &buf[..k] {
            assert_eq!(v, expect);
            expect += 1;
        }
    }
    t.join().unwrap();
    assert!(rx.is_abandoned() && rx.is_empty());
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

/// A chunk iterator forgotten after it yielded items, with either release mode: the
/// consumer's drop stores the index past them, so each item is dropped exactly once
/// (by its taker or by the ring), never twice.
#[test]
fn forgotten_chunk_iterator_drops_nothing_twice() {
    for lazy in [false, true] {
        let drops = Rc::new(Cell::new(0));
        let (mut tx, mut rx) = channel::<Tracked>(8).unwrap();
        rx.set_lazy_release(lazy);
        for i in 0..5 {
            tx.push(Tracked(i, drops.clone())).unwrap();
        }
        assert_eq!(rx.pop().map(|t| t.0), Some(0));
        let mut it = rx.read_chunk(3).into_iter();
        assert_eq!(it.next().map(|t| t.0), Some(1));
        assert_eq!(it.next().map(|t| t.0), Some(2));
        core::mem::forget(it);
        assert_eq!(drops.get(), 3, "lazy: {lazy}");
        drop(rx);
        assert_eq!(drops.get(), 3, "the consumer's drop dropped nothing");
        drop(tx);
        assert_eq!(drops.get(), 5, "items 3 and 4 dropped by the ring, once");
    }
}

/// Eager pops (the default) make one index store each, and switching lazy release on
/// and off in between loses no release: every slot reaches the producer.
#[test]
fn eager_pops_store_once_and_mode_switches_release_everything() {
    let (mut tx, mut rx) = channel::<u32>(1024).unwrap();
    assert_eq!(tx.push_burst(&[1; 1024]), 1024);
    for k in 1..=3 {
        assert_eq!(rx.pop(), Some(1));
        assert_eq!(rx.lines.stores(), k, "one store per eager pop");
    }
    assert_eq!(tx.free(), 3);
    rx.set_lazy_release(true);
    for _ in 0..5 {
        assert_eq!(rx.pop(), Some(1));
    }
    assert_eq!((rx.lines.stores(), tx.free()), (3, 3), "five pending");
    rx.set_lazy_release(false);
    assert_eq!(
        (rx.lines.stores(), tx.free()),
        (4, 8),
        "released on the switch"
    );
    rx.release_pending();
    assert_eq!(rx.lines.stores(), 4, "nothing left to release");
    assert_eq!(rx.pop(), Some(1));
    assert_eq!((rx.lines.stores(), tx.free()), (5, 9));
    assert_eq!(rx.pop_burst(&mut [0; 0]), 0);
    assert_eq!(rx.lines.stores(), 5, "an empty burst stores nothing");
    assert_eq!(rx.pop_burst(&mut [0; 4]), 4);
    assert_eq!((rx.lines.stores(), tx.free()), (6, 13));
}

/// A chunk iterator forgotten after it took every item: its slots reach the producer at
/// the consumer's next release or read of `tail`, in either release mode, and turning
/// lazy release on after it does not count them as released.
#[test]
fn forgotten_iterator_slots_reach_the_producer() {
    for lazy_after in [false, true] {
        let (mut tx, mut rx) = channel::<u32>(64).unwrap();
        assert_eq!(tx.push_burst(&[1, 2, 3, 4]), 4);
        let mut it = rx.read_chunk(4).into_iter();
        while it.next().is_some() {}
        core::mem::forget(it);
        assert_eq!(tx.free(), 60);
        if lazy_after {
            rx.set_lazy_release(true);
        }
        rx.release_pending();
        assert_eq!(tx.free(), 64, "lazy after: {lazy_after}");
        assert_eq!(rx.pop(), None);
    }
    // The refill read releases them too.
    let (mut tx, mut rx) = channel::<u32>(4).unwrap();
    assert_eq!(tx.push_burst(&[1, 2, 3, 4]), 4);
    let mut it = rx.read_chunk(4).into_iter();
    while it.next().is_some() {}
    core::mem::forget(it);
    assert_eq!(rx.pop(), None);
    assert_eq!(tx.free(), 4);
}

/// A burst's release after eager pops stores even where `released`, left behind by those
/// pops, happens to equal the new `head` (after 2^32 pops on a 32-bit target; set here).
#[test]
fn a_burst_after_eager_pops_always_releases() {
    let (mut tx, mut rx) = channel::<u32>(4).unwrap();
    assert_eq!(tx.push_burst(&[1, 2, 3, 4]), 4);
    assert_eq!(rx.pop(), Some(1));
    rx.released = rx.head.wrapping_add(2);
    assert_eq!(rx.pop_burst(&mut [0; 2]), 2);
    assert_eq!(tx.free(), 3);
}

/// A chunk's iterator makes an eager end keep `released` while it is out (for good once
/// forgotten); dropped, it hands the end back to pops that store one index.
#[test]
fn a_chunk_iterator_tracks_releases_while_it_is_out() {
    let (mut tx, mut rx) = channel::<u32>(8).unwrap();
    assert_eq!(tx.push_burst(&[1, 2, 3, 4]), 4);
    let mut it = rx.read_chunk(2).into_iter();
    assert_eq!(it.next(), Some(1));
    drop(it);
    assert_eq!((rx.release_batch, tx.free()), (1, 5));
    let stores = rx.lines.stores();
    assert_eq!(rx.pop(), Some(2));
    assert_eq!(rx.lines.stores(), stores + 1);
    let mut it = rx.read_chunk(1).into_iter();
    assert_eq!(it.next(), Some(3));
    core::mem::forget(it);
    assert_eq!((rx.release_batch, rx.release_batch()), (EAGER_TRACKED, 1));
    assert_eq!(rx.pop(), Some(4), "pops go on, eager");
    assert_eq!((tx.free(), rx.head, rx.released), (8, 4, 4));
}

/// A caller's loop over a chunk's iterator that panics (an item's handling, here a
/// closure) unwinds through the iterator's drop: the items it took are released, the
/// rest stay in the ring, and the end is back to eager pops; nothing is dropped twice.
#[test]
fn a_panic_while_iterating_a_chunk_releases_what_was_taken() {
    let drops = Rc::new(Cell::new(0));
    let (mut tx, mut rx) = channel::<Tracked>(8).unwrap();
    for i in 0..4 {
        tx.push(Tracked(i, drops.clone())).unwrap();
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for t in rx.read_chunk(4) {
            if t.0 == 1 {
                panic!("handling item 1");
            }
        }
    }));
    assert!(r.is_err());
    assert_eq!(
        drops.get(),
        2,
        "items 0 and 1 dropped in the caller's hands"
    );
    assert_eq!((tx.free(), rx.release_batch), (6, 1));
    assert_eq!(rx.pop().map(|t| t.0), Some(2));
    drop((tx, rx));
    assert_eq!(drops.get(), 4);
}
