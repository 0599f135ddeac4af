//! Bounded single-producer single-consumer ring.
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
//!
//! Lamport's ring buffer with free-running indices, each end keeping a private copy of the
//! other end's index and reloading it only when that copy says full or empty (the cached
//! indices of MCRingBuffer and FastForward, as rtrb and DPDK's single-producer
//! single-consumer `rte_ring` do), so a burst reads the other end's line at most once.
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
//! end's, wherever the two handles are stored (handles allocated side by side were slower:
//! `docs/performance-notes.md` in the repository, section 12). One burst of n items costs the
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
//! Every publication is immediate: each `push`, burst and chunk commit stores the
//! producer's index, and each `pop`, burst, bulk pop and read chunk stores the consumer's,
//! so a slot a pop has emptied is free for the producer at once, as in rtrb.
//!
//! [`Consumer::set_lazy_release`] turns on lazy release for single pops: they release
//! their slots in groups of [`release_batch_for`]`(slots)` (an eighth of the ring, at most
//! 16; rings of up to 15 slots release every pop), and in any case when a pop takes the
//! last item the consumer knows of, before it reads the producer's index for more, in
//! [`release_pending`](Consumer::release_pending), and when it is dropped. The consumer
//! then writes its index line once per group instead of once per item, and a producer that
//! finds the ring full reads a line that changes once per group, not one it steals from
//! the consumer on every pop. Measured side by side in the report
//! (`spsc_r1024_burst1`, `flowline_lazy`; `docs/performance-notes.md` in the repository,
//! "Lazy release of single pops"): single items ran faster with it, with stack and boxed
//! ends. It is an option because of
//! the call it needs (below), which users of other rings do not expect: turn it on where
//! a consumer takes single items and keeps popping.
//!
//! Its cost: after single pops, the producer may see up to `release_batch - 1` fewer free
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
//! Off by default; [`Consumer::set_polite`] turns it on for reads that ask for at least
//! 256 bytes of items ([`PolitePolling::LargeReads`]: 32 `u64`s, 4 packets of 64 bytes) or
//! for every read ([`PolitePolling::On`]). A consumer that trails a streaming producer
//! closely finds a few new items each time it reads the producer's index, and each read
//! takes the index line away from the producer, which rewrites it on every publication.
//! With polite polling, a consumer whose last reads of the index each found new items, and
//! which has nothing left to take, first waits 16 spin-loop hints (the length of a `pause`
//! varies by CPU) before it reads the index again, so that one transfer of the line brings a
//! batch.
//!
//! **Why it is an option.** On the machines measured, the pause sped up bursts of 32 when
//! the cores were far apart and changed nothing when they were near, while it slowed
//! bursts of 8 and single pops, and lengthened the push-to-pop time under a steady load;
//! the figures are in `docs/performance-notes.md` in the repository ("Polite polling").
//! It pays for a consumer that reads large bursts from a streaming producer on a far core
//! and can afford the latency.
//!
//! A read that asks for a line's worth or two gains little from a batch and pays the
//! pause in full; one that asks for four lines or more gets them in one transfer of the
//! index line. Turn it [`On`](PolitePolling::On) for small reads only where your own
//! measurement shows a gain and the latency is affordable, and
//! [`Off`](PolitePolling::Off) where a consumer polls many rings in turn.
//!
//! **The gain depends on the CPU.** On some hosts [`On`](PolitePolling::On) moves single
//! items and small bursts faster than the default while the median push-to-pop time grows,
//! on others it gains nothing (`docs/performance-notes.md`, section 4). Measure on yours.
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
//! a consumer that pauses settles with a batch in the ring, so the median push-to-pop time
//! grows under a steady stream of items (`docs/performance-notes.md`, section 4). The pause stops
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

use core::fmt;
use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};

use crossbeam_utils::CachePadded;

use super::lines::LineCounter;
pub use super::polite::PolitePolling;
use super::polite::{self, Polite};
use super::raw;
use super::speculation::index_unless_end;
#[cfg(feature = "std")]
use super::Wait;
use super::{CapacityError, NoWait, PopError, WaitMode};
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::{AccessTracker, Arc, HandleArc};
#[cfg(feature = "std")]
use crate::wait::{self, PushWaitError, Sleepers, WaitError, WaitStrategy};
use alloc::vec::Vec;
#[cfg(feature = "std")]
use std::time::Duration;

mod chunks;
mod consumer;
#[cfg(feature = "async")]
mod futures {
    //! The async waits of the SPSC ring's waitable ends (feature `async`): the ring's
    //! names for the futures of [`crate::fifo::futures`], and the methods that make them.

