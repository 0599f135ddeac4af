//! Bounded multi-producer single-consumer ring.
//!
//! # Example
//!
//! ```
//! use flowline::fifo::mpsc;
//!
//! let (tx, mut rx) = mpsc::channel::<(u32, u32)>(1024).unwrap();
//! let producers: Vec<_> = (0..2)
//!     .map(|p| {
//!         let mut tx = tx.clone();
//!         std::thread::spawn(move || {
//!             for i in 0..1000 {
//!                 while tx.push((p, i)).is_err() {
//!                     std::hint::spin_loop();
//!                 }
//!             }
//!         })
//!     })
//!     .collect();
//! drop(tx);
//! let mut next = [0u32; 2];
//! let mut got = 0;
//! while got < 2000 {
//!     if let Some((p, i)) = rx.pop() {
//!         assert_eq!(i, next[p as usize]); // per-producer order holds
//!         next[p as usize] += 1;
//!         got += 1;
//!     }
//! }
//! for p in producers {
//!     p.join().unwrap();
//! }
//! ```
//!
//! Producers reserve runs of slots with one compare-and-swap on a shared tail, as in DPDK's
//! multi-producer `rte_ring`, but each run is published by its own descriptor rather than
//! in reservation order, so a producer stalled between reserving and publishing holds up
//! no other producer (the consumer reads runs in order and waits only at the stalled one).
//!
//! [`channel`] returns a [`Producer`] (`Clone + Send`: one clone per producing thread) and a
//! [`Consumer`] (`Send`). Returns from many workers to one distributor, many RX threads into
//! one TX thread.
//!
//! # How a burst moves
//!
//! A producer **reserves** a run of slots with one compare-and-swap on the shared `tail`
//! (checking free space against its cached copy of the consumer's `head`), writes its items
//! into the run, then **publishes the run** by writing one descriptor for it: the run's
//! start index (a full-width stamp), its length and how many of its slots hold items. The
//! descriptor lives in a side array at the run's first slot, so one burst is published with
//! one descriptor store, whatever its size. The consumer reads the descriptor at its
//! `head`: if its stamp equals `head`, the run is complete and the consumer takes its items
//! in order; otherwise it stops there and reads nothing past it.
//!
//! Shared-line transfers for one burst of 32 eight-byte items (4 data lines):
//! * producer: the `tail` line (its CAS), 4 data lines, 1 descriptor line; the consumer's
//!   `head` line only when its cached copy says the ring is full;
//! * consumer: 1 descriptor line, 4 data lines, and its own `head` line once per call
//!   (once per group of single pops with lazy release on: see "Lazy release").
//!   Per-slot state is never read per item.
//!
//! # Lazy release
//!
//! Publishing items is immediate: every push, burst and chunk commit publishes its run.
//! Releasing slots is immediate too by default: every pop, burst, bulk pop and read chunk
//! stores `head` and clears the descriptors of the runs it finished, as crossbeam's queues
//! free a slot per pop.
//!
//! [`Consumer::set_lazy_release`] turns on lazy release for single pops: they release
//! their slots in groups of an eighth of the ring, at most 128 (rings of up to 15 slots
//! release every pop; see [`MAX_RELEASE_BATCH`] for why not 16 as in `fifo::spsc`), and in
//! any case when a read finds nothing more published (a pop that finds nothing, a bulk pop
//! or read chunk that comes up short), in [`release_pending`](Consumer::release_pending),
//! and when the consumer is dropped. A release also clears the descriptors of the runs
//! taken since the previous one (a taken descriptor must never match again, and must be
//! cleared before a producer can reuse it), so single items no longer make the consumer
//! write the descriptor line that the producer is writing the next descriptor into, once
//! per item. Single items run faster with it (measured side by side in the report,
//! `mpsc_r1024_burst1`, `flowline_lazy`; `docs/performance-notes.md` in the repository,
//! "Lazy release of single pops"). It is an option because of the call it needs (below), which users of other rings do not
//! expect.
//!
//! Its cost, as for [`spsc`](super::spsc#lazy-release): after single pops the producers
//! may see up to `release_batch - 1` fewer free slots than there are, until the consumer
//! releases them; the consumer's own [`len`](Consumer::len) counts them as free. A
//! consumer that keeps popping releases them, and so does one that pops until it finds
//! nothing. **One pattern needs a call:** a thread that stops popping while items remain
//! and then waits for a producer to have room must call
//! [`release_pending`](Consumer::release_pending) first, or both may wait forever.
//!
//! # Progress: a stalled producer blocks nobody else's enqueue
//!
//! Producers never wait for each other. A producer preempted between reserving and
//! publishing (or holding a [`WriteChunk`] open) leaves its run unpublished; every other
//! producer still reserves the runs after it and publishes them, and their calls return at
//! once. The consumer takes everything before the unpublished run, in order, and stops at
//! it; once it is published the consumer continues through the later runs. (Only the
//! capacity bounds how far the others can get ahead.)
//!
//! When producers share a core (more producer threads than CPUs), a producer that finds the
//! ring full should **yield rather than spin**: a producer preempted inside its reservation
//! needs the CPU back to publish, and a spinning neighbour holds it for a whole time slice.
//! The report's `mpsc_2p_oversub_burst8` (2 producers on one core, the consumer on the
//! other) shows the worst gap between consecutive receptions either way
//! (`docs/performance-notes.md` in the repository, section 12).
//!
//! DPDK's MP ring differs here: its producers publish by moving the shared tail in
//! reservation order, so a producer that reserved after a preempted one *spins inside its
//! enqueue call* until the preempted one finishes. On oversubscribed cores that turns one
//! preemption into a stall of every producer.
//!
//! # Capacity
//!
//! As for [`spsc`](super::spsc): rounded up to a power of two, every slot usable, at most
//! 2^31 slots. A run left partly unfilled (a chunk committed with fewer items than it
//! reserved) costs its empty slots until the consumer passes them.
//!
//! # Index wrap
//!
//! Indices are free-running **64-bit** counters on every target (32-bit ones too), and
//! every comparison between them is a wrapping difference. Run descriptors carry a full
//! 64-bit stamp, and the consumer clears the stamp of every run it has taken before it
//! publishes a `head` past it (see "Lazy release"), so a stamp left
//! from an earlier lap never matches, however many times the counters wrap (dropped empty
//! chunks included: each uses up indices without items). What remains is the limit every
//! CAS-reserved ring has: a producer handle whose cached view is from exactly a multiple of
//! 2^64 indices ago (idle, or preempted between its read of `tail` and its CAS) could be
//! fooled. Producing 2^64 indices takes at least 2^33 reservations on the largest ring
//! (2^31 slots; over a minute of nothing else at 10 ns each) and 2^54 on a 1024-slot
//! ring (centuries). On 32-bit targets the 32-bit counters of the first version wrapped
//! in seconds; these do not.

