//! Index wrap: both rings started just below the wrap point of their counters (`usize` for
//! SPSC, `u64` for MPSC) through the test-only `with_start_index` constructors, and the
//! MPSC ring driven through more than 2^32 indices (a whole 32-bit wrap) by dropped empty
//! chunks while a cloned producer stays idle; the index-free `niche` ring on this target's
//! pointer width.
//!
//! CI runs this file natively and under Miri for `i686-unknown-linux-gnu` (32-bit `usize`).
//! Regression tests for index wrap-around, width assumptions and absurd sizes.
#![cfg(not(loom))]

use flowline::fifo::{mpsc, spsc};

/// A value whose drops are counted, so a double drop or a stale read shows.
#[derive(Debug)]
struct Token(u64, std::rc::Rc<std::cell::Cell<u64>>);
impl Drop for Token {
    fn drop(&mut self) {
        self.1.set(self.1.get() + 1);
    }
}

#[test]
fn spsc_runs_straddling_the_usize_wrap() {
    for start in [usize::MAX - 2, usize::MAX, 0usize.wrapping_sub(5)] {
        let drops = std::rc::Rc::new(std::cell::Cell::new(0));
        let (mut tx, mut rx) = spsc::with_start_index::<Token>(4, start).unwrap();
        let mut next = 0u64;
        let mut expect = 0u64;
        for round in 0..12 {
            while !tx.is_full() {
                tx.push(Token(next, drops.clone())).unwrap();
                next += 1;
            }
            assert_eq!(tx.len(), 4);
            let take = 1 + round % 4;
            let c = rx.read_chunk(take);
            let (a, b) = c.as_slices();
            for t in a.iter().chain(b) {
                assert_eq!(t.0, expect);
                expect += 1;
            }
            c.commit_all();
        }
        drop((tx, rx));
        assert_eq!(drops.get(), next, "every item dropped exactly once");
    }
}

/// Lazy release across the `usize` wrap: single pops leave slots pending (`released`
/// behind `head`) while the indices wrap. After every pop the producer sees exactly the
/// released room (a small model of the consumer's cached view and its pending slots), and
/// a consumer dropped with slots pending lets the final drop see its real index.
#[test]
fn spsc_lazy_release_across_the_usize_wrap() {
    const CAP: usize = 8;
    const BATCH: usize = 3;
    for start in [usize::MAX - 2, usize::MAX, 0usize.wrapping_sub(7)] {
        let drops = std::rc::Rc::new(std::cell::Cell::new(0));
        let (mut tx, mut rx) = spsc::with_release_batch::<Token>(CAP, start, BATCH).unwrap();
        let (mut next, mut expect) = (0u64, 0u64);
        // Items in the ring, items the consumer's cached view holds, popped but unreleased.
        let (mut len, mut cached, mut pending) = (0usize, 0usize, 0usize);
        for round in 0..12 {
            while !tx.is_full() {
                tx.push(Token(next, drops.clone())).unwrap();
                next += 1;
                len += 1;
            }
            assert_eq!(len + pending, CAP, "the producer filled what it saw free");
            for _ in 0..1 + round % 4 {
                if cached == 0 {
                    pending = 0; // released before the consumer looks again
                    cached = len;
                }
                assert_eq!(rx.pop().map(|t| t.0), Some(expect));
                expect += 1;
                len -= 1;
                cached -= 1;
                pending += 1;
                if pending == BATCH || cached == 0 {
                    pending = 0;
                }
                assert_eq!(tx.free(), CAP - len - pending);
            }
        }
        // Drop the consumer with slots pending (if any), then the producer.
        drop(rx);
        drop(tx);
        assert_eq!(drops.get(), next, "every item dropped exactly once");
    }
}

#[test]
fn mpsc_runs_straddling_the_u64_wrap() {
    // A run of 4 from u64::MAX - 1 covers MAX-1, MAX, 0, 1: the consumer's `valid_end - head`
    // must wrap (item 4: it overflowed, a debug panic).
    let drops = std::rc::Rc::new(std::cell::Cell::new(0));
    let (mut tx, mut rx) = mpsc::with_start_index::<Token>(4, u64::MAX - 1).unwrap();
    let mut tx2 = tx.clone();
    let mut next = 0u64;
    let mut expect = 0u64;
    for round in 0..16 {
        let items: Vec<Token> = (0..4).map(|i| Token(next + i, drops.clone())).collect();
        let p = if round % 2 == 0 { &mut tx } else { &mut tx2 };
        assert!(p.push_bulk_iter(items).is_ok(), "round {round}");
        next += 4;
        assert_eq!(rx.pop().map(|t| t.0), Some(expect));
        expect += 1;
        let c = rx.read_chunk(2);
        assert_eq!(c.len(), 2);
        let (a, b) = c.as_slices();
        assert_eq!(
            a.iter().chain(b).map(|t| t.0).collect::<Vec<_>>(),
            [expect, expect + 1]
        );
        c.commit_all();
        expect += 2;
        let mut v = Vec::new();
        assert!(rx.pop_bulk_into(&mut v, 1));
        assert_eq!(v[0].0, expect);
        expect += 1;
    }
    drop((tx, tx2, rx));
    assert_eq!(drops.get(), next);
}

