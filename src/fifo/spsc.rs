//! Bounded single-producer single-consumer ring.
//!
//! [`channel`] makes a ring and returns its two ends: a [`Producer`] and a [`Consumer`],
//! each `Send` (move it to its thread) and neither `Sync` (one thread per end at a time).
//!
//! # Capacity
//!
//! The requested capacity is rounded up to the next power of two and every slot is usable:
//! `channel::<T>(1000)` holds 1024 items. Indices run freely (wrapping `usize` counters);
//! the slot of index `i` is `i & (slots - 1)`.
//!
//! # Cache lines
//!
//! The producer's index (`tail`) and the consumer's index (`head`) are each alone on a
//! `CachePadded` line. Each end keeps its own index and the buffer pointer in its own
//! struct, plus a cached copy of the other end's index, and reads the remote line only when
//! that copy says full (producer) or empty (consumer). Each end's struct is itself aligned
//! to 128 bytes, so the state it rewrites on every call never shares a line with the other
//! end's, wherever the two handles are stored (measured: +5-10% single-item throughput
//! when the handles would otherwise be allocated side by side). One burst of n items costs the
//! producer n slot writes and one store to its own index line, and at most one read of
//! the consumer's line; the consumer likewise. Slots are transferred as whole lines (8
//! eight-byte items per 64-byte line).
//!
//! # Operations
//!
//! | | producer | consumer |
//! | --- | --- | --- |
//! | single | [`push`](Producer::push) | [`pop`](Consumer::pop), [`peek`](Consumer::peek) |
//! | burst (as many as fit) | [`push_burst`](Producer::push_burst) (`T: Copy`), [`push_burst_iter`](Producer::push_burst_iter) | [`pop_burst`](Consumer::pop_burst) (`T: Copy`), [`pop_burst_into`](Consumer::pop_burst_into) |
//! | bulk (all or nothing) | [`push_bulk`](Producer::push_bulk) (`T: Copy`), [`push_bulk_iter`](Producer::push_bulk_iter) | [`pop_bulk`](Consumer::pop_bulk) (`T: Copy`), [`pop_bulk_into`](Consumer::pop_bulk_into) |
//! | zero-copy | [`write_chunk`](Producer::write_chunk) | [`read_chunk`](Consumer::read_chunk) |
//! | release now | (every call publishes) | [`release_pending`](Consumer::release_pending) |
//!
//! Items still in the ring when both ends are gone are dropped exactly once.
//!
//! # Lazy release
//!
//! The producer's publication of new items is immediate: every `push` (and every burst or
//! chunk commit) stores its index, so a waiting consumer sees an item as soon as it is in.
//! The consumer's release of slots is immediate for bursts, bulk pops and read chunks (one
//! store per call), but single [`pop`](Consumer::pop)s release their slots in groups of
//! [`release_batch_for`]`(slots)` (an eighth of the ring, at most 16; rings of up to 15
//! slots release every pop), and in any case when a pop takes the last item the consumer
//! knows of, before it reads the producer's index for more, in
//! [`release_pending`](Consumer::release_pending), and when it is dropped. So the consumer
//! writes its index line once per group instead of once per item, and a producer that
//! finds the ring full reads a line that changes once per group, not one it steals from
//! the consumer on every pop.
//!
//! The cost: after single pops, the producer may see up to `release_batch - 1` fewer free
//! slots than there are (its [`len`](Producer::len), [`free`](Producer::free) and `push`
//! results count them as occupied; the consumer's own `len`, `free` and `is_full` count
//! them as free) until the consumer releases them. A consumer that keeps popping releases
//! them, and so does one that pops everything it has seen. **One pattern needs a call:** a
//! thread that stops popping while items it has seen remain, and then waits for the
//! producer to have room (for instance two threads forwarding to each other over two full
//! rings, each popping one item and then spinning on `push` into the other ring), must call
//! [`release_pending`](Consumer::release_pending) before it waits, or both may wait
//! forever.
//!
//! # Polite polling
//!
//! By default only for reads that ask for at least 256 bytes of items
//! ([`PolitePolling::LargeReads`]: 32 `u64`s, 4 packets of 64 bytes); [`Consumer::set_polite`]
//! turns it off or on for every read. A consumer that trails a streaming producer closely
//! finds a few new items each time it reads the producer's index, and each read takes the
//! index line away from the producer, which rewrites it on every publication. With polite
//! polling, a consumer whose last reads of the index each found new items, and which has
//! nothing left to take, first waits 16 spin-loop hints (about 300 ns on this project's
//! test machine, whose `pause` takes about 20 ns; the length of a `pause` varies by CPU)
//! before it reads the index again, so that one transfer of the line brings a batch.
//!
//! **Why large reads only.** On the machines measured, the pause sped up bursts of 32 when
//! the cores were far apart and changed nothing when they were near, while it slowed
//! bursts of 8 and single pops, and lengthened the push-to-pop time under a steady load;
//! the figures are in `docs/performance-notes.md` in the repository ("Polite polling").
//!
//! A read that asks for a line's worth or two gains little from a batch and pays the
//! pause in full; one that asks for four lines or more gets them in one transfer of the
//! index line. Turn it [`On`](PolitePolling::On) for small reads only where your own
//! measurement shows a gain and the latency is affordable, and
//! [`Off`](PolitePolling::Off) where a consumer polls many rings in turn.
//!
//! **The gain depends on the CPU.** On a 16-core Intel Xeon guest, [`On`](PolitePolling::On)
//! moved single items 2-4x faster than the default and bursts of 8 up to 3x faster, while
//! the median push-to-pop time grew about 2x. Measure on yours.
//!
//! Only reads that may pause (by mode and size) feed the pause's bookkeeping: a read too
//! small to pause goes straight to the producer's index, the path of a ring without
//! polite polling, and its gains never count towards the pauses of the large reads.
//!
//! What it never changes: a pop or burst that finds the cached view used up always reads
//! the index before it reports the ring empty, so nothing that is in the ring is missed
//! (a pop right after a push on the same thread gets the item). A consumer that waits for
//! items one at a time (the ring empty between them, as in a request-response exchange)
//! finds nothing at the read before each item and never pauses, so its round trip is
//! unchanged. **What it costs: latency under a steady load.** While this end trails a
//! producer, an item pushed into a ring this end has just drained waits out the pause, and
//! a consumer that pauses settles with a batch in the ring: with one item pushed every
//! 40 ns the median push-to-pop time was about 2.5x longer with the pause. The pause stops
//! being used when it does not pay off: a paused read pays off if it finds at least 8 new
//! items and at least twice what the last read without a pause (made with the cached view
//! used up) found, and each one that does not doubles the run of fruitful reads needed
//! before the next pause (up to 4096). So a producer on the consumer's own thread, or one
//! slower than the consumer, makes pauses rare: 11 in the first 4105 reads, then one in
//! 4097. **Known gap:** batches of varying size from the consumer's own thread
//! (alternating 8 and 16, say) make some pauses look paid off (a 16 after an 8). Single
//! pops, bursts, bulk pops and read chunks all pause alike when the mode lets them (the
//! size a read asks for, not what it finds, decides), and only with the cached view used
//! up; [`wait_for_items`](Consumer::wait_for_items) never pauses. It is the
//! consumer's own state: no shared write, nothing in the ring's protocol changes.
//!
//! # Example
//!
//! ```
//! use flowline::fifo::spsc;
//!
//! let (mut tx, mut rx) = spsc::channel::<u64>(1024).unwrap();
//! let t = std::thread::spawn(move || {
//!     let packets: Vec<u64> = (0..10_000).collect();
//!     let mut sent = 0;
//!     while sent < packets.len() {
//!         sent += tx.push_burst(&packets[sent..(sent + 32).min(packets.len())]);
//!     }
//! });
//! let mut buf = [0u64; 32];
//! let mut next = 0;
//! while next < 10_000 {
//!     let n = rx.pop_burst(&mut buf);
//!     for &p in &buf[..n] {
//!         assert_eq!(p, next);
//!         next += 1;
//!     }
//! }
//! t.join().unwrap();
//! ```

use core::fmt;
use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ptr;

use crossbeam_utils::CachePadded;

pub use super::polite::PolitePolling;
use super::polite::{self, Polite};
#[cfg(feature = "std")]
use super::Wait;
use super::{CapacityError, NoWait, WaitMode};
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::{AccessTracker, Arc, HandleArc};
#[cfg(feature = "std")]
use crate::wait::{self, PushWaitError, Sleepers, WaitError, WaitStrategy};
use alloc::vec::Vec;
#[cfg(feature = "std")]
use std::time::Duration;

#[cfg(feature = "async")]
async_waits!(spsc);

/// Makes a ring of at least `capacity` slots (rounded up to a power of two).
///
/// # Errors
///
/// [`CapacityError::Zero`] for 0, [`CapacityError::TooLarge`] when the rounded capacity
/// overflows the index space or the address space for `T`, and
/// [`CapacityError::AllocFailed`] when the allocator refuses (no abort on huge requests).
///
/// ```
/// let (tx, rx) = flowline::fifo::spsc::channel::<u32>(3).unwrap();
/// assert_eq!(tx.capacity(), 4);
/// assert_eq!(rx.capacity(), 4);
/// ```
pub fn channel<T>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    build(capacity, 0, None)
}

/// As [`channel`], for a ring whose ends can also wait: [`Producer::push_wait`],
/// [`Consumer::pop_wait`] and their burst forms (see [`crate::wait`]). Every publication
/// of such a ring (one per push, burst or chunk commit) also checks whether the other end
/// sleeps: a load of a line nobody writes while both ends run, and a predictable branch.
///
/// # Errors
///
/// As [`channel`].
///
/// ```
/// use std::time::Duration;
/// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u32>(8).unwrap();
/// let t = std::thread::spawn(move || tx.push_wait(7, Duration::from_secs(30)));
/// assert_eq!(rx.pop_wait(Duration::from_secs(30)), Ok(7));
/// t.join().unwrap().unwrap();
/// ```
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
#[allow(clippy::type_complexity)]
pub fn waitable<T>(
    capacity: usize,
) -> Result<(Producer<T, Wait>, Consumer<T, Wait>), CapacityError> {
    build(capacity, 0, None)
}