    use super::*;
    crate::fifo::ends::async_ends!("spsc");
}
#[cfg(feature = "std")]
mod io {
    //! `std::io` for byte rings (`std`): the producer end of a `spsc` ring of `u8` is an
    //! [`std::io::Write`], the consumer end an [`std::io::Read`]. The ends of a waitable
    //! ring block as a pipe's do (a write waits for room, a read for bytes; a write after
    //! the consumer is gone is [`BrokenPipe`](std::io::ErrorKind::BrokenPipe)); those of
    //! a `channel` ring never block, as rtrb's: a full ring (write) or an empty one (read)
    //! is [`WouldBlock`](std::io::ErrorKind::WouldBlock). A read of an empty ring whose
    //! producer is gone is the end of the stream (`Ok(0)`).

    use super::*;
    crate::fifo::ends::byte_io!("spsc", "its producer is gone");
    #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
    crate::fifo::ends::async_byte_io!("spsc", "its producer is gone");
}
mod producer;
#[cfg(all(test, not(loom)))]
mod tests;
#[cfg(feature = "std")]
mod waits;

pub use chunks::{ReadChunk, ReadChunkIntoIter, WriteChunk};
#[cfg(feature = "stream")]
pub use futures::ItemStream;
#[cfg(feature = "async")]
pub use futures::{PopBurstFuture, PopFuture, PushFuture};

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
#[doc(alias = "bounded")]
pub fn channel<T>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    make(capacity, 0, None)
}

/// As [`channel`], for a ring whose ends can also wait: [`Producer::push_wait`],
/// [`Consumer::pop_wait`] and their burst forms (see [`crate::wait`]). Every publication
/// of such a ring (one per push, burst or chunk commit) also checks whether the other end
/// sleeps: a load of a word nobody writes while both ends run, on the line after the index
/// just stored (so it stays in both caches), and a predictable branch.
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
    make(capacity, 0, None)
}

/// **Testing only, not for production:** as [`channel`], with both free-running indices
/// starting at `start`, so that tests (this crate's and outside suites) can start a ring
/// just below the wrap point of its `usize` counters, e.g. `usize::MAX - 3`. The ring
/// behaves exactly as one that has moved `start` items. Hidden from the docs and outside
/// any semver promise.
#[doc(hidden)]
#[cfg(any(test, feature = "__test_hooks"))]
pub fn with_start_index<T>(
    capacity: usize,
    start: usize,
) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    make(capacity, start, None)
}

/// **Testing only, not for production:** as [`with_start_index`], with single pops
/// releasing their slots in groups of `release_batch` (clamped to 1..=slots) instead of
/// one at a time (or [`release_batch_for`] with lazy release on), so that tests can
/// exercise lazy release on small rings.
/// Hidden from the docs and outside any semver promise.
#[doc(hidden)]
#[cfg(any(test, feature = "__test_hooks"))]
pub fn with_release_batch<T>(
    capacity: usize,
    start: usize,
    release_batch: usize,
) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    make(capacity, start, Some(release_batch))
}

/// The largest group in which single pops release their slots with lazy release on: 16 slots, two
/// 64-byte lines of 8-byte items. Groups of 8-32 ran at about rtrb's speed; groups of 128
/// left the producer finding the ring full while it waited for a group to be released
/// (`docs/performance-notes.md` in the repository, "Lazy release of single pops").
pub const MAX_RELEASE_BATCH: usize = 16;

/// How many slots single pops consume before releasing them to the producer with lazy
/// release on ([`Consumer::set_lazy_release`]), for a ring of `slots` slots: an eighth of
/// the ring, at most [`MAX_RELEASE_BATCH`], at least 1 (rings of up to 15 slots release
/// every pop). See "Lazy release" in the module docs.
///
/// ```
/// use flowline::fifo::spsc::release_batch_for;
/// assert_eq!((release_batch_for(8), release_batch_for(64), release_batch_for(1024)), (1, 8, 16));
/// ```
#[must_use]
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
#[cfg(any(test, feature = "__test_hooks"))]
#[allow(clippy::type_complexity)]
pub fn build<T, W: WaitMode>(
    capacity: usize,
    start: usize,
    release_batch: Option<usize>,
) -> Result<(Producer<T, W>, Consumer<T, W>), CapacityError> {
    make(capacity, start, release_batch)
}