use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr;

use crossbeam_utils::CachePadded;

use super::lines::LineCounter;
use super::raw;
use super::speculation::index_unless_end;
#[cfg(feature = "std")]
use super::Wait;
use super::{CapacityError, NoWait, PopError, WaitMode};
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::sync::{AccessTracker, Arc, HandleArc};
#[cfg(feature = "std")]
use crate::wait::{self, PushWaitError, Sleepers, WaitError, WaitStrategy};
use alloc::boxed::Box;
use alloc::vec::Vec;
#[cfg(feature = "std")]
use std::time::Duration;

mod chunks;
mod consumer;
#[cfg(feature = "async")]
mod futures {
    //! The async waits of the MPSC ring's waitable ends (feature `async`): the ring's
    //! names for the futures of [`crate::fifo::futures`], and the methods that make them.

    use super::*;
    crate::fifo::ends::async_ends!("mpsc");
}
#[cfg(feature = "std")]
mod io {
    //! `std::io` for byte rings (`std`): the producer end of a `mpsc` ring of `u8` is an
    //! [`std::io::Write`], the consumer end an [`std::io::Read`]. The ends of a waitable
    //! ring block as a pipe's do (a write waits for room, a read for bytes; a write after
    //! the consumer is gone is [`BrokenPipe`](std::io::ErrorKind::BrokenPipe)); those of
    //! a `channel` ring never block, as rtrb's: a full ring (write) or an empty one (read)
    //! is [`WouldBlock`](std::io::ErrorKind::WouldBlock). A read of an empty ring whose
    //! producers are gone is the end of the stream (`Ok(0)`).