/// **Testing only, not for production:** as [`channel`], with both free-running indices
/// starting at `start`, so that tests (this crate's and outside suites) can start a ring
/// just below the wrap point of its `usize` counters, e.g. `usize::MAX - 3`. The ring
/// behaves exactly as one that has moved `start` items. Hidden from the docs and outside
/// any semver promise.
#[doc(hidden)]
pub fn with_start_index<T>(
    capacity: usize,
    start: usize,
) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    build(capacity, start, None)
}

/// **Testing only, not for production:** as [`with_start_index`], with single pops
/// releasing their slots in groups of `release_batch` (clamped to 1..=slots) instead of the
/// default ([`release_batch_for`]), so that tests can exercise lazy release on small rings.
/// Hidden from the docs and outside any semver promise.
#[doc(hidden)]
pub fn with_release_batch<T>(
    capacity: usize,
    start: usize,
    release_batch: usize,
) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    build(capacity, start, Some(release_batch))
}

/// The largest group in which single pops release their slots by default: 16 slots, two
/// 64-byte lines of 8-byte items. Groups of 8-32 ran at about rtrb's speed; groups of 128
/// left the producer finding the ring full while it waited for a group to be released
/// (`docs/performance-notes.md` in the repository, "Lazy release of single pops").
pub const MAX_RELEASE_BATCH: usize = 16;

/// How many slots single pops consume before releasing them to the producer, for a ring of
/// `slots` slots: an eighth of the ring, at most [`MAX_RELEASE_BATCH`], at least 1 (rings
/// of up to 15 slots release every pop). See "Lazy release" in the module docs.
///
/// ```
/// use flowline::fifo::spsc::release_batch_for;
/// assert_eq!((release_batch_for(8), release_batch_for(64), release_batch_for(1024)), (1, 8, 16));
/// ```
pub const fn release_batch_for(slots: usize) -> usize {
    let b = slots / 8;
    if b == 0 {
        1
    } else if b > MAX_RELEASE_BATCH {
        MAX_RELEASE_BATCH
    } else {
        b
    }
}

/// **Testing only, not for production:** [`with_release_batch`] for either [`WaitMode`]
/// (`None`: the default batch), so that tests can start a [`waitable`] ring near the wrap
/// point. Hidden from the docs and outside any semver promise.
#[doc(hidden)]
#[allow(clippy::type_complexity)]
pub fn build<T, W: WaitMode>(
    capacity: usize,
    start: usize,
    release_batch: Option<usize>,
) -> Result<(Producer<T, W>, Consumer<T, W>), CapacityError> {
    let slots = CapacityError::slots_for(capacity, core::mem::size_of::<T>())?;
    let release_batch = release_batch
        .unwrap_or(release_batch_for(slots))
        .clamp(1, slots);
    let buf = super::alloc_slots::<T>(slots).ok_or(CapacityError::AllocFailed {
        slots,
        bytes: slots.saturating_mul(core::mem::size_of::<T>()),
    })?;
    // Before the sleepers are made: they read whether the barriers are asymmetric.
    #[cfg(feature = "std")]
    if W::WAITS {
        wait::register();
    }
    let shared = Arc::new(Shared {
        tail: CachePadded::new(Index::new(start)),
        head: CachePadded::new(Index::new(start)),
        producer_gone: AtomicBool::new(false),
        consumer_gone: AtomicBool::new(false),
        buf,
        slots,
        tracker: AccessTracker::new(slots),
        _owns: PhantomData,
    });
    let producer = Producer {
        buf,
        mask: slots - 1,
        tail: start,
        cached_head: start,
        #[cfg(feature = "std")]
        strategy: WaitStrategy::default(),
        #[cfg(feature = "async")]
        coop: wait::Coop::new(),
        shared: ManuallyDrop::new(HandleArc::new(Arc::clone(&shared))),
        _mode: PhantomData,
        #[cfg(any(test, flowline_lines))]
        stores: 0,
        #[cfg(any(test, flowline_lines))]
        fresh_loads: 0,
    };
    let consumer = Consumer {
        buf,
        mask: slots - 1,
        head: start,
        cached_tail: start,
        released: start,
        polite: Polite::new(),
        polite_mode: PolitePolling::default(),
        polite_min: PolitePolling::default().min_want(core::mem::size_of::<T>()),
        release_batch,
        #[cfg(feature = "std")]
        strategy: WaitStrategy::default(),
        #[cfg(feature = "async")]
        coop: wait::Coop::new(),
        shared: ManuallyDrop::new(HandleArc::new(shared)),
        _mode: PhantomData,
        #[cfg(any(test, flowline_lines))]
        stores: 0,
        #[cfg(any(test, flowline_lines))]
        fresh_loads: 0,
    };
    Ok((producer, consumer))
}

/// The state both ends share. `tail` and `head` are each alone on a padded line; the rest
/// is read only at creation, by `is_abandoned` and at drop.
struct Shared<T> {
    /// Index one past the last published item. Written by the producer only. On its line
    /// (with `std`): a consumer sleeping until items arrive (`pop_wait`), whose word is
    /// written only when it goes to sleep or wakes and read after every publication of
    /// `tail` by a waitable ring (never by a `channel` ring).
    tail: CachePadded<Index>,
    /// Index of the next item to consume. Written by the consumer only. On its line: a
    /// producer sleeping until room appears (`push_wait`), likewise.
    head: CachePadded<Index>,
    producer_gone: AtomicBool,
    consumer_gone: AtomicBool,
    buf: *mut MaybeUninit<T>,
    slots: usize,
    tracker: AccessTracker,
    _owns: PhantomData<T>,
}

/// A ring index: with `std`, with the sleepers its stores wake on its line.
#[cfg(feature = "std")]
type Index = wait::WakingIndex;
#[cfg(not(feature = "std"))]
type Index = AtomicUsize;

#[cfg(feature = "std")]
impl<T> Shared<T> {
    /// A consumer waiting for items (`pop_wait`, async pops).
    #[inline(always)]
    fn items(&self) -> &Sleepers {
        self.tail.sleepers()
    }

    /// A producer waiting for room (`push_wait`, async pushes).
    #[inline(always)]
    fn room(&self) -> &Sleepers {
        self.head.sleepers()
    }
}

// SAFETY: the shared state only hands `T` values from the producer's thread to the
// consumer's (never shares a `&T` between threads: each end is !Sync), so `T: Send`
// suffices. The raw buffer pointer is owned by this struct and freed once, in `Drop`.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above; concurrent access from the two ends is to disjoint slots, ordered by the
// Release/Acquire index protocol.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        /// Frees the buffer last, also if an item's destructor panics.
        struct FreeBuf<T>(*mut MaybeUninit<T>, usize);
        impl<T> Drop for FreeBuf<T> {
            fn drop(&mut self) {
                // SAFETY: `buf` came from `alloc_slots` of `slots` elements in `build`
                // and is freed only here.
                unsafe { super::free_slots(self.0, self.1) };
            }
        }
        let _free = FreeBuf(self.buf, self.slots);
        // Both ends are gone (this is the last Arc), so the indices are final.
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        let n = tail.wrapping_sub(head);
        let mask = self.slots - 1;
        self.tracker.write_each(n, |k| head.wrapping_add(k) & mask);
        let (first, second) = runs(head, n, mask);
        // SAFETY: slots in [head, tail) hold initialised items that were published and not
        // consumed (at most `slots` of them, as two in-bounds runs); each is dropped once
        // here and the buffer is freed right after, by `_free`.
        unsafe {
            super::drop_runs(
                ptr::slice_from_raw_parts_mut(self.buf.add(head & mask).cast::<T>(), first),
                ptr::slice_from_raw_parts_mut(self.buf.cast::<T>(), second),
            )
        };
    }
}

/// The writing end of an SPSC ring.
///
/// ```
/// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
/// tx.push(1).unwrap();
/// assert_eq!(tx.len(), 1);
/// ```
#[repr(align(128))]
pub struct Producer<T, W: WaitMode = NoWait> {
    buf: *mut MaybeUninit<T>,
    mask: usize,
    /// This end's own index (the published `tail` equals it between calls).
    tail: usize,
    /// Last value of `head` read from the consumer's line.
    cached_head: usize,
    /// How `push_wait` waits.
    #[cfg(feature = "std")]
    strategy: WaitStrategy,
    /// The async futures' cooperative budget (`set_async_budget`).
    #[cfg(feature = "async")]
    coop: wait::Coop,
    /// The ring's shared state (a [`HandleArc`]: see why there); given up in `Drop`.
    shared: ManuallyDrop<HandleArc<Shared<T>>>,
    /// Whether publications check for a sleeper (see [`WaitMode`]).
    _mode: PhantomData<fn() -> W>,
    /// Stores of `tail` so far (unit tests check that nothing is rewritten in vain).
    #[cfg(any(test, flowline_lines))]
    stores: usize,
    /// Loads of `head` that found it moved since the last one: each took the consumer's
    /// index line (kept under `--cfg flowline_lines` for `line_counts`).
    #[cfg(any(test, flowline_lines))]
    fresh_loads: usize,
}

// SAFETY: the producer may move to another thread with its `T`s; it is not `Sync`, so only
// one thread uses it at a time (the raw pointer makes it !Sync).
unsafe impl<T: Send, W: WaitMode> Send for Producer<T, W> {}