/// A ring of `capacity` items whose indices start at `start`, its single pops releasing
/// in groups of `release_batch` (`None`: each at once).
#[allow(clippy::type_complexity)]
fn make<T, W: WaitMode>(
    capacity: usize,
    start: usize,
    release_batch: Option<usize>,
) -> Result<(Producer<T, W>, Consumer<T, W>), CapacityError> {
    let slots = CapacityError::slots_for(capacity, core::mem::size_of::<T>())?;
    // Single pops release at once unless the consumer turns lazy release on.
    let release_batch = release_batch.unwrap_or(1).clamp(1, slots);
    let buf = raw::alloc_slots::<T>(slots).ok_or(CapacityError::AllocFailed {
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
        #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
        io: Default::default(),
        shared: ManuallyDrop::new(HandleArc::new(Arc::clone(&shared))),
        _mode: PhantomData,
        lines: LineCounter::default(),
    };
    let consumer = Consumer {
        buf,
        mask: slots - 1,
        head: start,
        cached_tail: start,
        released: start,
        polite: {
            let mut p = Polite::new();
            p.set_enabled(PolitePolling::default() != PolitePolling::Off);
            p
        },
        polite_mode: PolitePolling::default(),
        polite_min: PolitePolling::default().min_want(core::mem::size_of::<T>()),
        release_batch,
        #[cfg(feature = "std")]
        strategy: WaitStrategy::default(),
        #[cfg(feature = "async")]
        coop: wait::Coop::new(),
        #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
        io: Default::default(),
        shared: ManuallyDrop::new(HandleArc::new(shared)),
        _mode: PhantomData,
        lines: LineCounter::default(),
    };
    Ok((producer, consumer))
}

/// The state both ends share. `tail` and `head` are each alone on a padded line; the rest
/// is read only at creation, by `is_abandoned` and at drop.
struct Shared<T> {
    /// Index one past the last published item. Written by the producer only. On the next
    /// line of its padded unit (with `std`): a consumer sleeping until items arrive
    /// (`pop_wait`), whose word is written only when it goes to sleep or wakes and read
    /// after every publication of `tail` by a waitable ring (never by a `channel` ring).
    tail: CachePadded<Index>,
    /// Index of the next item to consume. Written by the consumer only. On the next line
    /// of its unit: a producer sleeping until room appears (`push_wait`), likewise.
    head: CachePadded<Index>,
    producer_gone: AtomicBool,
    consumer_gone: AtomicBool,
    buf: *mut MaybeUninit<T>,
    slots: usize,
    tracker: AccessTracker,
    _owns: PhantomData<T>,
}

/// A ring index: with `std`, with the sleepers its stores wake on the next line.
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
                unsafe { raw::free_slots(self.0, self.1) };
            }
        }
        let _free = FreeBuf(self.buf, self.slots);
        // Both ends are gone (this is the last Arc), so the indices are final.
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        let n = tail.wrapping_sub(head);
        let mask = self.slots - 1;
        self.tracker.write_each(n, |k| head.wrapping_add(k) & mask);
        let (a, b) = raw::split_runs(self.buf.cast::<T>(), self.slots, head & mask, n);
        // SAFETY: slots in [head, tail) hold initialised items that were published and not
        // consumed (at most `slots` of them, as two in-bounds runs); each is dropped once
        // here and the buffer is freed right after, by `_free`.
        unsafe { raw::drop_runs(a, b) };
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
    /// The async writes' wait between polls (`AsyncWrite`): see `fifo::async_io`.
    #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
    io: crate::fifo::async_io::IoWait,
    /// The ring's shared state (a [`HandleArc`]: see why there); given up in `Drop`.
    shared: ManuallyDrop<HandleArc<Shared<T>>>,
    /// Whether publications check for a sleeper (see [`WaitMode`]).
    _mode: PhantomData<fn() -> W>,
    /// Its index stores and the loads of `head` that found it moved (each took the
    /// consumer's index line): unit tests check that nothing is rewritten in vain, and
    /// `--cfg flowline_lines` keeps them for `line_counts`.
    lines: LineCounter,
}

// SAFETY: the producer may move to another thread with its `T`s; it is not `Sync`, so only
// one thread uses it at a time (the raw pointer makes it !Sync).
unsafe impl<T: Send, W: WaitMode> Send for Producer<T, W> {}

/// `Consumer::release_batch` of an end whose pops release every slot at once (as 1) and
/// also keep `released`, because a chunk's iterator moved `head` without publishing it
/// (see `Consumer::track_releases`).
const EAGER_TRACKED: usize = 0;

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
    /// With lazy release, the `head` value last stored to the shared line; single pops
    /// leave `head` ahead of it by less than `release_batch`. Eager pops store `head`
    /// without moving it, so it is read only while `release_batch > 1` (eager release
    /// compares `head` with the shared index instead).
    released: usize,
    /// Single pops release their slots in groups of this many (1: every pop, storing the
    /// shared index only; [`EAGER_TRACKED`]: every pop, also keeping `released`).
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
    /// The async reads' wait between polls (`AsyncRead`): see `fifo::async_io`.
    #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
    io: crate::fifo::async_io::IoWait,
    /// The ring's shared state (a [`HandleArc`]: see why there); given up in `Drop`.
    shared: ManuallyDrop<HandleArc<Shared<T>>>,
    /// Whether publications check for a sleeper (see [`WaitMode`]).
    _mode: PhantomData<fn() -> W>,
    /// Its index stores and the loads of `tail` that found it moved (see the producer's).
    lines: LineCounter,
}

// SAFETY: as for `Producer`.
unsafe impl<T: Send, W: WaitMode> Send for Consumer<T, W> {}

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