    use super::*;
    crate::fifo::ends::byte_io!("mpsc", "its producers are gone");
    #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
    crate::fifo::ends::async_byte_io!("mpsc", "its producers are gone");
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

/// The largest slot count: run lengths are packed in 32 bits.
const MAX_SLOTS: usize = 1 << 31;

/// Makes a ring of at least `capacity` slots (rounded up to a power of two).
///
/// Memory: per slot, one `T` plus a 16-byte run descriptor (at least two descriptors),
/// plus three 128-byte padded lines of indices and state.
///
/// # Errors
///
/// As [`spsc::channel`](super::spsc::channel); the largest capacity is 2^31 slots. An
/// allocation the allocator refuses (slots or descriptors) is
/// [`CapacityError::AllocFailed`], never an abort.
///
/// ```
/// let (tx, rx) = flowline::fifo::mpsc::channel::<u64>(100).unwrap();
/// assert_eq!(tx.capacity(), 128);
/// assert!(flowline::fifo::mpsc::channel::<u64>(0).is_err());
/// ```
#[doc(alias = "bounded")]
pub fn channel<T>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    build_with(capacity, 0, None)
}

/// As [`channel`], for a ring whose ends can also wait: [`Producer::push_wait`],
/// [`Consumer::pop_wait`] and their burst forms (see [`crate::wait`]). Every publication
/// of such a ring (one per push, burst or chunk commit) also checks whether the other end
/// sleeps: a load of a line nobody writes while the ends run, and a predictable branch.
///
/// # Errors
///
/// As [`channel`].
///
/// ```
/// use std::time::Duration;
/// let (mut tx, mut rx) = flowline::fifo::mpsc::waitable::<u32>(8).unwrap();
/// let mut tx2 = tx.clone();
/// let t = std::thread::spawn(move || tx2.push_wait(7, Duration::from_secs(30)));
/// assert_eq!(rx.pop_wait(Duration::from_secs(30)), Ok(7));
/// t.join().unwrap().unwrap();
/// # drop(tx);
/// ```
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
#[allow(clippy::type_complexity)]
pub fn waitable<T>(
    capacity: usize,
) -> Result<(Producer<T, Wait>, Consumer<T, Wait>), CapacityError> {
    build_with(capacity, 0, None)
}

/// Stamp of a cleared (or never written) descriptor: matches no index (see
/// `Shared::stamp_of`).
const CLEARED: u64 = 0;

/// `n` run descriptors, all cleared, from zeroed memory: no per-descriptor initialisation
/// (the pages of a huge ring are not even touched until used), `None` if the allocator
/// refuses.
#[cfg(not(loom))]
fn cleared_runs(n: usize) -> Option<Box<[Run]>> {
    debug_assert!(n > 0);
    // SAFETY: all-zero bytes are a valid `Run` (two `AtomicU64` holding 0, i.e. `CLEARED`
    // and no lengths), `Run` is 16 bytes and `n >= 2` descriptors.
    unsafe { raw::zeroed_boxed_slice(n) }
}

/// Under loom, atomics are model objects, not plain memory: build them one by one.
#[cfg(loom)]
fn cleared_runs(n: usize) -> Option<Box<[Run]>> {
    Some(
        (0..n)
            .map(|_| Run {
                stamp: AtomicU64::new(CLEARED),
                lens: AtomicU64::new(0),
            })
            .collect(),
    )
}

/// **Testing only, not for production:** as [`channel`], with the free-running 64-bit
/// indices starting at `start`, so that tests (this crate's and outside suites) can start
/// a ring just below the wrap point, e.g. `u64::MAX - 3`. The ring behaves exactly as one
/// that has moved `start` items. Hidden from the docs and outside any semver promise.
#[doc(hidden)]
#[cfg(any(test, feature = "__test_hooks"))]
pub fn with_start_index<T>(
    capacity: usize,
    start: u64,
) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    build_with(capacity, start, None)
}