/// The reading end of an SPSC ring.
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
/// tx.push(1).unwrap();
/// assert_eq!(rx.pop(), Some(1));
/// ```
#[repr(align(128))]
pub struct Consumer<T, W: WaitMode = NoWait> {
    buf: *mut MaybeUninit<T>,
    mask: usize,
    /// This end's own index (the published `head` trails it by less than
    /// `release_batch` between calls: see "Lazy release").
    head: usize,
    /// Last value of `tail` read from the producer's line.
    cached_tail: usize,
    /// The `head` value last stored to the shared line; single pops leave `head` ahead of
    /// it by less than `release_batch`.
    released: usize,
    /// Single pops release their slots in groups of this many (1: every pop).
    release_batch: usize,
    /// When a read of `tail` waits first (see "Polite polling").
    polite: Polite,
    /// Which reads may wait politely.
    polite_mode: PolitePolling,
    /// The fewest items a read must ask for to wait politely: `polite_mode`'s
    /// [`PolitePolling::min_want`] (`usize::MAX` when off).
    polite_min: usize,
    /// How `pop_wait` waits.
    #[cfg(feature = "std")]
    strategy: WaitStrategy,
    /// The async futures' cooperative budget (`set_async_budget`).
    #[cfg(feature = "async")]
    coop: wait::Coop,
    /// The ring's shared state (a [`HandleArc`]: see why there); given up in `Drop`.
    shared: ManuallyDrop<HandleArc<Shared<T>>>,
    /// Whether publications check for a sleeper (see [`WaitMode`]).
    _mode: PhantomData<fn() -> W>,
    /// Stores of `head` so far (unit tests check that nothing is rewritten in vain).
    #[cfg(any(test, flowline_lines))]
    stores: usize,
    /// Loads of `tail` that found it moved since the last one.
    #[cfg(any(test, flowline_lines))]
    fresh_loads: usize,
}

// SAFETY: as for `Producer`.
unsafe impl<T: Send, W: WaitMode> Send for Consumer<T, W> {}

/// Splits `n` slots starting at index `start` into the lengths of the (at most) two
/// contiguous runs of a ring of `mask + 1` slots.
#[inline(always)]
fn runs(start: usize, n: usize, mask: usize) -> (usize, usize) {
    let first = n.min(mask + 1 - (start & mask));
    (first, n - first)
}

impl<T, W: WaitMode> Producer<T, W> {
    /// Index stores this end made (publications of `tail`) and loads of the consumer's
    /// index that found it moved (each a transfer of that line to this core), counted
    /// under `--cfg flowline_lines` for the distributor's line counts.
    #[cfg(flowline_lines)]
    pub(crate) fn line_counts(&self) -> (usize, usize) {
        (self.stores, self.fresh_loads)
    }

    /// Free slots, reloading the consumer's index only if the cached view has fewer than
    /// `want`.
    #[inline(always)]
    fn free_for(&mut self, want: usize) -> usize {
        let cap = self.mask + 1;
        let free = cap - self.tail.wrapping_sub(self.cached_head);
        if free >= want {
            return free;
        }
        // Acquire: pairs with the consumer's Release store of `head`, so its reads (and
        // drops) of the slots it released happen before this end overwrites them.
        let head = self.shared.head.load(Ordering::Acquire);
        #[cfg(any(test, flowline_lines))]
        {
            self.fresh_loads += usize::from(head != self.cached_head);
        }
        self.cached_head = head;
        cap - self.tail.wrapping_sub(self.cached_head)
    }

    #[inline(always)]
    fn slot(&self, index: usize) -> *mut MaybeUninit<T> {
        // SAFETY: `index & mask` is below the slot count, so the result is in bounds of the
        // allocation.
        unsafe { self.buf.add(index & self.mask) }
    }

    /// Makes `n` more written slots visible to the consumer. Nothing to publish (a burst
    /// into a full ring, an empty chunk commit) stores nothing: rewriting the value already
    /// there would still take the index line from the consumer that polls it.
    #[inline(always)]
    fn publish(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.tail = self.tail.wrapping_add(n);
        #[cfg(any(test, flowline_lines))]
        {
            self.stores += 1;
        }
        // Release: pairs with the consumer's Acquire load of `tail`, so the slot writes
        // before this store are visible to it.
        self.shared.tail.store(self.tail, Ordering::Release);
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.tail.notify();
        }
    }

    /// Appends `value`, or gives it back if the ring is full.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel(1).unwrap();
    /// assert_eq!(tx.push(1), Ok(()));
    /// assert_eq!(tx.push(2), Err(2));
    /// ```
    #[inline]
    pub fn push(&mut self, value: T) -> Result<(), T> {
        if self.free_for(1) == 0 {
            return Err(value);
        }
        self.shared.tracker.write(self.tail & self.mask);
        // SAFETY: the slot at `tail` is free (the consumer released it, Acquire above) and
        // only this end writes free slots.
        unsafe { (*self.slot(self.tail)).write(value) };
        self.publish(1);
        Ok(())
    }

    /// Reserves up to `n` free slots to fill in place (fewer if fewer are free; possibly
    /// none). Nothing is visible to the consumer until [`WriteChunk::commit`].
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
    /// let mut chunk = tx.write_chunk(3);
    /// let (a, b) = chunk.as_mut_slices();
    /// for (i, s) in a.iter_mut().chain(b.iter_mut()).enumerate() {
    ///     s.write(i as u32);
    /// }
    /// // SAFETY: all three slots were written just above.
    /// unsafe { chunk.commit(3) };
    /// assert_eq!(rx.pop(), Some(0));
    /// ```
    #[inline]
    pub fn write_chunk(&mut self, n: usize) -> WriteChunk<'_, T, W> {
        let len = self.free_for(n).min(n);
        WriteChunk {
            producer: self,
            len,
        }
    }

    /// Burst: copies as many items from the front of `items` as fit, publishes them with one
    /// index store, and returns how many.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert_eq!(tx.push_burst(&[1, 2, 3]), 3);
    /// assert_eq!(tx.push_burst(&[4, 5, 6]), 1);
    /// ```
    #[inline(always)]
    pub fn push_burst(&mut self, items: &[T]) -> usize
    where
        T: Copy,
    {
        let mut chunk = self.write_chunk(items.len());
        let n = chunk.len;
        chunk.copy_from(&items[..n]);
        // SAFETY: `copy_from` initialised all `n` slots of the chunk.
        unsafe { chunk.commit(n) };
        n
    }

    /// Bulk: copies all of `items` and returns `true`, or copies nothing and returns `false`
    /// if they do not all fit.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert!(tx.push_bulk(&[1, 2, 3]));
    /// assert!(!tx.push_bulk(&[4, 5]));
    /// assert!(tx.push_bulk(&[4]));
    /// ```
    #[inline]
    pub fn push_bulk(&mut self, items: &[T]) -> bool
    where
        T: Copy,
    {
        if self.free_for(items.len()) < items.len() {
            return false;
        }
        self.push_burst(items);
        true
    }

    /// Burst from a `Vec`: moves as many items as fit from the front of `items` into the
    /// ring, publishes them with one index store, and returns how many; the items that did
    /// not fit stay in `items`, in order. Items of any type move as bytes (two copies at
    /// most, and one more to close the gap when some did not fit): no per-item code runs,
    /// so nothing can panic half-way.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<String>(2).unwrap();
    /// let mut v = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    /// assert_eq!(tx.push_burst_from(&mut v), 2);
    /// assert_eq!(v, ["c"]);
    /// assert_eq!(rx.pop().as_deref(), Some("a"));
    /// ```
    #[inline]
    pub fn push_burst_from(&mut self, items: &mut Vec<T>) -> usize {
        let mut chunk = self.write_chunk(items.len());
        let n = chunk.len;
        let rest = items.len() - n;
        let (a, b) = chunk.as_mut_slices();
        let src = items.as_mut_ptr();
        // SAFETY: `MaybeUninit<T>` has the layout of `T`; the chunk's two runs hold `n`
        // free slots (`a.len() + b.len() == n <= items.len()`), disjoint from the `Vec`'s
        // buffer. The first `n` items are moved into them and the `Vec` forgets them
        // (`set_len` after the remaining `rest` are moved to its front, `ptr::copy`
        // allowing the overlap); no code runs in between that could unwind, so each item
        // is owned exactly once, by the ring or by `items`. `commit(n)`: all `n` slots
        // were written.
        unsafe {
            super::copy_items(src, a.as_mut_ptr().cast::<T>(), a.len());
            super::copy_items(src.add(a.len()), b.as_mut_ptr().cast::<T>(), b.len());
            ptr::copy(src.add(n), src, rest);
            items.set_len(rest);
            chunk.commit(n);
        }
        n
    }

    /// Burst from an iterator: moves items from `iter` into the free slots until either runs
    /// out, publishes them at once, and returns how many. Items that did not fit stay in the
    /// iterator (it is never advanced past what was stored).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<String>(2).unwrap();
    /// let mut words = ["a", "b", "c"].iter().map(|s| s.to_string());
    /// assert_eq!(tx.push_burst_iter(&mut words), 2);
    /// assert_eq!(words.next().as_deref(), Some("c"));
    /// ```
    pub fn push_burst_iter<I: Iterator<Item = T>>(&mut self, iter: &mut I) -> usize {
        let free = self.free_for(usize::MAX);
        self.write_chunk(free).fill_from_iter(iter)
    }

    /// Bulk from an exact-size iterator: stores all its items and returns `Ok`, or stores
    /// nothing and gives the iterator back if `iter.len()` items do not fit. If the iterator
    /// yields fewer items than its `len()` promised, those are stored; it is never read
    /// beyond `len()` items.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<Box<u8>>(2).unwrap();
    /// assert!(tx.push_bulk_iter(vec![Box::new(1), Box::new(2), Box::new(3)]).is_err());
    /// assert!(tx.push_bulk_iter(vec![Box::new(1), Box::new(2)]).is_ok());
    /// ```
    pub fn push_bulk_iter<I>(&mut self, iter: I) -> Result<(), I::IntoIter>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: ExactSizeIterator,
    {
        let iter = iter.into_iter();
        let n = iter.len();
        if self.free_for(n) < n {
            return Err(iter);
        }
        self.write_chunk(n).fill_from_iter(&mut iter.take(n));
        Ok(())
    }

    /// Slots the ring has: the requested capacity rounded up to a power of two.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::spsc::channel::<u8>(5).unwrap().0.capacity(), 8);
    /// ```
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Items in the ring now (a snapshot: the consumer may take more meanwhile, so the true
    /// value can only be lower). Reads the consumer's line.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(tx.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        // Acquire: pairs with the consumer's Release `head` store (a fresh view of it).
        self.tail
            .wrapping_sub(self.shared.head.load(Ordering::Acquire))
    }

    /// Free slots now (a snapshot: the true value can only be higher). Reads the consumer's
    /// line.
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert_eq!(tx.free(), 4);
    /// ```
    pub fn free(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Whether the ring is empty now (a snapshot).
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert!(tx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the ring is full now (a snapshot).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(1).unwrap();
    /// tx.push(0).unwrap();
    /// assert!(tx.is_full());
    /// ```
    pub fn is_full(&self) -> bool {
        self.free() == 0
    }

    /// Whether the consumer has been dropped: nothing pushed from now on will be read.
    ///
    /// ```
    /// let (tx, rx) = flowline::fifo::spsc::channel::<u8>(1).unwrap();
    /// drop(rx);
    /// assert!(tx.is_abandoned());
    /// ```
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release store in the consumer's Drop.
        self.shared.consumer_gone.load(Ordering::Acquire)
    }

    /// `is_abandoned` for the waiting pushes' fast path, which on `true` only gives its
    /// item back: a Relaxed load (no edge needed: nothing the consumer wrote is read
    /// after it), so the compiler keeps this end's fields in registers across it, which
    /// an Acquire load makes it reload.
    #[cfg(feature = "std")]
    #[inline(always)]
    fn consumer_gone_now(&self) -> bool {
        // Relaxed: see above; the wait loop's checks that can end in Disconnected after a
        // failed push use the Acquire form.
        self.shared.consumer_gone.load(Ordering::Relaxed)
    }
}