/// A large ring, so a 32-bit lap is 256 chunks (cheap under Miri too: its descriptors come
/// from zeroed memory, and the items are bytes, copied and compared in bulk).
const CAP: usize = 1 << 24;
/// Dropped chunks of CAP that move the tail by 2^32 - CAP.
const LAP_CHUNKS: u64 = (1u64 << 32) / CAP as u64 - 1;

/// Item 2: a descriptor whose stamp was written 2^32 indices ago (here: by the one push at
/// `start`) must not be taken for a new run when the consumer reaches `start + 2^32`
/// before anything is published there. On 32-bit targets the first version compared
/// 32-bit stamps and handed out the consumed item again (use after free under Miri).
#[test]
fn stale_descriptor_stamp_after_a_whole_32_bit_lap() {
    for start in [0u64, u64::MAX - (1 << 31)] {
        let (mut tx, mut rx) = mpsc::with_start_index::<u8>(CAP, start).unwrap();
        assert!(tx.push(7).is_ok());
        assert_eq!(rx.pop(), Some(7));
        for _ in 0..LAP_CHUNKS {
            drop(tx.write_chunk(CAP)); // published empty: CAP indices, no items
            assert!(rx.pop().is_none());
        }
        drop(tx.write_chunk(CAP - 1));
        // head is now start + 2^32: nothing was published there in this lap.
        assert!(
            rx.pop().is_none(),
            "the consumer took a run from the last lap"
        );
        assert!(tx.push(8).is_ok());
        assert_eq!(rx.pop(), Some(8));
    }
}

/// Item 3: a cloned producer stays idle while the other moves the tail by exactly 2^32
/// (dropped empty chunks, then live items up to one free slot). The idle producer's cached
/// view of the consumer's index is then a whole 32-bit lap old: its bulk push of 2 must
/// fail. On 32-bit targets the first version let it overwrite unconsumed items.
#[test]
fn idle_producer_after_a_whole_32_bit_lap() {
    // `vec![byte; n]` is one memset, also under Miri.
    let fill = vec![0x5Au8; CAP - 1];
    for start in [0u64, u64::MAX - (1 << 31)] {
        let (mut busy, mut rx) = mpsc::with_start_index::<u8>(CAP, start).unwrap();
        let mut idle = busy.clone();
        // The idle handle's cached head is `start`.
        assert!(idle.push(0).is_ok());
        assert_eq!(rx.pop(), Some(0));
        for _ in 0..LAP_CHUNKS {
            drop(busy.write_chunk(CAP));
            assert!(rx.pop().is_none());
        }
        // Live items up to one free slot: the tail is now start + 2^32.
        assert!(busy.push_bulk(&fill));
        assert_eq!(busy.free(), 1);
        assert!(
            !idle.push_bulk(&[0xAA, 0xBB]),
            "bulk push of 2 into a ring with 1 free slot succeeded"
        );
        assert!(idle.push(0xCC).is_ok());
        assert!(idle.push(0xDD).is_err());
        // One contiguous stretch: the bulk run and the idle producer's item after it.
        let c = rx.read_chunk(2 * CAP);
        assert_eq!(c.len(), CAP);
        let (a, b) = c.as_slices();
        let all = [a, b].concat();
        assert!(
            all[..CAP - 1] == fill[..] && all[CAP - 1] == 0xCC,
            "items intact"
        );
        c.commit_all();
        assert!(rx.pop().is_none());
    }
}

/// The blocking operations across the wrap: a producer thread waits for room (the ring holds
/// 4) while the consumer waits for items, both rings started 5 below the wrap point, so the
/// waits' re-checks (`tail - head` against the capacity, `tail != head`) run on both sides
/// of it.
#[cfg(feature = "std")]
#[test]
fn waiting_operations_across_the_wrap() {
    use flowline::fifo::Wait;
    use std::time::Duration;
    const T: Duration = Duration::from_secs(30);
    const N: u64 = 40;

    /// Producer thread: half the items one at a time, half in bursts, all waiting for
    /// room; consumer: one at a time, then bursts of 3 after `wait_for_items`. Everything arrives in order, then the wait ends with `Disconnected`.
    macro_rules! drive {
        ($tx:expr, $rx:expr) => {{
            let (mut tx, mut rx) = ($tx, $rx);
            let t = std::thread::spawn(move || {
                for i in 0..N / 2 {
                    tx.push_wait(i, T).unwrap();
                }
                let items: Vec<u64> = (N / 2..N).collect();
                let mut sent = 0;
                while sent < items.len() {
                    sent += tx.push_burst_wait(&items[sent..], T).unwrap();
                }
            });
            let mut got = Vec::new();
            while got.len() < (N / 2) as usize {
                got.push(rx.pop_wait(T).unwrap());
            }
            while got.len() < N as usize {
                assert!(rx.wait_for_items(T).unwrap() > 0);
                rx.pop_burst_wait(&mut got, 3, T).unwrap();
            }
            t.join().unwrap();
            assert_eq!(got, (0..N).collect::<Vec<_>>());
            assert_eq!(rx.pop_wait(T), Err(flowline::wait::WaitError::Disconnected));
        }};
    }
    let (tx, rx) = spsc::build::<u64, Wait>(4, usize::MAX - 5, None).unwrap();
    drive!(tx, rx);
    let (tx, rx) = mpsc::build::<u64, Wait>(4, u64::MAX - 5).unwrap();
    drive!(tx, rx);
}