/// **Testing only, not for production:** [`with_start_index`] for either [`WaitMode`], so
/// that tests can start a [`waitable`] ring near the wrap point. Hidden from the docs and
/// outside any semver promise.
#[doc(hidden)]
#[cfg(any(test, feature = "__test_hooks"))]
#[allow(clippy::type_complexity)]
pub fn build<T, W: WaitMode>(
    capacity: usize,
    start: u64,
) -> Result<(Producer<T, W>, Consumer<T, W>), CapacityError> {
    build_with(capacity, start, None)
}

/// The largest group in which single pops release their slots by default. `fifo::spsc`
/// releases in groups of at most 16 ([`spsc::MAX_RELEASE_BATCH`](super::spsc::MAX_RELEASE_BATCH));
/// this ring keeps 128: with 16, single items ran slower (`docs/performance-notes.md`
/// in the repository, "Lazy release of single pops"). A release here also clears the
/// descriptors of the runs
/// taken since the last one, and more releases mean more such passes and `head` stores
/// that the producers' reservations read.
pub const MAX_RELEASE_BATCH: usize = 128;

/// **Testing only, not for production:** as [`with_start_index`], with single pops
/// releasing their slots in groups of `release_batch` (clamped to 1..=slots) instead of
/// one at a time (or an eighth of the ring, at most [`MAX_RELEASE_BATCH`], with lazy
/// release on), so that tests can
/// exercise lazy release on small rings. Hidden from the docs and outside any semver
/// promise.
#[doc(hidden)]
#[cfg(any(test, feature = "__test_hooks"))]
pub fn with_release_batch<T>(
    capacity: usize,
    start: u64,
    release_batch: usize,
) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    build_with(capacity, start, Some(release_batch))
}

#[allow(clippy::type_complexity)]
fn build_with<T, W: WaitMode>(
    capacity: usize,
    start: u64,
    release_batch: Option<usize>,
) -> Result<(Producer<T, W>, Consumer<T, W>), CapacityError> {
    let slots = CapacityError::slots_for(capacity, core::mem::size_of::<T>())?;
    if slots > MAX_SLOTS {
        return Err(CapacityError::TooLarge {
            requested: capacity,
            max: MAX_SLOTS,
        });
    }
    // At least two descriptors, so that a stamp (lap + 1, see `stamp_of`) is never 0.
    let desc_slots = slots.max(2);
    let alloc_failed = || CapacityError::AllocFailed {
        slots,
        bytes: slots
            .saturating_mul(core::mem::size_of::<T>())
            .saturating_add(desc_slots.saturating_mul(core::mem::size_of::<Run>())),
    };
    let runs = cleared_runs(desc_slots).ok_or_else(alloc_failed)?;
    let buf = raw::alloc_slots::<T>(slots).ok_or_else(alloc_failed)?;
    // Before the sleepers are made: they read whether the barriers are asymmetric.
    #[cfg(feature = "std")]
    if W::WAITS {
        wait::register();
    }
    let shared = Arc::new(Shared {
        tail: CachePadded::new(AtomicU64::new(start)),
        head: CachePadded::new(AtomicU64::new(start)),
        cold: CachePadded::new(Cold {
            producers: AtomicUsize::new(1),
            consumer_gone: AtomicBool::new(false),
            final_valid_end: AtomicU64::new(start),
            final_run_end: AtomicU64::new(start),
        }),
        buf,
        runs,
        slots,
        desc_mask: desc_slots - 1,
        desc_shift: desc_slots.trailing_zeros(),
        tracker: AccessTracker::new(slots),
        #[cfg(feature = "std")]
        items: CachePadded::new(Sleepers::new()),
        #[cfg(feature = "std")]
        room: CachePadded::new(Sleepers::new()),
        _owns: PhantomData,
    });
    let producer = Producer {
        shared: HandleArc::new(Arc::clone(&shared)),
        cached_head: start,
        #[cfg(feature = "std")]
        strategy: WaitStrategy::default(),
        #[cfg(feature = "async")]
        coop: wait::Coop::new(),
        #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
        io: Default::default(),
        _mode: PhantomData,
    };
    let consumer = Consumer {
        shared: HandleArc::new(shared),
        head: start,
        valid_end: start,
        run_end: start,
        released: start,
        uncleared: start,
        // Single pops release at once unless the consumer turns lazy release on.
        release_batch: release_batch.map_or(1, |b| b.clamp(1, slots)) as u64,
        #[cfg(feature = "std")]
        strategy: WaitStrategy::default(),
        #[cfg(feature = "async")]
        coop: wait::Coop::new(),
        #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
        io: Default::default(),
        _mode: PhantomData,
        lines: LineCounter::default(),
    };
    Ok((producer, consumer))
}