/// Blocking operations (see [`crate::wait`]): they wait by this end's [`WaitStrategy`].
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
impl<T> Producer<T, Wait> {
    /// Sets how [`push_wait`](Self::push_wait) waits (default:
    /// [`WaitStrategy::default`]).
    ///
    /// ```
    /// use flowline::wait::WaitStrategy;
    /// let (mut tx, _rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// tx.set_wait_strategy(WaitStrategy::Spin);
    /// assert_eq!(tx.wait_strategy(), WaitStrategy::Spin);
    /// ```
    pub fn set_wait_strategy(&mut self, strategy: WaitStrategy) {
        self.strategy = strategy;
    }

    /// How [`push_wait`](Self::push_wait) waits.
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(tx.wait_strategy(), flowline::wait::WaitStrategy::default());
    /// ```
    pub fn wait_strategy(&self) -> WaitStrategy {
        self.strategy
    }

    /// Appends `value`, waiting up to `timeout` for room. A `timeout` too large to add to
    /// the current time (`Duration::MAX`) waits without a deadline. Costs what
    /// [`push`](Self::push) costs when there is room.
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] if the consumer is gone (checked first: an item is never
    /// pushed into a ring whose consumer's drop this thread can already see; a drop racing
    /// the call may come after the push), [`WaitError::Timeout`] if the ring stayed full;
    /// either way the item comes back in the error.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u32>(1).unwrap();
    /// tx.push(1).unwrap();
    /// let t = std::thread::spawn(move || (rx.pop_wait(Duration::from_secs(30)), rx.pop_wait(Duration::from_secs(30))));
    /// tx.push_wait(2, Duration::from_secs(30)).unwrap();
    /// assert_eq!(t.join().unwrap(), (Ok(1), Ok(2)));
    /// ```
    #[inline]
    pub fn push_wait(&mut self, value: T, timeout: Duration) -> Result<(), PushWaitError<T>> {
        // The fast path is `push` and one load of a line nobody writes until the drop.
        if self.consumer_gone_now() {
            return Err(PushWaitError {
                error: WaitError::Disconnected,
                value,
            });
        }
        match self.push(value) {
            Ok(()) => Ok(()),
            Err(value) => self.push_wait_slow(value, timeout),
        }
    }

    #[cold]
    #[inline(never)]
    fn push_wait_slow(&mut self, value: T, timeout: Duration) -> Result<(), PushWaitError<T>> {
        let mut slot = Some(value);
        let r = wait::wait_after_miss(
            self,
            self.strategy,
            timeout,
            |p| wait::poll_push(p, &mut slot, Producer::push, Producer::is_abandoned),
            Producer::has_room_or_closed,
            |p| p.shared.room(),
        );
        match (r, slot) {
            (Ok(()), _) => Ok(()),
            (Err(error), Some(value)) => Err(PushWaitError { error, value }),
            (Err(_), None) => unreachable!("the item is kept until it is pushed"),
        }
    }

    /// Burst with a wait: waits up to `timeout` until at least one slot is free, then
    /// copies as many items from the front of `items` as fit, with one index store, and
    /// returns how many (0 only for an empty `items`).
    ///
    /// # Errors
    ///
    /// As [`push_wait`](Self::push_wait); nothing was pushed.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(tx.push_burst_wait(&[1, 2, 3, 4, 5], Duration::from_secs(1)), Ok(4));
    /// assert_eq!(rx.pop(), Some(1));
    /// assert_eq!(tx.push_burst_wait(&[5], Duration::from_secs(1)), Ok(1));
    /// ```
    #[inline]
    pub fn push_burst_wait(&mut self, items: &[T], timeout: Duration) -> Result<usize, WaitError>
    where
        T: Copy,
    {
        if items.is_empty() {
            return Ok(0);
        }
        wait::push_burst_or_wait(
            self,
            |p| p.strategy,
            timeout,
            Producer::consumer_gone_now,
            Producer::is_abandoned,
            |p| p.push_burst(items),
            Producer::has_room_or_closed,
            |p| p.shared.room(),
        )
    }

    /// The sleeper's re-check: a slot is free, or the consumer is gone.
    fn has_room_or_closed(&self) -> bool {
        // Acquire: as in `free_for` and `is_abandoned`.
        self.shared.consumer_gone.load(Ordering::Acquire)
            || self
                .tail
                .wrapping_sub(self.shared.head.load(Ordering::Acquire))
                <= self.mask
    }
}

impl<T, W: WaitMode> Drop for Producer<T, W> {
    /// One out-of-line call with the shared state by value: a drop this small is inlined
    /// even into unwinding paths, so a loop that owns this end never gives its address
    /// away (see `sync::HandleArc`).
    #[inline]
    fn drop(&mut self) {
        // SAFETY: taken once, here, and the field is not used again.
        let shared = unsafe { ManuallyDrop::take(&mut self.shared) };
        producer_gone::<T, W>(shared);
    }
}

/// What dropping a [`Producer`] does, given its share of the ring.
#[inline(never)]
// `W` says whether to wake a sleeper, which only a build with `std` can have.
#[cfg_attr(not(feature = "std"), allow(clippy::extra_unused_type_parameters))]
fn producer_gone<T, W: WaitMode>(shared: HandleArc<Shared<T>>) {
    // Release: everything this end published happens before a consumer that sees the flag
    // (it then reads the final `tail`).
    shared.producer_gone.store(true, Ordering::Release);
    // A consumer sleeping in `pop_wait` learns that nothing more will come.
    #[cfg(feature = "std")]
    if W::WAITS {
        shared.tail.notify();
    }
}

impl<T, W: WaitMode> fmt::Debug for Producer<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spsc::Producer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

/// Slots reserved by [`Producer::write_chunk`], filled in place and published by `commit`.
///
/// Dropping a chunk without committing publishes nothing; values written into its slots
/// are then *not* dropped (as with any `MaybeUninit`), and the slots are reused by the next
/// write. For `T` with a destructor, commit what you wrote or use
/// [`fill_from_iter`](WriteChunk::fill_from_iter).
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
/// let n = tx.write_chunk(2).fill_from_iter(&mut [5, 6].into_iter());
/// assert_eq!((n, rx.pop()), (2, Some(5)));
/// ```
pub struct WriteChunk<'a, T, W: WaitMode = NoWait> {
    producer: &'a mut Producer<T, W>,
    len: usize,
}