/// The index-free ring on this target's pointer width: positions are private and only
/// masked (the unit test `positions_wrap_past_usize_max` starts them below the wrap), so
/// here the 32-bit build itself is checked: the widest non-zero integer of the target and
/// owned pointers round-trip through slots of one pointer each, over many laps of a ring
/// smaller and one larger than a cache line of slots, leftovers dropped once.
#[test]
fn niche_ring_on_this_pointer_width() {
    use flowline::fifo::niche;
    use std::num::NonZeroUsize;
    for cap in [2usize, 64] {
        let (mut tx, mut rx) = niche::channel::<NonZeroUsize>(cap).unwrap();
        for lap in 0..5usize {
            let vals: Vec<NonZeroUsize> = (0..cap)
                .map(|i| NonZeroUsize::new(usize::MAX - lap - i).unwrap())
                .collect();
            assert!(tx.push_bulk(&vals));
            assert!(tx.is_full());
            let mut out = vec![NonZeroUsize::MIN; cap];
            assert!(rx.pop_bulk(&mut out));
            assert_eq!(out, vals);
        }
        let drops = std::rc::Rc::new(std::cell::Cell::new(0));
        let (mut tx, mut rx) = niche::channel::<Box<Token>>(cap).unwrap();
        let total = 3 * cap as u64 + 1;
        let mut expect = 0;
        for i in 0..total {
            tx.push(Box::new(Token(i, drops.clone()))).unwrap();
            if tx.is_full() {
                assert_eq!(rx.pop().map(|t| t.0), Some(expect));
                expect += 1;
            }
        }
        assert_eq!(drops.get(), expect);
        drop((tx, rx));
        assert_eq!(drops.get(), total, "the leftovers dropped once");
    }
}

/// `push_burst_from` and a read chunk's `into_iter` on runs that straddle the wrap, on
/// both index rings, with a loop over the chunk that panics on its second item: the items
/// before it are gone (taken, their slots released), that one is dropped by the unwind, the
/// rest stay in the ring in order; every item is dropped exactly once.
#[test]
fn vec_bursts_and_chunk_iterators_across_the_wrap() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    type Drops = std::rc::Rc<std::cell::Cell<u64>>;
    fn tokens(from: u64, n: u64, drops: &Drops) -> Vec<Token> {
        (from..from + n).map(|i| Token(i, drops.clone())).collect()
    }
    for k in 0..6u64 {
        let drops: Drops = Default::default();
        let (mut tx, mut rx) = spsc::with_start_index::<Token>(4, usize::MAX - k as usize).unwrap();
        let mut v = tokens(0, 6, &drops);
        assert_eq!(tx.push_burst_from(&mut v), 4);
        assert_eq!(v.iter().map(|t| t.0).collect::<Vec<_>>(), [4, 5]);
        let r = catch_unwind(AssertUnwindSafe(|| {
            for t in rx.read_chunk(4) {
                assert!(t.0 != 1, "the loop body panics on item 1");
            }
        }));
        assert!(r.is_err());
        assert_eq!(drops.get(), 2, "items 0 and 1 dropped, once each");
        assert_eq!(
            tx.push_burst_from(&mut v),
            2,
            "the two taken slots were released"
        );
        let rest: Vec<u64> = rx.read_chunk(4).into_iter().map(|t| t.0).collect();
        assert_eq!(rest, [2, 3, 4, 5]);
        drop((tx, rx, v));
        assert_eq!(drops.get(), 6);

        let drops: Drops = Default::default();
        let (mut tx, mut rx) = mpsc::with_start_index::<Token>(4, u64::MAX - k).unwrap();
        let mut v = tokens(0, 6, &drops);
        assert_eq!(tx.push_burst_from(&mut v), 4);
        let r = catch_unwind(AssertUnwindSafe(|| {
            for t in rx.read_chunk(4) {
                assert!(t.0 != 1, "the loop body panics on item 1");
            }
        }));
        assert!(r.is_err());
        assert_eq!(drops.get(), 2, "items 0 and 1 dropped, once each");
        assert_eq!(
            tx.push_burst_from(&mut v),
            2,
            "the two taken slots were released"
        );
        let mut rest = Vec::new();
        while let Some(t) = rx.pop() {
            rest.push(t.0);
        }
        assert_eq!(rest, [2, 3, 4, 5]);
        drop((tx, rx, v));
        assert_eq!(drops.get(), 6);
    }
}