/// `len` items from `ptr`: one contiguous part of a stretch of ready items
/// (`Consumer::take_stretches`).
#[derive(Clone, Copy)]
struct Stretch<T>(*const T, usize);

/// Descriptor of a published run, stored at the run's first index.
struct Run {
    /// The run's start index once published, as `Shared::stamp_of` encodes it. The
    /// consumer clears it (to `CLEARED`, which matches no index) in the first release after
    /// it takes the run, before `head` passes the run's start, so a
    /// stamp left from an earlier lap never matches, however many times the indices wrap.
    stamp: AtomicU64,
    /// `(len << 32) | valid`: slots in the run, and how many of them (from the start) hold
    /// items.
    lens: AtomicU64,
}

struct Cold {
    /// Live producer handles.
    producers: AtomicUsize,
    consumer_gone: AtomicBool,
    /// The consumer's position in a partly consumed run, left by its Drop for the final
    /// drop of leftovers.
    final_valid_end: AtomicU64,
    final_run_end: AtomicU64,
}

struct Shared<T> {
    /// Next index to reserve. CAS by producers. 64 bits on every target: see "Index wrap"
    /// in the module docs.
    tail: CachePadded<AtomicU64>,
    /// Next index to consume. Written by the consumer only.
    head: CachePadded<AtomicU64>,
    cold: CachePadded<Cold>,
    buf: *mut MaybeUninit<T>,
    runs: Box<[Run]>,
    slots: usize,
    /// `runs.len() - 1` (the descriptor array has at least two entries).
    desc_mask: usize,
    /// `log2(runs.len())`, at least 1.
    desc_shift: u32,
    tracker: AccessTracker,
    /// The consumer sleeping until items arrive (`pop_wait`), on its own line: written only
    /// when it goes to sleep or wakes, read after every run publication by a waitable
    /// ring (never by a `channel` ring).
    #[cfg(feature = "std")]
    items: CachePadded<Sleepers>,
    /// Producers sleeping until room appears (`push_wait`): read after every `head`
    /// publication by a waitable ring.
    #[cfg(feature = "std")]
    room: CachePadded<Sleepers>,
    _owns: PhantomData<T>,
}

#[cfg(feature = "std")]
impl<T> Shared<T> {
    /// The consumer waiting for items (`pop_wait`, async pops).
    #[inline(always)]
    fn items(&self) -> &Sleepers {
        &self.items
    }

    /// Producers waiting for room (`push_wait`, async pushes).
    #[inline(always)]
    fn room(&self) -> &Sleepers {
        &self.room
    }
}