impl<T, W: WaitMode> WriteChunk<'_, T, W> {
    /// Slots reserved (at most the `n` asked for).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(2).unwrap();
    /// assert_eq!(tx.write_chunk(5).len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no slot was reserved (the ring was full).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(1).unwrap();
    /// tx.push(1).unwrap();
    /// assert!(tx.write_chunk(1).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The reserved slots as (at most) two runs, in ring order: the second is non-empty only
    /// when the reservation wraps around the end of the buffer.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// let mut c = tx.write_chunk(4);
    /// let (a, b) = c.as_mut_slices();
    /// assert_eq!(a.len() + b.len(), 4);
    /// ```
    pub fn as_mut_slices(&mut self) -> (&mut [MaybeUninit<T>], &mut [MaybeUninit<T>]) {
        let p = &*self.producer;
        let start = p.tail;
        p.shared
            .tracker
            .write_each(self.len, |k| start.wrapping_add(k) & p.mask);
        let (first, second) = runs(start, self.len, p.mask);
        // SAFETY: the `len` slots from `tail` are free (`free_for` checked them against the
        // consumer's released index) and owned by this producer until published; the two
        // runs are disjoint, in bounds, and borrowed mutably through `&mut self`.
        unsafe {
            (
                core::slice::from_raw_parts_mut(p.slot(start), first),
                core::slice::from_raw_parts_mut(p.buf, second),
            )
        }
    }

    fn copy_from(&mut self, items: &[T])
    where
        T: Copy,
    {
        debug_assert_eq!(items.len(), self.len);
        let (a, b) = self.as_mut_slices();
        let (ia, ib) = items.split_at(a.len());
        // SAFETY: `MaybeUninit<T>` has the layout of `T`; source and destination do not
        // overlap (the items are the caller's, the slots the ring's) and have equal lengths.
        unsafe {
            super::copy_items(ia.as_ptr(), a.as_mut_ptr().cast::<T>(), ia.len());
            super::copy_items(ib.as_ptr(), b.as_mut_ptr().cast::<T>(), ib.len());
        }
    }

    /// Publishes the first `k` reserved slots to the consumer with one index store.
    ///
    /// # Safety
    ///
    /// The first `k` slots of the chunk (in ring order: the first run, then the second) must
    /// have been initialised through [`as_mut_slices`](WriteChunk::as_mut_slices).
    ///
    /// # Panics
    ///
    /// If `k > self.len()`.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(2).unwrap();
    /// let mut c = tx.write_chunk(2);
    /// c.as_mut_slices().0[0].write(7);
    /// // SAFETY: slot 0 was written just above.
    /// unsafe { c.commit(1) };
    /// assert_eq!(rx.pop(), Some(7));
    /// assert_eq!(rx.pop(), None);
    /// ```
    pub unsafe fn commit(self, k: usize) {
        assert!(
            k <= self.len,
            "WriteChunk::commit({k}) but only {} slots were reserved",
            self.len
        );
        self.producer.publish(k);
    }

    /// Moves items from `iter` into the reserved slots, in order, until either runs out;
    /// publishes them and returns how many. The iterator is not advanced past the last item
    /// stored. If `iter.next()` panics, the items moved in before it are published (the
    /// consumer gets them; none is leaked or dropped twice).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<String>(4).unwrap();
    /// let n = tx.write_chunk(3).fill_from_iter(&mut ["x".to_string()].into_iter());
    /// assert_eq!(n, 1);
    /// assert_eq!(rx.pop().as_deref(), Some("x"));
    /// ```
    pub fn fill_from_iter<I: Iterator<Item = T>>(self, iter: &mut I) -> usize {
        /// Publishes the items moved in so far when it goes out of scope: at the end, or
        /// if `iter.next()` panics (they are then consumed normally, never leaked).
        struct Publish<'a, T, W: WaitMode> {
            producer: &'a mut Producer<T, W>,
            n: usize,
        }
        impl<T, W: WaitMode> Drop for Publish<'_, T, W> {
            fn drop(&mut self) {
                self.producer.publish(self.n);
            }
        }
        let len = self.len;
        let mut g = Publish {
            producer: self.producer,
            n: 0,
        };
        while g.n < len {
            let Some(v) = iter.next() else { break };
            let p = &*g.producer;
            let index = p.tail.wrapping_add(g.n);
            p.shared.tracker.write(index & p.mask);
            // SAFETY: the slot is among the reserved free slots (n < len); it is counted
            // right after the write, so the guard publishes only initialised slots.
            unsafe { (*p.slot(index)).write(v) };
            g.n += 1;
        }
        g.n
    }
}

impl<T, W: WaitMode> fmt::Debug for WriteChunk<'_, T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteChunk")
            .field("len", &self.len)
            .finish()
    }
}

/// A read of the producer's index `tail` that may wait politely first: with nothing left
/// in the cached view (`nothing_left`), if this end trails a streaming producer, it lets the
/// producer publish more before the read moves its index line (see "Polite polling").
/// Returns the new polite state and the index read.
///
/// Out of line and by value, not given the consumer: the consumer's fields stay in
/// registers in a caller's loop only while nothing out of line gets the consumer's address
/// (see `sync::HandleArc`), and inlined, this path made every `pop` large enough that a
/// caller's loop around it was no longer inlined. (The state lived in a `Box` for a while,
/// to save the copies; that extra allocation moved the ring's others on the heap, and in
/// some layouts single items ran at half speed.)
#[inline(never)]
fn polite_read(
    mut polite: Polite,
    tail: &AtomicUsize,
    cached_tail: usize,
    nothing_left: bool,
) -> (Polite, usize) {
    let waited = nothing_left && polite.should_wait();
    if waited {
        polite::wait();
    }
    // Acquire: pairs with the producer's Release store of `tail`, so its slot writes are
    // visible before the consumer reads them.
    let t = tail.load(Ordering::Acquire);
    polite.observe(t.wrapping_sub(cached_tail), waited, nothing_left);
    (polite, t)
}

impl<T, W: WaitMode> Consumer<T, W> {
    /// As [`Producer::line_counts`], for this end: stores of `head`, and loads of `tail`
    /// that found it moved.
    #[cfg(flowline_lines)]
    pub(crate) fn line_counts(&self) -> (usize, usize) {
        (self.stores, self.fresh_loads)
    }

    /// Items available, reloading the producer's index only if the cached view has fewer
    /// than `want`.
    #[inline(always)]
    fn available_for(&mut self, want: usize) -> usize {
        self.load_available(want, true)
    }

    /// [`available_for`](Self::available_for), with the polite wait allowed or not.
    #[inline(always)]
    fn load_available(&mut self, want: usize, may_wait: bool) -> usize {
        let avail = self.cached_tail.wrapping_sub(self.head);
        if avail >= want {
            return avail;
        }
        // About to read the producer's line: release what single pops consumed first, so a
        // producer waiting for room sees it no later than this end looks for more items.
        self.release_pending();
        // Only reads that may wait politely (by mode and size) feed its state: a read too
        // small to wait (a single pop under the default mode) goes straight to the index,
        // so a spinning pop costs what rtrb's does and its gains never steer the waits of
        // the large reads.
        // (`polite_min` is `usize::MAX` when no read may pause: off, or zero-sized items,
        // whatever a read asks for.)
        if !(may_wait && self.polite_min != usize::MAX && want >= self.polite_min) {
            // Acquire: pairs with the producer's Release store of `tail`, so its slot writes
            // are visible before this end reads them.
            let tail = self.shared.tail.load(Ordering::Acquire);
            #[cfg(any(test, flowline_lines))]
            {
                self.fresh_loads += usize::from(tail != self.cached_tail);
            }
            self.cached_tail = tail;
            return self.cached_tail.wrapping_sub(self.head);
        }
        let (polite, tail) =
            polite_read(self.polite, &self.shared.tail, self.cached_tail, avail == 0);
        #[cfg(any(test, flowline_lines))]
        {
            self.fresh_loads += usize::from(tail != self.cached_tail);
        }
        self.polite = polite;
        self.cached_tail = tail;
        self.cached_tail.wrapping_sub(self.head)
    }

    /// Whether an item is there: the producer's index is loaded only when the cached view
    /// shows none (and kept as the cached view). Releases nothing: for a thread that
    /// looks at many rings and reads few of them.
    #[inline]
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn has_unread(&mut self) -> bool {
        if self.cached_tail != self.head {
            return true;
        }
        // Acquire: as in `available_for`.
        let tail = self.shared.tail.load(Ordering::Acquire);
        #[cfg(any(test, flowline_lines))]
        {
            self.fresh_loads += usize::from(tail != self.cached_tail);
        }
        self.cached_tail = tail;
        tail != self.head
    }

    /// Items available now: reloads the producer's index (and keeps it as the cached
    /// view, so the pops that follow do not load it again).
    #[inline]
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn refresh(&mut self) -> usize {
        // Never waits: the caller (the distributor) polls many rings in turn.
        self.load_available(usize::MAX, false)
    }

    /// [`refresh`](Self::refresh) (which releases slots single pops left pending, as
    /// every read of the producer's index does), then asks for the lines of up to `max` of
    /// the items now available (x86_64; the first line of an item larger than a line), so
    /// that a read of them later (the next poll of a thread that polls many rings) finds
    /// them near. Only lines that hold published items; the last of them may also hold
    /// slots the producer has yet to write, which it then takes back on its next write.
    /// The prefetch is a hint: nothing observable changes beyond what `refresh` does.
    #[inline]
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn refresh_and_prefetch(&mut self, max: usize) -> usize {
        let avail = self.refresh();
        #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
        {
            // Zero-sized items have no lines to ask for.
            if let Some(per_line) = 64usize.checked_div(core::mem::size_of::<T>()) {
                let per_line = per_line.max(1);
                let n = avail.min(max);
                let fetch = |k: usize| {
                    // SAFETY: a prefetch is a hint: it never faults and changes nothing a
                    // program can observe; SSE is part of the x86_64 baseline. The address
                    // is a slot of this ring's allocation (masked index).
                    unsafe {
                        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                            self.slot(self.head.wrapping_add(k)).cast::<i8>(),
                        );
                    }
                };
                let mut k = 0;
                while k < n {
                    fetch(k);
                    k += per_line;
                }
                // The last item's line, which the steps above miss when `head` is not at
                // the start of a line.
                if n > 0 {
                    fetch(n - 1);
                }
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
        let _ = max;
        avail
    }

    #[inline(always)]
    fn slot(&self, index: usize) -> *mut MaybeUninit<T> {
        // SAFETY: `index & mask` is below the slot count: in bounds of the allocation.
        unsafe { self.buf.add(index & self.mask) }
    }

    /// Releases `n` consumed slots to the producer (with any that single pops consumed
    /// before): one store to this end's index line, none if there is nothing to release
    /// (an empty burst or chunk commit on an empty ring: rewriting the value already there
    /// would still take the line from a producer that polls it).
    #[inline(always)]
    fn release(&mut self, n: usize) {
        self.head = self.head.wrapping_add(n);
        if self.head != self.released {
            self.publish_head();
        }
    }

    #[inline(always)]
    fn publish_head(&mut self) {
        self.released = self.head;
        #[cfg(any(test, flowline_lines))]
        {
            self.stores += 1;
        }
        // Release: pairs with the producer's Acquire load of `head`, so this end's reads of
        // the released slots happen before the producer reuses them.
        self.shared.head.store(self.head, Ordering::Release);
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.head.notify();
        }
    }