// SAFETY: items move from producer threads to the consumer thread (`T: Send`); slots are
// accessed by one party at a time, ordered by the reservation CAS, the run descriptor's
// Release/Acquire stamp and the consumer's Release/Acquire head.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots - 1
    }

    /// The slot number of `index` (the truncation to `usize` keeps the low bits, which is
    /// all the mask uses).
    #[inline(always)]
    fn pos(&self, index: u64) -> usize {
        index as usize & self.mask()
    }

    #[inline(always)]
    fn slot(&self, index: u64) -> *mut MaybeUninit<T> {
        // SAFETY: `pos` is below the slot count: in bounds of the allocation.
        unsafe { self.buf.add(self.pos(index)) }
    }

    /// The stamp that marks a run published at `index`: its lap (the index bits above the
    /// descriptor number) plus one. Distinct indices at one descriptor have distinct laps,
    /// and the lap has at most 63 bits, so a stamp is never `CLEARED`.
    #[inline(always)]
    fn stamp_of(&self, index: u64) -> u64 {
        (index >> self.desc_shift) + 1
    }

    #[inline(always)]
    fn desc(&self, index: u64) -> &Run {
        &self.runs[index as usize & self.desc_mask]
    }

    /// The published run starting at `index`, as `(len, valid)`, or `None` if it is not
    /// published yet.
    #[inline(always)]
    fn run_at(&self, index: u64) -> Option<(usize, usize)> {
        let r = self.desc(index);
        // Acquire: pairs with the producer's Release stamp store in `publish`, making its
        // item writes and the `lens` store visible.
        if r.stamp.load(Ordering::Acquire) != self.stamp_of(index) {
            return None;
        }
        // Relaxed: ordered by the Acquire above.
        let lens = r.lens.load(Ordering::Relaxed);
        Some(((lens >> 32) as usize, (lens & 0xffff_ffff) as usize))
    }

    /// The length of the run at `index`, which the consumer has taken (read by the
    /// consumer only, before it clears the descriptor).
    #[inline(always)]
    fn taken_len(&self, index: u64) -> u64 {
        // Relaxed: the consumer read this descriptor with Acquire when it took the run;
        // nobody writes it again before the consumer publishes a `head` past it.
        self.desc(index).lens.load(Ordering::Relaxed) >> 32
    }

    /// The consumer has taken the run at `index`: its stamp must never match again.
    #[inline(always)]
    fn clear(&self, index: u64) {
        // Relaxed: the next store to this descriptor is a producer's publication of a run
        // it reserved after the consumer's later Release `head` store (which it read with
        // Acquire), so this store is ordered before it.
        self.desc(index).stamp.store(CLEARED, Ordering::Relaxed);
    }

    /// `n` slots from `start` as (at most) two in-bounds runs of the buffer, in ring order.
    #[inline(always)]
    fn runs_of(&self, start: u64, n: usize) -> (*mut [T], *mut [T]) {
        debug_assert!(n <= self.slots);
        let first = n.min(self.slots - self.pos(start));
        (
            ptr::slice_from_raw_parts_mut(self.slot(start).cast::<T>(), first),
            ptr::slice_from_raw_parts_mut(self.buf.cast::<T>(), n - first),
        )
    }

    /// Drops `[from, to)` in place (panic-safe: see `drop_runs`).
    ///
    /// # Safety
    ///
    /// Those slots hold published, unconsumed items that nobody else will read or drop.
    unsafe fn drop_items(&self, from: u64, to: u64) {
        let n = to.wrapping_sub(from) as usize;
        self.tracker
            .write_each(n, |k| self.pos(from.wrapping_add(k as u64)));
        let (a, b) = self.runs_of(from, n);
        // SAFETY: guaranteed by the caller; `runs_of` gives disjoint in-bounds runs.
        unsafe { raw::drop_runs(a, b) };
    }
}

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
        // Last Arc: every producer and the consumer are gone. The consumer left its
        // position; drop the rest of its current run, then every published run after it.
        let head = self.head.load(Ordering::Relaxed);
        let valid_end = self.cold.final_valid_end.load(Ordering::Relaxed);
        let i = self.cold.final_run_end.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        debug_assert!(
            valid_end.wrapping_sub(head) <= self.slots as u64,
            "consumer state corrupt"
        );
        // The published runs after it go next, also when an item's `Drop` panics in this
        // run or an earlier one (the guard goes on while the panic unwinds).
        let rest = LaterRuns {
            shared: self,
            at: i,
            tail,
        };
        // SAFETY: [head, valid_end) are the unconsumed items of the consumer's current run.
        unsafe { self.drop_items(head, valid_end) };
        drop(rest);
    }
}