    /// Consumes the slot at `head` for a single pop: released to the producer once
    /// `release_batch` slots are pending (or earlier, see [`release_pending`]).
    ///
    /// [`release_pending`]: Self::release_pending
    #[inline(always)]
    fn consume_one(&mut self) {
        self.head = self.head.wrapping_add(1);
        // Also release when this pop took the last item this end knows of: a consumer that
        // pops what it saw and then waits for something else leaves nothing pending.
        // (A single `release_at` index, re-armed at each release and read of `tail`, saves a
        // comparison here, but cost boxed handles a quarter of their throughput when the
        // cores were far apart.)
        if self.head.wrapping_sub(self.released) >= self.release_batch
            || self.head == self.cached_tail
        {
            self.publish_head();
        }
    }

    /// Releases to the producer the slots that single [`pop`](Self::pop)s consumed and
    /// have not released yet (see "Lazy release" in the [module docs](self)). Bursts,
    /// committed chunks, a pop of the last item this end has seen and dropping this end do
    /// it on their own; call it when this end stops popping while items remain and then
    /// waits for the producer to have room.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(1024).unwrap();
    /// tx.push_burst(&[0; 1024]);
    /// rx.pop().unwrap();
    /// assert!(tx.is_full()); // the slot is not released yet
    /// rx.release_pending();
    /// assert!(tx.push(1).is_ok());
    /// ```
    #[inline]
    pub fn release_pending(&mut self) {
        if self.released != self.head {
            self.publish_head();
        }
    }

    /// Takes the oldest item, if any.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel(2).unwrap();
    /// tx.push('a').unwrap();
    /// assert_eq!(rx.pop(), Some('a'));
    /// assert_eq!(rx.pop(), None);
    /// ```
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.available_for(1) == 0 {
            return None;
        }
        self.shared.tracker.read(self.head & self.mask);
        // SAFETY: the slot at `head` was published by the producer (Acquire above) and not
        // yet consumed; reading it moves the item out, and `head` moves past it so
        // it is never read or dropped again.
        let v = unsafe { (*self.slot(self.head)).assume_init_read() };
        self.consume_one();
        Some(v)
    }

    /// The oldest item, without taking it.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel(2).unwrap();
    /// tx.push(5).unwrap();
    /// assert_eq!(rx.peek(), Some(&5));
    /// assert_eq!(rx.pop(), Some(5));
    /// ```
    #[inline]
    pub fn peek(&mut self) -> Option<&T> {
        if self.available_for(1) == 0 {
            return None;
        }
        self.shared.tracker.read(self.head & self.mask);
        // SAFETY: the slot at `head` holds a published item that stays in place while the
        // returned borrow of `self` lives (only this end consumes).
        Some(unsafe { (*self.slot(self.head)).assume_init_ref() })
    }

    /// Takes up to `n` published items in place (fewer if fewer are available; possibly
    /// none). Nothing is released to the producer until [`ReadChunk::commit`].
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
    /// tx.push_burst(&[1, 2, 3]);
    /// let chunk = rx.read_chunk(8);
    /// let (a, b) = chunk.as_slices();
    /// assert_eq!(a.iter().chain(b).sum::<u32>(), 6);
    /// chunk.commit_all();
    /// assert!(rx.is_empty());
    /// ```
    #[inline]
    pub fn read_chunk(&mut self, n: usize) -> ReadChunk<'_, T, W> {
        let len = self.available_for(n).min(n);
        ReadChunk {
            consumer: self,
            len,
        }
    }

    /// Burst: copies as many items as are available (up to `out.len()`) into the front of
    /// `out`, releases them with one index store, and returns how many.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// let mut out = [0; 8];
    /// assert_eq!(rx.pop_burst(&mut out), 2);
    /// assert_eq!(&out[..2], &[1, 2]);
    /// ```
    #[inline(always)]
    pub fn pop_burst(&mut self, out: &mut [T]) -> usize
    where
        T: Copy,
    {
        let chunk = self.read_chunk(out.len());
        let n = chunk.len;
        let (a, b) = chunk.as_slices();
        let dst = &mut out[..n];
        // SAFETY: `a` and `b` are the chunk's published items (`T: Copy`), `a.len() +
        // b.len() == n`, and `dst` is `n` items of the caller's buffer (bounds-checked just
        // above), disjoint from the ring's.
        unsafe {
            super::copy_items(a.as_ptr(), dst.as_mut_ptr(), a.len());
            super::copy_items(b.as_ptr(), dst.as_mut_ptr().add(a.len()), b.len());
        }
        chunk.commit_all();
        n
    }

    /// Bulk: fills all of `out` and returns `true`, or takes nothing and returns `false` if
    /// fewer than `out.len()` items are available.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// let mut out = [0; 3];
    /// assert!(!rx.pop_bulk(&mut out));
    /// assert!(rx.pop_bulk(&mut out[..2]));
    /// ```
    #[inline]
    pub fn pop_bulk(&mut self, out: &mut [T]) -> bool
    where
        T: Copy,
    {
        if self.available_for(out.len()) < out.len() {
            return false;
        }
        self.pop_burst(out);
        true
    }

    /// Burst into a `Vec`: moves up to `max` available items onto the end of `out` and
    /// returns how many.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<String>(4).unwrap();
    /// tx.push("a".into()).unwrap();
    /// let mut v = Vec::new();
    /// assert_eq!(rx.pop_burst_into(&mut v, 32), 1);
    /// assert_eq!(v, ["a"]);
    /// ```
    pub fn pop_burst_into(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        // One read of the producer's index (a second one, for `pop_burst_with`, would
        // find nothing new after a short burst and end the polite-polling streak).
        let n = self.available_for(max).min(max);
        let start = self.head;
        self.shared
            .tracker
            .read_each(n, |k| start.wrapping_add(k) & self.mask);
        let (first, second) = runs(start, n, self.mask);
        // SAFETY: the `n` slots from `head` hold published items (`available_for`), in two
        // disjoint in-bounds runs, not in `out`'s buffer. `append_runs` reserves before it
        // moves anything, and `release(n)` right after passes their slots (nothing between
        // can unwind), so each item is read once and never dropped by the ring.
        unsafe {
            super::append_runs(
                out,
                (self.slot(start).cast::<T>(), first),
                (self.buf.cast::<T>(), second),
            );
        }
        self.release(n);
        n
    }

    /// Burst to a closure: moves up to `max` available items, oldest first, into `f`, and
    /// releases their slots with one index store; returns how many. No intermediate buffer.
    /// If `f` panics, the items already handed to it stay consumed (none is dropped twice).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(8).unwrap();
    /// tx.push_burst(&[1, 2, 3]);
    /// let mut sum = 0;
    /// assert_eq!(rx.pop_burst_with(8, |v| sum += v), 3);
    /// assert_eq!(sum, 6);
    /// ```
    #[inline]
    pub fn pop_burst_with(&mut self, max: usize, f: impl FnMut(T)) -> usize {
        let n = self.available_for(max).min(max);
        self.take_with(n, f)
    }

    /// Moves the `n` oldest items (`n` at most what is available) into `f` and releases
    /// their slots with one index store; returns `n`.
    #[inline(always)]
    fn take_with(&mut self, n: usize, mut f: impl FnMut(T)) -> usize {
        /// Releases the items taken so far, also when `f` unwinds.
        struct Taken<'a, T, W: WaitMode> {
            consumer: &'a mut Consumer<T, W>,
            n: usize,
        }
        impl<T, W: WaitMode> Drop for Taken<'_, T, W> {
            fn drop(&mut self) {
                self.consumer.release(self.n);
            }
        }
        debug_assert!(n <= self.cached_tail.wrapping_sub(self.head));
        let mut taken = Taken {
            consumer: self,
            n: 0,
        };
        while taken.n < n {
            let c = &*taken.consumer;
            let index = c.head.wrapping_add(taken.n);
            c.shared.tracker.read(index & c.mask);
            // SAFETY: the n slots from `head` hold published items; each is read once, and
            // counted as taken before `f` runs, so the guard releases it even if `f`
            // panics (it is then never read or dropped again).
            let v = unsafe { (*c.slot(index)).assume_init_read() };
            taken.n += 1;
            f(v);
        }
        n
    }

    /// Bulk into a `Vec`: moves exactly `n` items onto `out` and returns `true`, or takes
    /// nothing and returns `false` if fewer are available.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// let mut v = Vec::new();
    /// assert!(!rx.pop_bulk_into(&mut v, 3));
    /// assert!(rx.pop_bulk_into(&mut v, 2));
    /// ```
    pub fn pop_bulk_into(&mut self, out: &mut Vec<T>, n: usize) -> bool {
        if self.available_for(n) < n {
            return false;
        }
        self.pop_burst_into(out, n);
        true
    }

    /// Chooses which reads of the producer's index, by this end with nothing left to take,
    /// may first wait a moment while this end trails a streaming producer (see "Polite
    /// polling" in the [module docs](self) for when that pays and when it costs). The
    /// default, [`PolitePolling::LargeReads`], lets only reads that ask for at least 256
    /// bytes of items wait; [`PolitePolling::Off`] never waits.
    ///
    /// ```
    /// use flowline::fifo::spsc::{self, PolitePolling};
    /// let (mut tx, mut rx) = spsc::channel::<u32>(64).unwrap();
    /// rx.set_polite(PolitePolling::On);
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.pop(), Some(1)); // a pause never hides an item that is there
    /// assert_eq!(rx.polite(), PolitePolling::On);
    /// ```
    pub fn set_polite(&mut self, mode: PolitePolling) {
        self.polite.set_enabled(mode != PolitePolling::Off);
        self.polite_mode = mode;
        self.polite_min = mode.min_want(core::mem::size_of::<T>());
    }

    /// Which reads may wait politely ([`set_polite`](Self::set_polite)).
    ///
    /// ```
    /// use flowline::fifo::spsc::{self, PolitePolling};
    /// assert_eq!(spsc::channel::<u8>(8).unwrap().1.polite(), PolitePolling::LargeReads);
    /// ```
    pub fn polite(&self) -> PolitePolling {
        self.polite_mode
    }

    /// [`set_polite`](Self::set_polite) with [`PolitePolling::On`] (`true`: every read may
    /// wait, single pops included) or [`PolitePolling::Off`] (`false`).
    ///
    /// ```
    /// let (_tx, mut rx) = flowline::fifo::spsc::channel::<u32>(64).unwrap();
    /// assert!(rx.polite_polling()); // large reads may wait by default
    /// rx.set_polite_polling(false);
    /// assert!(!rx.polite_polling());
    /// ```
    pub fn set_polite_polling(&mut self, on: bool) {
        self.set_polite(if on {
            PolitePolling::On
        } else {
            PolitePolling::Off
        });
    }

    /// Whether any read may wait politely (the mode is not [`PolitePolling::Off`]).
    ///
    /// ```
    /// assert!(flowline::fifo::spsc::channel::<u8>(8).unwrap().1.polite_polling());
    /// ```
    pub fn polite_polling(&self) -> bool {
        self.polite.enabled()
    }

    /// Slots the ring has.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::spsc::channel::<u8>(5).unwrap().1.capacity(), 8);
    /// ```
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Items available now (a snapshot: the producer may add more meanwhile, so the true
    /// value can only be higher). Reads the producer's line.
    ///
    /// ```
    /// let (mut tx, rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        // Acquire: pairs with the producer's Release `tail` store.
        self.shared
            .tail
            .load(Ordering::Acquire)
            .wrapping_sub(self.head)
    }

    /// Free slots now (a snapshot: the true value can only be lower).
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert_eq!(rx.free(), 4);
    /// ```
    pub fn free(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Whether nothing is available now (a snapshot).
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert!(rx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the ring is full now (a snapshot).
    ///
    /// ```
    /// let (mut tx, rx) = flowline::fifo::spsc::channel::<u8>(1).unwrap();
    /// tx.push(1).unwrap();
    /// assert!(rx.is_full());
    /// ```
    pub fn is_full(&self) -> bool {
        self.free() == 0
    }

    /// Whether the producer has been dropped. Once it has, the items still in the ring are
    /// all there will ever be: a consumer that sees `is_abandoned()` and then an empty ring
    /// is done.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(2).unwrap();
    /// tx.push(1).unwrap();
    /// drop(tx);
    /// assert!(rx.is_abandoned());
    /// assert_eq!(rx.pop(), Some(1));
    /// ```
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release store in the producer's Drop, so the final `tail`
        // is visible to the loads that follow.
        self.shared.producer_gone.load(Ordering::Acquire)
    }
}

/// Blocking operations (see [`crate::wait`]): they wait by this end's [`WaitStrategy`].
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
impl<T> Consumer<T, Wait> {
    /// Sets how [`pop_wait`](Self::pop_wait) and
    /// [`pop_burst_wait`](Self::pop_burst_wait) wait (default: [`WaitStrategy::default`]).
    ///
    /// ```
    /// use flowline::wait::WaitStrategy;
    /// let (_tx, mut rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// rx.set_wait_strategy(WaitStrategy::SpinYield { spins: 100 });
    /// assert_eq!(rx.wait_strategy(), WaitStrategy::SpinYield { spins: 100 });
    /// ```
    pub fn set_wait_strategy(&mut self, strategy: WaitStrategy) {
        self.strategy = strategy;
    }

    /// How the blocking pops wait.
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(rx.wait_strategy(), flowline::wait::WaitStrategy::default());
    /// ```
    pub fn wait_strategy(&self) -> WaitStrategy {
        self.strategy
    }

    /// Takes the oldest item, waiting up to `timeout` for one. A `timeout` too large to add
    /// to the current time (`Duration::MAX`) waits without a deadline. Costs what
    /// [`pop`](Self::pop) costs when an item is there.
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] once the producer is gone and the ring is empty;
    /// [`WaitError::Timeout`] if nothing came in time.
    ///
    /// Before it sleeps it releases the slots that single pops left pending (see "Lazy
    /// release" in the [module docs](self)). A thread that pops single items here and then
    /// blocks elsewhere (in another ring's `push_wait`, say) should call
    /// [`release_pending`](Self::release_pending) first, or this ring's producer may wait
    /// for room that is already free.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u32>(4).unwrap();
    /// std::thread::spawn(move || tx.push(7).unwrap());
    /// assert_eq!(rx.pop_wait(Duration::from_secs(30)), Ok(7));
    /// ```
    #[inline]
    pub fn pop_wait(&mut self, timeout: Duration) -> Result<T, WaitError> {
        match self.pop() {
            Some(v) => Ok(v),
            None => self.pop_wait_slow(timeout),
        }
    }

    #[cold]
    #[inline(never)]
    fn pop_wait_slow(&mut self, timeout: Duration) -> Result<T, WaitError> {
        wait::wait_after_miss(
            self,
            self.strategy,
            timeout,
            |c| wait::poll_one(c, Consumer::pop, Consumer::is_abandoned),
            Consumer::has_items_or_closed,
            |c| c.shared.items(),
        )
    }

    /// Burst with a wait: waits up to `timeout` until at least one item is there, then
    /// moves up to `max` items onto `out` with one index store, and returns how many (0
    /// only for `max == 0`).
    ///
    /// # Errors
    ///
    /// As [`pop_wait`](Self::pop_wait); `out` is unchanged.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u32>(8).unwrap();
    /// std::thread::spawn(move || tx.push_burst(&[1, 2, 3]));
    /// let mut v = Vec::new();
    /// while v.len() < 3 {
    ///     rx.pop_burst_wait(&mut v, 8, Duration::from_secs(30)).unwrap();
    /// }
    /// assert_eq!(v, [1, 2, 3]);
    /// ```
    #[inline]
    pub fn pop_burst_wait(
        &mut self,
        out: &mut Vec<T>,
        max: usize,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        if max == 0 {
            return Ok(0);
        }
        // The fast path is `pop_burst_into`; the wait (and its copy of the strategy) only
        // after it found nothing, out of line.
        match self.pop_burst_into(out, max) {
            0 => self.pop_burst_wait_slow(out, max, timeout),
            n => Ok(n),
        }
    }

    #[cold]
    #[inline(never)]
    fn pop_burst_wait_slow(
        &mut self,
        out: &mut Vec<T>,
        max: usize,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        wait::wait_after_miss(
            self,
            self.strategy,
            timeout,
            |c| wait::poll_items(c, |c| c.pop_burst_into(out, max), Consumer::is_abandoned),
            Consumer::has_items_or_closed,
            |c| c.shared.items(),
        )
    }

    /// Waits until at least one item is there, without taking it; returns how many this
    /// end sees. For a thread that consumes through other calls (chunks, several rings)
    /// and only needs to sleep until there is work.
    ///
    /// # Errors
    ///
    /// [`WaitError::Timeout`] if `timeout` passed first; [`WaitError::Disconnected`] if
    /// the producer is gone and the ring is empty.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::wait::WaitError;
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(rx.wait_for_items(Duration::from_millis(1)), Err(WaitError::Timeout));
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.wait_for_items(Duration::from_secs(1)), Ok(1));
    /// assert_eq!(rx.pop(), Some(1));
    /// drop(tx);
    /// assert_eq!(rx.wait_for_items(Duration::from_secs(1)), Err(WaitError::Disconnected));
    /// ```
    pub fn wait_for_items(&mut self, timeout: Duration) -> Result<usize, WaitError> {
        wait::wait_loop(
            self,
            self.strategy,
            timeout,
            |c| wait::poll_items(c, Consumer::refresh, Consumer::is_abandoned),
            Consumer::has_items_or_closed,
            |c| c.shared.items(),
        )
    }

    /// The sleeper's re-check: an item is published, or the producer is gone.
    fn has_items_or_closed(&self) -> bool {
        // Acquire: as in `available_for` and `is_abandoned`.
        self.shared.tail.load(Ordering::Acquire) != self.head
            || self.shared.producer_gone.load(Ordering::Acquire)
    }
}

impl<T, W: WaitMode> Drop for Consumer<T, W> {
    /// One out-of-line call with the values it needs, as `Producer`'s drop.
    #[inline]
    fn drop(&mut self) {
        // SAFETY: taken once, here, and the field is not used again.
        let shared = unsafe { ManuallyDrop::take(&mut self.shared) };
        consumer_gone::<T, W>(shared, self.head, self.released);
    }
}

/// What dropping a [`Consumer`] does, given its share of the ring, its index and the index
/// last released.
#[inline(never)]
// `W` says whether to wake a sleeper, which only a build with `std` can have.
#[cfg_attr(not(feature = "std"), allow(clippy::extra_unused_type_parameters))]
fn consumer_gone<T, W: WaitMode>(shared: HandleArc<Shared<T>>, head: usize, released: usize) {
    // The final index: `Shared::drop` drops what lies between it and `tail`.
    if head != released {
        // Release: as in `publish_head`.
        shared.head.store(head, Ordering::Release);
    }
    // Release: pairs with the producer's Acquire in `is_abandoned`.
    shared.consumer_gone.store(true, Ordering::Release);
    // A producer sleeping in `push_wait` learns that nothing more will be taken (and that
    // the slots released just above are free).
    #[cfg(feature = "std")]
    if W::WAITS {
        shared.head.notify();
    }
}