/// Drops the published runs in `[at, tail)` at the end of a ring's life, one after the
/// other, and goes on with the rest when an item's `Drop` panics in one of them.
struct LaterRuns<'a, T> {
    shared: &'a Shared<T>,
    at: u64,
    tail: u64,
}

impl<T> Drop for LaterRuns<'_, T> {
    fn drop(&mut self) {
        while self.at != self.tail {
            // A run never published (its chunk was leaked with mem::forget) ends the walk:
            // its items, and any after it, are leaked rather than guessed at.
            let Some((len, valid)) = self.shared.run_at(self.at) else {
                break;
            };
            let from = self.at;
            self.at = from.wrapping_add(len as u64);
            // If this run's drop unwinds, this copy of the guard takes the runs after it.
            let rest = LaterRuns {
                shared: self.shared,
                at: self.at,
                tail: self.tail,
            };
            // SAFETY: the run is published and was never consumed (it lies past the
            // consumer's final position), and `at` has moved past it, so no guard drops
            // it again.
            unsafe {
                self.shared
                    .drop_items(from, from.wrapping_add(valid as u64))
            };
            core::mem::forget(rest);
        }
    }
}

/// A writing end of an MPSC ring. Clone it for each producing thread.
///
/// ```
/// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u32>(4).unwrap();
/// tx.push(1).unwrap();
/// assert_eq!(tx.len(), 1);
/// ```
pub struct Producer<T, W: WaitMode = NoWait> {
    /// The ring's shared state (a [`HandleArc`]: see why there).
    shared: HandleArc<Shared<T>>,
    /// Last value of `head` this handle read.
    cached_head: u64,
    /// How `push_wait` waits.
    #[cfg(feature = "std")]
    strategy: WaitStrategy,
    /// The async futures' cooperative budget (`set_async_budget`).
    #[cfg(feature = "async")]
    coop: wait::Coop,
    /// The async writes' wait between polls (`AsyncWrite`): see `fifo::async_io`.
    #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
    io: crate::fifo::async_io::IoWait,
    /// Whether publications check for a sleeper (see [`WaitMode`]).
    _mode: PhantomData<fn() -> W>,
}

/// The reading end of an MPSC ring. Aligned to 128 bytes so the position it rewrites on
/// every call never shares a line with a producer handle stored next to it.
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(4).unwrap();
/// tx.push(1).unwrap();
/// assert_eq!(rx.pop(), Some(1));
/// ```
#[repr(align(128))]
pub struct Consumer<T, W: WaitMode = NoWait> {
    /// The ring's shared state (a [`HandleArc`]: see why there).
    shared: HandleArc<Shared<T>>,
    /// Next index to consume.
    head: u64,
    /// End of the items of the current run (`head <= valid_end`).
    valid_end: u64,
    /// End of the current run (`valid_end <= run_end`).
    run_end: u64,
    /// The `head` the producers last saw (the last Release store of `shared.head`).
    released: u64,
    /// Start of the oldest run this end has taken whose descriptor is not cleared yet: the
    /// runs taken since the last publication of `head` form the chain
    /// `[uncleared, run_end)`, and `release` clears them before it publishes.
    uncleared: u64,
    /// Single pops publish `head` once this many slots are consumed and unpublished (see
    /// "Lazy release" in the module docs).
    release_batch: u64,
    /// How the blocking pops wait.
    #[cfg(feature = "std")]
    strategy: WaitStrategy,
    /// The async futures' cooperative budget (`set_async_budget`).
    #[cfg(feature = "async")]
    coop: wait::Coop,
    /// The async reads' wait between polls (`AsyncRead`): see `fifo::async_io`.
    #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
    io: crate::fifo::async_io::IoWait,
    /// Whether publications check for a sleeper (see [`WaitMode`]).
    _mode: PhantomData<fn() -> W>,
    /// Its stores of `head` (unit tests check that nothing is rewritten in vain).
    lines: LineCounter,
}

#[cfg(not(loom))]
mod layout {
    use super::*;
    use static_assertions::const_assert;

    const_assert!(core::mem::align_of::<Consumer<u64>>() >= 128);
}