impl<T, W: WaitMode> fmt::Debug for Consumer<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spsc::Consumer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

/// Published items lent in place by [`Consumer::read_chunk`], released by `commit`.
///
/// Dropping a chunk without committing releases nothing: the items stay in the ring, and
/// the next read sees them again.
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
/// tx.push_burst(&[1, 2]);
/// let c = rx.read_chunk(4);
/// assert_eq!(c.len(), 2);
/// c.commit(1);
/// assert_eq!(rx.pop(), Some(2));
/// ```
pub struct ReadChunk<'a, T, W: WaitMode = NoWait> {
    consumer: &'a mut Consumer<T, W>,
    len: usize,
}

impl<T, W: WaitMode> ReadChunk<'_, T, W> {
    /// Items lent (at most the `n` asked for).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.read_chunk(3).len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no item was available.
    ///
    /// ```
    /// let (_tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert!(rx.read_chunk(3).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn raw_runs(&self) -> (*mut T, usize, *mut T, usize) {
        let c = &*self.consumer;
        c.shared
            .tracker
            .read_each(self.len, |k| c.head.wrapping_add(k) & c.mask);
        let (first, second) = runs(c.head, self.len, c.mask);
        (c.slot(c.head).cast::<T>(), first, c.buf.cast::<T>(), second)
    }

    /// The lent items as (at most) two runs in ring order.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(2).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// rx.pop();
    /// tx.push(3).unwrap(); // wraps
    /// let c = rx.read_chunk(2);
    /// assert_eq!(c.as_slices(), (&[2][..], &[3][..]));
    /// ```
    pub fn as_slices(&self) -> (&[T], &[T]) {
        let (a, an, b, bn) = self.raw_runs();
        // SAFETY: the `len` slots from `head` hold published, initialised items (Acquire in
        // `available_for`) that the producer will not touch until they are released; the
        // runs are disjoint and in bounds, borrowed for the chunk's lifetime.
        unsafe {
            (
                core::slice::from_raw_parts(a, an),
                core::slice::from_raw_parts(b, bn),
            )
        }
    }

    /// The lent items as mutable runs, to modify packets in place before releasing them
    /// (or before dropping the chunk, which leaves them in the ring, modified).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(2).unwrap();
    /// tx.push(1).unwrap();
    /// rx.read_chunk(1).as_mut_slices().0[0] = 9;
    /// assert_eq!(rx.pop(), Some(9));
    /// ```
    pub fn as_mut_slices(&mut self) -> (&mut [T], &mut [T]) {
        let (a, an, b, bn) = self.raw_runs();
        // SAFETY: as in `as_slices`, and `&mut self` makes the borrow exclusive.
        unsafe {
            (
                core::slice::from_raw_parts_mut(a, an),
                core::slice::from_raw_parts_mut(b, bn),
            )
        }
    }

    /// Drops the first `k` lent items in place and releases their slots to the producer with
    /// one index store.
    ///
    /// # Panics
    ///
    /// If `k > self.len()`.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push_burst(&[1, 2, 3]);
    /// rx.read_chunk(3).commit(2);
    /// assert_eq!(rx.pop(), Some(3));
    /// ```
    pub fn commit(self, k: usize) {
        assert!(
            k <= self.len,
            "ReadChunk::commit({k}) but only {} items were lent",
            self.len
        );
        let c = self.consumer;
        if !core::mem::needs_drop::<T>() {
            c.release(k);
            return;
        }
        /// Releases the items when it goes out of scope: after their destructors ran, or
        /// while unwinding from one that panicked. Either way every one of the `k` items
        /// counts as consumed and is never read or dropped again.
        struct Release<'a, T, W: WaitMode> {
            consumer: &'a mut Consumer<T, W>,
            n: usize,
        }
        impl<T, W: WaitMode> Drop for Release<'_, T, W> {
            fn drop(&mut self) {
                self.consumer.release(self.n);
            }
        }
        c.shared
            .tracker
            .write_each(k, |i| c.head.wrapping_add(i) & c.mask);
        let (first, second) = runs(c.head, k, c.mask);
        let a = ptr::slice_from_raw_parts_mut(c.slot(c.head).cast::<T>(), first);
        let b = ptr::slice_from_raw_parts_mut(c.buf.cast::<T>(), second);
        // `_release` publishes the k items as consumed after the drops, also on unwind.
        let _release = Release { consumer: c, n: k };
        // SAFETY: `a`, `b`: the k published items lent to this chunk, dropped exactly once.
        unsafe { super::drop_runs(a, b) };
    }

    /// Drops all lent items and releases their slots.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// rx.read_chunk(4).commit_all();
    /// assert!(rx.is_empty());
    /// ```
    pub fn commit_all(self) {
        let n = self.len;
        self.commit(n);
    }
}

impl<T, W: WaitMode> fmt::Debug for ReadChunk<'_, T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadChunk").field("len", &self.len).finish()
    }
}

// Layout: the shared indices each own a padded unit, and each end's hot state is aligned
// to 128 bytes.
#[cfg(not(loom))]
mod layout {
    use super::*;
    use crate::slot::LINE_BYTES;
    use static_assertions::const_assert;

    const_assert!(core::mem::align_of::<CachePadded<AtomicUsize>>() == LINE_BYTES);
    const_assert!(core::mem::align_of::<Producer<u64>>() >= 128);
    const_assert!(core::mem::align_of::<Consumer<u64>>() >= 128);
}

#[cfg(all(test, not(loom)))]
mod tests {
    // The crate may be `no_std`; the tests use the standard library's prelude.
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;
    #[allow(unused_imports)]
    use std::{
        borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec,
    };

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
        assert_eq!(tx.shared.buf as usize % super::super::SLOT_ALIGN, 0);
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
        assert_eq!(tx.stores, 1);
        // Full ring: a burst, a bulk push, an empty chunk commit.
        assert_eq!(tx.push_burst(&[5]), 0);
        assert!(!tx.push_bulk(&[5]));
        // SAFETY: nothing is committed.
        unsafe { tx.write_chunk(2).commit(0) };
        assert_eq!(tx.write_chunk(2).fill_from_iter(&mut [5, 6].into_iter()), 0);
        assert_eq!(tx.push_burst_from(&mut vec![5]), 0);
        assert_eq!(tx.stores, 1, "the producer rewrote tail on a full ring");
        let mut out = [0; 4];
        assert_eq!(rx.pop_burst(&mut out), 4);
        assert_eq!(rx.stores, 1);
        // Empty ring: a burst, a bulk pop, an empty chunk commit, a partial commit of 0.
        assert_eq!(rx.pop_burst(&mut out), 0);
        assert!(!rx.pop_bulk(&mut out[..1]));
        rx.read_chunk(2).commit_all();
        assert_eq!(rx.pop_burst_into(&mut Vec::new(), 4), 0);
        rx.release_pending();
        assert_eq!(rx.stores, 1, "the consumer rewrote head on an empty ring");
        // A chunk commit of 0 after single pops still releases what they left pending
        // (a 64-slot ring releases single pops in groups of 8).
        let (mut tx, mut rx) = channel::<u32>(64).unwrap();
        assert_eq!(tx.push_burst(&[1, 2, 3]), 3);
        assert_eq!(rx.pop(), Some(1));
        assert_eq!(
            (rx.stores, rx.head - rx.released),
            (0, 1),
            "one pop pending"
        );
        rx.read_chunk(1).commit(0);
        assert_eq!((rx.stores, rx.head - rx.released), (1, 0), "released once");
    }

    /// Single pops on a 1024-slot ring release in groups of `MAX_RELEASE_BATCH` (16): the
    /// producer sees no room after 15 pops from a full ring, 16 slots after the 16th, and
    /// everything once a pop takes the last item this end knows of.
    #[test]
    fn single_pops_release_in_groups_of_sixteen() {
        let (mut tx, mut rx) = channel::<u32>(1024).unwrap();
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
        rx.set_polite_polling(true);
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
        assert_eq!(rx.polite(), PolitePolling::LargeReads, "the default");
        assert_eq!(
            trail(&mut rx, &mut tx, Drain::Pops),
            0,
            "the default: single pops never pause"
        );
        assert_eq!(
            trail(&mut rx, &mut tx, Drain::SmallBurstInto),
            0,
            "the default: a burst asking for 128 bytes never pauses"
        );
        assert_eq!(
            trail(&mut rx, &mut tx, Drain::BurstInto),
            8,
            "the default: a burst asking for 512 bytes pauses as with polite polling on"
        );
        let (mut tx, mut rx) = channel::<u64>(64).unwrap();
        rx.set_polite(PolitePolling::Off);
        assert_eq!(
            trail(&mut rx, &mut tx, Drain::BurstInto),
            0,
            "off: large bursts never pause either"
        );
        rx.set_polite_polling(true);
        rx.set_polite_polling(false);
        assert_eq!(
            trail(&mut rx, &mut tx, Drain::Pops),
            0,
            "turned on, then off"
        );
        rx.set_polite_polling(true);
        assert_eq!(trail(&mut rx, &mut tx, Drain::Pops), 8, "back on");
    }

    /// Under the default mode, reads too small to pause (single pops, small bursts) go
    /// straight to the producer's index and leave the polite state alone: however many of
    /// them found items, the next large read does not pause on their account (nor does a
    /// small read that finds nothing end the large reads' streak). A consumer of
    /// zero-sized items never pauses, whatever it asks for.
    #[test]
    fn reads_that_may_not_pause_leave_the_polite_state_alone() {
        let (mut tx, mut rx) = channel::<u64>(64).unwrap();
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
                assert_eq!(tx.push(99), Err(99));
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
        assert_eq!(rx.stores, 0, "nothing released");
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
        tx.push_burst(&[0, 1, 2]);
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
}
