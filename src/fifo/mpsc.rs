//! Bounded multi-producer single-consumer ring.
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
//!   (once per group for single pops: see "Lazy release").
//!   Per-slot state is never read per item.
//!
//! # Lazy release
//!
//! Publishing items is immediate: every push, burst and chunk commit publishes its run.
//! Releasing slots is immediate for bursts, bulk pops and read chunks (one `head` store per
//! call), but single [`pop`](Consumer::pop)s release their slots in groups of an eighth of
//! the ring, at most 128 (rings of up to 15 slots release every pop; see
//! [`RELEASE_BATCH_MAX`] for why not 16 as in `fifo::spsc`), and in any case when a read
//! finds nothing more published (a pop that finds nothing, a bulk pop or read chunk that
//! comes up short), in
//! [`release_pending`](Consumer::release_pending), and when the consumer is dropped. A
//! release also clears the descriptors of the runs taken since the previous one (a taken
//! descriptor must never match again, and must be cleared before a producer can reuse it),
//! so single items no longer make the consumer write the descriptor line that the
//! producer is writing the next descriptor into, once per item. Measured on this project's
//! 2-vCPU machine (`report -- mpsc_r1024_burst1`, one producer, alternating with the build
//! that released and cleared on every pop): see the README's results table.
//!
//! The cost, as for [`spsc`](super::spsc#lazy-release): after single pops the producers
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
//! Measured here with 2 producers on one core and the consumer on the other (report
//! scenario `mpsc_2p_oversub_burst8`): worst gap between consecutive receptions 4.0 ms when
//! full producers spin, 49 us when they yield.
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

use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr;

use crossbeam_utils::CachePadded;

use super::raw;
#[cfg(feature = "std")]
use super::Wait;
use super::{CapacityError, NoWait, WaitMode};
use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::sync::{AccessTracker, Arc, HandleArc};
#[cfg(feature = "std")]
use crate::wait::{self, PushWaitError, Sleepers, WaitError, WaitStrategy};
use alloc::boxed::Box;
use alloc::vec::Vec;
#[cfg(feature = "std")]
use std::time::Duration;

#[cfg(feature = "async")]
async_waits!(mpsc);

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
pub fn channel<T>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    build(capacity, 0)
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
    build(capacity, 0)
}

/// Stamp of a cleared (or never written) descriptor: matches no index (see
/// `Shared::stamp_of`).
const CLEARED: u64 = 0;

/// `n` run descriptors, all cleared, from zeroed memory: no per-descriptor initialisation
/// (the pages of a huge ring are not even touched until used), `None` if the allocator
/// refuses.
#[cfg(not(loom))]
fn cleared_runs(n: usize) -> Option<Box<[Run]>> {
    use alloc::alloc::{alloc_zeroed, Layout};
    let layout = Layout::array::<Run>(n).ok()?;
    debug_assert!(n > 0 && layout.size() > 0);
    // SAFETY: the layout has a non-zero size (n >= 2 descriptors of 16 bytes).
    let p = unsafe { alloc_zeroed(layout) }.cast::<Run>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a fresh allocation of `n` `Run`s with the global allocator and the
    // array layout a boxed slice uses; all-zero bytes are a valid `Run` (two `AtomicU64`
    // holding 0, i.e. `CLEARED` and no lengths).
    Some(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, n)) })
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
pub fn with_start_index<T>(
    capacity: usize,
    start: u64,
) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    build(capacity, start)
}

/// **Testing only, not for production:** [`with_start_index`] for either [`WaitMode`], so
/// that tests can start a [`waitable`] ring near the wrap point. Hidden from the docs and
/// outside any semver promise.
#[doc(hidden)]
#[allow(clippy::type_complexity)]
pub fn build<T, W: WaitMode>(
    capacity: usize,
    start: u64,
) -> Result<(Producer<T, W>, Consumer<T, W>), CapacityError> {
    build_with(capacity, start, None)
}

/// The largest group in which single pops release their slots by default. `fifo::spsc`
/// releases in groups of at most 16 ([`spsc::MAX_RELEASE_BATCH`](super::spsc::MAX_RELEASE_BATCH));
/// this ring keeps 128: with 16, single items ran 20-25% slower (`docs/performance-notes.md`
/// in the repository, "Lazy release of single pops"). A release here also clears the
/// descriptors of the runs
/// taken since the last one, and more releases mean more such passes and `head` stores
/// that the producers' reservations read.
pub const RELEASE_BATCH_MAX: usize = 128;

/// **Testing only, not for production:** as [`with_start_index`], with single pops
/// releasing their slots in groups of `release_batch` (clamped to 1..=slots) instead of the
/// default (an eighth of the ring, at most [`RELEASE_BATCH_MAX`]), so that tests
/// can exercise lazy release on small rings. Hidden from the docs and outside any semver
/// promise.
#[doc(hidden)]
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
        _mode: PhantomData,
    };
    let consumer = Consumer {
        shared: HandleArc::new(shared),
        head: start,
        valid_end: start,
        run_end: start,
        released: start,
        uncleared: start,
        release_batch: release_batch.map_or((slots / 8).clamp(1, RELEASE_BATCH_MAX), |b| {
            b.clamp(1, slots)
        }) as u64,
        #[cfg(feature = "std")]
        strategy: WaitStrategy::default(),
        #[cfg(feature = "async")]
        coop: wait::Coop::new(),
        _mode: PhantomData,
        #[cfg(test)]
        stores: 0,
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
    /// Whether publications check for a sleeper (see [`WaitMode`]).
    _mode: PhantomData<fn() -> W>,
}

impl<T, W: WaitMode> Clone for Producer<T, W> {
    /// Another producer handle for another thread.
    fn clone(&self) -> Self {
        // Relaxed: a count of handles; the consumer's Acquire load of it when it reaches 0
        // pairs with the Release decrement in Drop.
        self.shared.cold.producers.fetch_add(1, Ordering::Relaxed);
        Producer {
            shared: self.shared.clone(),
            cached_head: self.cached_head,
            #[cfg(feature = "std")]
            strategy: self.strategy,
            // A clone starts with a full budget of the same size.
            #[cfg(feature = "async")]
            coop: self.coop.refilled(),
            _mode: PhantomData,
        }
    }
}

impl<T, W: WaitMode> Drop for Producer<T, W> {
    fn drop(&mut self) {
        // Release: this handle's publications happen before a consumer that sees 0.
        self.shared.cold.producers.fetch_sub(1, Ordering::Release);
        // A consumer sleeping in `pop_wait` re-checks (the last producer's drop closes).
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.items.notify();
        }
    }
}

impl<T, W: WaitMode> Producer<T, W> {
    /// Reserves up to `want` slots with one successful CAS on `tail`; returns the start
    /// index and the number reserved (0 if the ring is full).
    #[inline]
    fn reserve(&mut self, want: usize, all_or_nothing: bool) -> (u64, usize) {
        let cap = self.shared.slots as u64;
        let want64 = want.min(self.shared.slots) as u64;
        if all_or_nothing && want as u64 > cap {
            // Can never fit; nothing to reserve (and no shared line to touch).
            // Relaxed: the returned index is not used when nothing is reserved.
            return (self.shared.tail.load(Ordering::Relaxed), 0);
        }
        // Relaxed: the CAS below validates the value; nothing is read through it.
        let mut tail = self.shared.tail.load(Ordering::Relaxed);
        loop {
            let mut used = tail.wrapping_sub(self.cached_head);
            if used > cap || cap - used < want64 {
                // The cached head says too little is free (or is older than this tail
                // snapshot allows): refresh it. Acquire: pairs with the consumer's Release
                // head store, so its reads of the freed slots happen before we reuse them.
                self.cached_head = self.shared.head.load(Ordering::Acquire);
                used = tail.wrapping_sub(self.cached_head);
                if used > cap {
                    // The consumer is past this tail snapshot: the snapshot is stale.
                    tail = self.shared.tail.load(Ordering::Relaxed);
                    continue;
                }
            }
            let free = cap - used;
            let n = want64.min(free);
            if n == 0 || (all_or_nothing && n < want64) {
                return (tail, 0);
            }
            // Relaxed on both outcomes: the reservation only claims indices; the items are
            // published by the run's Release stamp, and slot reuse is ordered by `head`.
            match self.shared.tail.compare_exchange_weak(
                tail,
                tail.wrapping_add(n),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return (tail, n as usize),
                Err(t) => tail = t,
            }
        }
    }

    /// Publishes the run `[start, start + len)` whose first `valid` slots hold items.
    #[inline(always)]
    fn publish(&self, start: u64, len: usize, valid: usize) {
        debug_assert!(valid <= len && len <= MAX_SLOTS);
        let r = self.shared.desc(start);
        // Relaxed: published by the Release stamp store just after.
        r.lens
            .store(((len as u64) << 32) | valid as u64, Ordering::Relaxed);
        // Release: pairs with the consumer's Acquire stamp load in `run_at`.
        r.stamp
            .store(self.shared.stamp_of(start), Ordering::Release);
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.items.notify();
        }
    }

    /// Appends `value`, or gives it back if the ring is full.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel(1).unwrap();
    /// assert_eq!(tx.push(1), Ok(()));
    /// assert_eq!(tx.push(2), Err(2));
    /// ```
    #[inline]
    pub fn push(&mut self, value: T) -> Result<(), T> {
        let (start, n) = self.reserve(1, true);
        if n == 0 {
            return Err(value);
        }
        self.shared.tracker.write(self.shared.pos(start));
        // SAFETY: the slot was reserved by this handle's CAS and released by the consumer
        // (checked against `head`), so no one else reads or writes it until published.
        unsafe { (*self.shared.slot(start)).write(value) };
        self.publish(start, 1, 1);
        Ok(())
    }

    /// Reserves up to `n` slots to fill in place (fewer if fewer are free; possibly none).
    /// The reservation is published when the chunk is committed **or dropped**: the
    /// consumer stops at it until then, while other producers carry on.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// let mut c = tx.write_chunk(2);
    /// c.as_mut_slices().0[0].write(7);
    /// // SAFETY: one slot written above.
    /// unsafe { c.commit(1) };
    /// assert_eq!(rx.pop(), Some(7));
    /// ```
    #[inline]
    pub fn write_chunk(&mut self, n: usize) -> WriteChunk<'_, T, W> {
        let (start, len) = self.reserve(n, false);
        WriteChunk {
            producer: self,
            start,
            len,
            written: 0,
            committed: false,
        }
    }

    /// Burst: copies as many items from the front of `items` as fit, in one reservation and
    /// one publication; returns how many.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert_eq!(tx.push_burst(&[1, 2, 3, 4, 5]), 4);
    /// ```
    #[inline]
    pub fn push_burst(&mut self, items: &[T]) -> usize
    where
        T: Copy,
    {
        let mut c = self.write_chunk(items.len());
        let n = c.len;
        c.copy_from(&items[..n]);
        // SAFETY: all n slots initialised by copy_from.
        unsafe { c.commit(n) };
        n
    }

    /// Bulk: copies all of `items` and returns `true`, or nothing and returns `false`.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert!(!tx.push_bulk(&[1, 2, 3, 4, 5]));
    /// assert!(tx.push_bulk(&[1, 2, 3, 4]));
    /// ```
    #[inline]
    pub fn push_bulk(&mut self, items: &[T]) -> bool
    where
        T: Copy,
    {
        let (start, n) = self.reserve(items.len(), true);
        if n == 0 && !items.is_empty() {
            return false;
        }
        let mut c = WriteChunk {
            producer: self,
            start,
            len: n,
            written: 0,
            committed: false,
        };
        c.copy_from(items);
        // SAFETY: all n slots initialised by copy_from.
        unsafe { c.commit(n) };
        true
    }

    /// Burst from an iterator: reserves as many slots as are free (at most the iterator's
    /// upper size bound), moves items in until either runs out and publishes them; returns
    /// how many. Leftover items stay in the iterator; reserved slots it did not fill are
    /// published empty.
    ///
    /// While the iterator runs, the reserved slots are this producer's, as a
    /// [`write_chunk`](Self::write_chunk)'s are: other producers find that room taken, and
    /// the consumer stops at this run until it is published. An iterator without an upper
    /// bound reserves all free room, so it should not wait on this ring or on anything
    /// that waits on it; give a bounded iterator (`take(n)`) to reserve less.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<String>(2).unwrap();
    /// let mut it = ["a", "b", "c"].iter().map(|s| s.to_string());
    /// assert_eq!(tx.push_burst_iter(&mut it), 2);
    /// assert_eq!(it.next().as_deref(), Some("c"));
    /// ```
    pub fn push_burst_iter<I: Iterator<Item = T>>(&mut self, iter: &mut I) -> usize {
        let want = iter
            .size_hint()
            .1
            .unwrap_or(usize::MAX)
            .min(self.shared.slots);
        if want == 0 {
            return 0;
        }
        self.write_chunk(want).fill_from_iter(iter)
    }

    /// Bulk from an exact-size iterator: all its items, or none (the iterator comes back).
    /// An iterator that yields fewer than its `len()` leaves the rest of its run empty.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<Box<u8>>(2).unwrap();
    /// assert!(tx.push_bulk_iter(vec![Box::new(1), Box::new(2), Box::new(3)]).is_err());
    /// assert!(tx.push_bulk_iter(vec![Box::new(1)]).is_ok());
    /// ```
    pub fn push_bulk_iter<I>(&mut self, iter: I) -> Result<(), I::IntoIter>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: ExactSizeIterator,
    {
        let iter = iter.into_iter();
        let n = iter.len();
        let (start, got) = self.reserve(n, true);
        if got == 0 && n != 0 {
            return Err(iter);
        }
        WriteChunk {
            producer: self,
            start,
            len: got,
            written: 0,
            committed: false,
        }
        .fill_from_iter(&mut iter.take(n));
        Ok(())
    }

    /// Slots the ring has.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::mpsc::channel::<u8>(3).unwrap().0.capacity(), 4);
    /// ```
    pub fn capacity(&self) -> usize {
        self.shared.slots
    }

    /// Slots reserved or published and not yet released by the consumer (a snapshot):
    /// slots that single pops consumed count until the consumer releases them (see "Lazy
    /// release" in the [module docs](self)).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(tx.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        ring_len(&self.shared)
    }

    /// Free slots (a snapshot).
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert_eq!(tx.free(), 4);
    /// ```
    pub fn free(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Whether nothing is in the ring (a snapshot).
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert!(tx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the consumer has been dropped.
    ///
    /// ```
    /// let (tx, rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// drop(rx);
    /// assert!(tx.is_abandoned());
    /// ```
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release store in the consumer's Drop.
        self.shared.cold.consumer_gone.load(Ordering::Acquire)
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
        self.shared.cold.consumer_gone.load(Ordering::Relaxed)
    }
}

fn ring_len<T>(shared: &Shared<T>) -> usize {
    // Acquire on head pairs with the consumer's Release store; tail is read Relaxed (a
    // snapshot). Load head first so that tail - head never underflows.
    let head = shared.head.load(Ordering::Acquire);
    let tail = shared.tail.load(Ordering::Relaxed);
    tail.wrapping_sub(head).min(shared.slots as u64) as usize
}

impl<T, W: WaitMode> fmt::Debug for Producer<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::Producer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

/// Slots reserved by [`Producer::write_chunk`]: fill them in place, then `commit`.
///
/// Dropping the chunk publishes the reservation with no items (the consumer skips it);
/// values written and not committed are not dropped (as with any `MaybeUninit`).
/// Leaking the chunk (`mem::forget`) leaves the reservation unpublished forever: the
/// consumer stops there, and a drain loop waiting for `is_abandoned() && is_empty()`
/// never ends (the leaked reservation still counts in `len`).
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(4).unwrap();
/// let n = tx.write_chunk(2).fill_from_iter(&mut [5, 6].into_iter());
/// assert_eq!((n, rx.pop()), (2, Some(5)));
/// ```
pub struct WriteChunk<'a, T, W: WaitMode = NoWait> {
    producer: &'a mut Producer<T, W>,
    start: u64,
    len: usize,
    /// Slots `fill_from_iter` has initialised so far: published by `Drop` if it unwinds.
    written: usize,
    committed: bool,
}

impl<T, W: WaitMode> WriteChunk<'_, T, W> {
    /// Slots reserved.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(2).unwrap();
    /// assert_eq!(tx.write_chunk(5).len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was reserved (the ring was full).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(1).unwrap();
    /// tx.push(1).unwrap();
    /// assert!(tx.write_chunk(1).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The reserved slots as (at most) two runs in ring order.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// let mut c = tx.write_chunk(3);
    /// assert_eq!(c.as_mut_slices().0.len(), 3);
    /// ```
    pub fn as_mut_slices(&mut self) -> (&mut [MaybeUninit<T>], &mut [MaybeUninit<T>]) {
        let sh = &*self.producer.shared;
        sh.tracker
            .write_each(self.len, |k| sh.pos(self.start.wrapping_add(k as u64)));
        let first = self.len.min(sh.slots - sh.pos(self.start));
        // SAFETY: the `len` slots from `start` were reserved by this handle's CAS and are
        // free; the two runs are disjoint and in bounds, borrowed through `&mut self`.
        unsafe {
            (
                core::slice::from_raw_parts_mut(sh.slot(self.start), first),
                core::slice::from_raw_parts_mut(sh.buf, self.len - first),
            )
        }
    }

    fn copy_from(&mut self, items: &[T])
    where
        T: Copy,
    {
        let (a, b) = self.as_mut_slices();
        let (ia, ib) = items.split_at(a.len());
        // SAFETY: MaybeUninit<T> has T's layout; disjoint buffers of equal lengths.
        unsafe {
            raw::copy_items(ia.as_ptr(), a.as_mut_ptr().cast::<T>(), ia.len());
            raw::copy_items(ib.as_ptr(), b.as_mut_ptr().cast::<T>(), ib.len());
        }
    }

    /// Publishes the reservation with its first `k` slots as items; the other slots of the
    /// reservation are published empty.
    ///
    /// # Safety
    ///
    /// The first `k` slots (in ring order) were initialised through
    /// [`as_mut_slices`](WriteChunk::as_mut_slices).
    ///
    /// # Panics
    ///
    /// If `k > self.len()`.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// let mut c = tx.write_chunk(3);
    /// c.as_mut_slices().0[0].write(1);
    /// // SAFETY: slot 0 written above.
    /// unsafe { c.commit(1) };
    /// assert_eq!((rx.pop(), rx.pop()), (Some(1), None));
    /// ```
    pub unsafe fn commit(mut self, k: usize) {
        assert!(
            k <= self.len,
            "WriteChunk::commit({k}) but only {} slots were reserved",
            self.len
        );
        self.finish(k);
    }

    fn finish(&mut self, k: usize) {
        if self.committed {
            return;
        }
        // Marked first: if the publication unwinds (a consumer task's waker panicking in
        // the wake-up), `Drop` must not publish the run a second time (a second descriptor
        // with fewer valid items would make the consumer skip the published ones).
        self.committed = true;
        if self.len > 0 {
            self.producer.publish(self.start, self.len, k);
        }
    }

    /// Moves items from `iter` into the reserved slots until either runs out, publishes
    /// the reservation, and returns how many items it holds. If `iter.next()` panics, the
    /// items moved in before it are published (none is leaked or dropped twice).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<String>(4).unwrap();
    /// let n = tx.write_chunk(2).fill_from_iter(&mut ["x".to_string()].into_iter());
    /// assert_eq!(n, 1);
    /// assert_eq!(rx.pop().as_deref(), Some("x"));
    /// ```
    pub fn fill_from_iter<I: Iterator<Item = T>>(mut self, iter: &mut I) -> usize {
        while self.written < self.len {
            let Some(v) = iter.next() else { break };
            let sh = &*self.producer.shared;
            let index = self.start.wrapping_add(self.written as u64);
            sh.tracker.write(sh.pos(index));
            // SAFETY: a reserved, free slot (written < len); counted right after, so
            // `Drop` publishes only initialised slots if a later `next()` unwinds.
            unsafe { (*sh.slot(index)).write(v) };
            self.written += 1;
        }
        let n = self.written;
        self.finish(n);
        n
    }
}

impl<T, W: WaitMode> Drop for WriteChunk<'_, T, W> {
    fn drop(&mut self) {
        // An uncommitted reservation is published with what `fill_from_iter` wrote (none
        // for a chunk filled by hand) so the consumer can pass it.
        let n = self.written;
        self.finish(n);
    }
}

impl<T, W: WaitMode> fmt::Debug for WriteChunk<'_, T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::WriteChunk")
            .field("len", &self.len)
            .finish()
    }
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
    /// Whether publications check for a sleeper (see [`WaitMode`]).
    _mode: PhantomData<fn() -> W>,
    /// Stores of `head` so far (unit tests check that nothing is rewritten in vain).
    #[cfg(test)]
    stores: usize,
}

impl<T, W: WaitMode> Consumer<T, W> {
    /// Items ready in the current run, moving to the next published run when the current
    /// one is used up. Publishes `head` when it passes the empty tail of a run.
    #[inline(always)]
    fn ready(&mut self) -> usize {
        if self.head != self.valid_end {
            return self.valid_end.wrapping_sub(self.head) as usize;
        }
        loop {
            if self.head != self.run_end {
                // Skip the run's empty slots.
                self.head = self.run_end;
                self.valid_end = self.run_end;
                self.release();
            }
            match self.shared.run_at(self.head) {
                Some((len, valid)) => {
                    // Taken: its descriptor is cleared by the next `release`.
                    self.valid_end = self.head.wrapping_add(valid as u64);
                    self.run_end = self.head.wrapping_add(len as u64);
                    if valid > 0 {
                        return valid;
                    }
                }
                None => {
                    // Nothing more is published: a consumer that stops here leaves
                    // nothing pending (see "Lazy release").
                    self.release_pending();
                    return 0;
                }
            }
        }
    }

    /// Like `ready`, but also merges the published runs that follow a current run without
    /// holes into it, until `want` items are contiguous from `head` or a run with holes (or
    /// none) comes next: the items from `head` are then one contiguous stretch.
    fn ready_contiguous(&mut self, want: usize) -> usize {
        let mut n = self.ready();
        while n < want && n > 0 && self.valid_end == self.run_end {
            let Some((len, valid)) = self.shared.run_at(self.run_end) else {
                // Short, with nothing more published: leave nothing pending (a caller
                // waiting for `want` items would otherwise wait on a producer that waits
                // for the slots this end holds).
                self.release_pending();
                break;
            };
            // Taken (cleared by the next `release`).
            self.valid_end = self.run_end.wrapping_add(valid as u64);
            self.run_end = self.run_end.wrapping_add(len as u64);
            n += valid;
        }
        n
    }

    /// Items published and ready from `head`, across runs, counting up to `want` (reads
    /// descriptors, takes nothing).
    fn available(&mut self, want: usize) -> usize {
        let mut n = self.ready();
        let mut at = self.run_end;
        while n < want {
            match self.shared.run_at(at) {
                Some((len, valid)) => {
                    n += valid;
                    at = at.wrapping_add(len as u64);
                }
                None => {
                    // Short: leave nothing pending (see `ready_contiguous`).
                    self.release_pending();
                    break;
                }
            }
        }
        n
    }

    /// Publishes `head` to the producers: first clears the descriptors of the runs taken
    /// since the last publication (once a producer sees the new `head` it may publish a
    /// run at them again, and a stamp this end passed must never match again), then one
    /// Release store. With nothing new to clear or release (an empty chunk commit or burst,
    /// a second release in a row) it stores nothing: rewriting the value already there
    /// would still take the line from producers that poll it.
    #[inline]
    fn release(&mut self) {
        if self.head == self.released && self.uncleared == self.run_end {
            return;
        }
        let mut at = self.uncleared;
        while at != self.run_end {
            let len = self.shared.taken_len(at);
            self.shared.clear(at);
            at = at.wrapping_add(len);
        }
        self.uncleared = at;
        self.released = self.head;
        #[cfg(test)]
        {
            self.stores += 1;
        }
        // Release: pairs with the producers' Acquire head load in `reserve`, so this end's
        // reads of the freed slots (and its clearing of their descriptors) happen before
        // they are reused.
        self.shared.head.store(self.head, Ordering::Release);
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.room.notify();
        }
    }

    /// Releases to the producers the slots that single [`pop`](Self::pop)s consumed and
    /// have not released yet (see "Lazy release" in the [module docs](self)). Bursts,
    /// committed chunks, a pop that finds nothing and dropping this end do it on their
    /// own; call it when this end stops popping while items remain and then waits for a
    /// producer to have room.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(1024).unwrap();
    /// tx.push_burst(&[0; 1024]);
    /// rx.pop().unwrap();
    /// assert!(tx.push(1).is_err()); // the slot is not released yet
    /// rx.release_pending();
    /// assert!(tx.push(1).is_ok());
    /// ```
    #[inline]
    pub fn release_pending(&mut self) {
        if self.released != self.head {
            self.release();
        }
    }

    /// Takes the oldest published item, if any (stops at an unpublished reservation).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel(2).unwrap();
    /// tx.push('a').unwrap();
    /// assert_eq!(rx.pop(), Some('a'));
    /// assert_eq!(rx.pop(), None);
    /// ```
    #[inline(always)]
    pub fn pop(&mut self) -> Option<T> {
        if self.ready() == 0 {
            return None;
        }
        let sh = &*self.shared;
        sh.tracker.read(sh.pos(self.head));
        // SAFETY: `head` is inside a published run's items (`ready`), not yet consumed;
        // the item is moved out once and `head` passes it.
        let v = unsafe { (*sh.slot(self.head)).assume_init_read() };
        self.head = self.head.wrapping_add(1);
        if self.head.wrapping_sub(self.released) >= self.release_batch {
            self.release_after_pops();
        }
        Some(v)
    }

    /// [`release`](Self::release) for single pops, once per `release_batch` of them: out
    /// of line, so that `pop` stays small enough to be inlined into its caller's loop
    /// (inlined, the release and its sleeper check kept a waitable ring's `pop` out of
    /// line when the caller's crate is built as one code-generation unit: 139 instead of
    /// 113 instructions per push + pop).
    #[inline(never)]
    fn release_after_pops(&mut self) {
        self.release();
    }

    /// The oldest published item, without taking it.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel(2).unwrap();
    /// tx.push(3).unwrap();
    /// assert_eq!(rx.peek(), Some(&3));
    /// ```
    pub fn peek(&mut self) -> Option<&T> {
        if self.ready() == 0 {
            return None;
        }
        let sh = &*self.shared;
        sh.tracker.read(sh.pos(self.head));
        // SAFETY: a published, unconsumed item that stays while `self` is borrowed.
        Some(unsafe { (*sh.slot(self.head)).assume_init_ref() })
    }

    /// Moves up to `max` items out, in order, crossing runs, one ready stretch at a time:
    /// `f(i, a, b)` gets the stretch's items (the `i`th and following of this call) as at
    /// most two in-bounds runs of the buffer, in ring order, and must move all of them out
    /// as bytes; it may unwind only before it moves any (say, while it makes room), and
    /// then none of that stretch is taken. Publishes `head` once at the end (or on unwind,
    /// if earlier stretches were taken).
    #[inline]
    fn take_stretches(
        &mut self,
        max: usize,
        mut f: impl FnMut(usize, Stretch<T>, Stretch<T>),
    ) -> usize {
        /// Publishes `head` when it goes out of scope, if anything was taken.
        struct Publish<'a, T, W: WaitMode> {
            consumer: &'a mut Consumer<T, W>,
            n: usize,
        }
        impl<T, W: WaitMode> Drop for Publish<'_, T, W> {
            fn drop(&mut self) {
                // (`ready` may have published already, on finding nothing more.)
                if self.n > 0 {
                    self.consumer.release_pending();
                }
            }
        }
        let mut g = Publish {
            consumer: self,
            n: 0,
        };
        while g.n < max {
            let ready = g.consumer.ready().min(max - g.n);
            if ready == 0 {
                break;
            }
            let c = &mut *g.consumer;
            let sh = &*c.shared;
            let head = c.head;
            sh.tracker
                .read_each(ready, |k| sh.pos(head.wrapping_add(k as u64)));
            let first = ready.min(sh.slots - sh.pos(head));
            let a = Stretch(sh.slot(head).cast::<T>(), first);
            let b = Stretch(sh.buf.cast::<T>(), ready - first);
            f(g.n, a, b);
            // `f` moved the stretch out: it is taken.
            c.head = head.wrapping_add(ready as u64);
            g.n += ready;
        }
        g.n
    }

    /// Moves up to `max` items onto the end of `out` (see `take_stretches`).
    #[inline]
    fn take_onto(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        self.take_stretches(max, |_, a, b| {
            // SAFETY: `a` and `b` are published, unconsumed items of this ring, in bounds
            // and disjoint from `out`'s buffer; `append_runs` reserves before it moves
            // anything, and the caller passes them right after (nothing in between
            // unwinds), so each is read once.
            unsafe { raw::append_runs(out, (a.0, a.1), (b.0, b.1)) }
        })
    }

    /// Burst: copies up to `out.len()` published items into `out`, crossing runs, and
    /// releases them with one `head` store; returns how many.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(8).unwrap();
    /// let mut tx2 = tx.clone();
    /// tx.push_burst(&[1, 2]);
    /// tx2.push_burst(&[3]);
    /// let mut out = [0; 8];
    /// assert_eq!(rx.pop_burst(&mut out), 3);
    /// assert_eq!(&out[..3], &[1, 2, 3]);
    /// ```
    #[inline]
    pub fn pop_burst(&mut self, out: &mut [T]) -> usize
    where
        T: Copy,
    {
        let max = out.len();
        self.take_stretches(max, |i, a, b| {
            let dst = &mut out[i..i + a.1 + b.1];
            // SAFETY: published, unconsumed items of this ring in two in-bounds runs
            // (`T: Copy`: reading them leaves nothing to drop), disjoint from `out`, whose
            // range was bounds-checked just above.
            unsafe {
                raw::copy_items(a.0, dst.as_mut_ptr(), a.1);
                raw::copy_items(b.0, dst.as_mut_ptr().add(a.1), b.1);
            }
        })
    }

    /// Bulk: fills all of `out` and returns `true`, or takes nothing and returns `false` if
    /// fewer than `out.len()` published items are ready (across runs).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(8).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// let mut out = [0; 3];
    /// assert!(!rx.pop_bulk(&mut out));
    /// assert!(rx.pop_bulk(&mut out[..2]));
    /// assert_eq!(out[..2], [1, 2]);
    /// ```
    pub fn pop_bulk(&mut self, out: &mut [T]) -> bool
    where
        T: Copy,
    {
        if self.available(out.len()) < out.len() {
            return false;
        }
        let n = self.pop_burst(out);
        debug_assert_eq!(n, out.len());
        true
    }

    /// Burst into a `Vec`: moves up to `max` published items onto `out`; returns how many.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<String>(4).unwrap();
    /// tx.push("a".into()).unwrap();
    /// let mut v = Vec::new();
    /// assert_eq!(rx.pop_burst_into(&mut v, 8), 1);
    /// ```
    pub fn pop_burst_into(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        // Reserve what is known ready now (more may become ready while taking).
        out.reserve(self.ready().min(max));
        self.take_onto(out, max)
    }

    /// Bulk into a `Vec`: moves exactly `n` items onto `out` and returns `true`, or takes
    /// nothing and returns `false` if fewer are ready.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<String>(4).unwrap();
    /// tx.push("a".into()).unwrap();
    /// let mut v = Vec::new();
    /// assert!(!rx.pop_bulk_into(&mut v, 2));
    /// assert!(rx.pop_bulk_into(&mut v, 1));
    /// assert_eq!(v, ["a"]);
    /// ```
    pub fn pop_bulk_into(&mut self, out: &mut Vec<T>, n: usize) -> bool {
        if self.available(n) < n {
            return false;
        }
        out.reserve(n);
        let got = self.take_onto(out, n);
        debug_assert_eq!(got, n);
        true
    }

    /// Lends up to `n` published items in place, in order (fewer if fewer are ready;
    /// possibly none). The chunk is one contiguous stretch of the ring, so it ends early at
    /// a run that a producer left partly empty (a later call continues after it). Nothing
    /// is released to the producers until [`ReadChunk::commit`].
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(8).unwrap();
    /// let mut tx2 = tx.clone();
    /// tx.push_burst(&[1, 2]);
    /// tx2.push_burst(&[3]);
    /// let chunk = rx.read_chunk(8);
    /// let (a, b) = chunk.as_slices();
    /// assert_eq!(a.iter().chain(b).sum::<u32>(), 6);
    /// chunk.commit_all();
    /// assert!(rx.pop().is_none());
    /// ```
    pub fn read_chunk(&mut self, n: usize) -> ReadChunk<'_, T, W> {
        let len = self.ready_contiguous(n).min(n);
        ReadChunk {
            consumer: self,
            len,
        }
    }

    /// Slots the ring has.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::mpsc::channel::<u8>(3).unwrap().1.capacity(), 4);
    /// ```
    pub fn capacity(&self) -> usize {
        self.shared.slots
    }

    /// Slots reserved or published and not yet consumed (a snapshot; includes
    /// reservations still being written, and empty slots of partly filled runs). Slots this
    /// end consumed and has not released yet count as free here (the producers count them
    /// as used until then: see "Lazy release" in the [module docs](self)).
    ///
    /// ```
    /// let (mut tx, rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        // Relaxed: a snapshot. Never below `head`: this end passed only published runs,
        // whose reservations came before their Acquire-read publications.
        let tail = self.shared.tail.load(Ordering::Relaxed);
        tail.wrapping_sub(self.head).min(self.shared.slots as u64) as usize
    }

    /// Free slots (a snapshot).
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert_eq!(rx.free(), 4);
    /// ```
    pub fn free(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Whether nothing is in the ring (a snapshot).
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert!(rx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every producer handle has been dropped: what is in the ring now is all there
    /// will be. Two leaks defeat a drain loop on `is_abandoned() && is_empty()`, which then
    /// spins forever (bound such loops, e.g. with a timeout): a producer handle leaked with
    /// `mem::forget` keeps this `false`, and a [`WriteChunk`] leaked the same way leaves its
    /// reservation unpublished, counted in `len` forever.
    ///
    /// ```
    /// let (tx, rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// let tx2 = tx.clone();
    /// drop(tx);
    /// assert!(!rx.is_abandoned());
    /// drop(tx2);
    /// assert!(rx.is_abandoned());
    /// ```
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the producers' Release decrements, so their publications
        // are visible to the loads that follow.
        self.shared.cold.producers.load(Ordering::Acquire) == 0
    }
}

impl<T, W: WaitMode> Drop for Consumer<T, W> {
    fn drop(&mut self) {
        let cold = &self.shared.cold;
        // Relaxed: read only by Shared's Drop, after the last Arc is gone (the Arc's own
        // release/acquire orders these stores before it).
        cold.final_valid_end
            .store(self.valid_end, Ordering::Relaxed);
        cold.final_run_end.store(self.run_end, Ordering::Relaxed);
        // The flag before the release, whose wake-up runs producers' wakers: the end's
        // state is final before any user code runs.
        // Release: pairs with the producers' Acquire in `is_abandoned`.
        cold.consumer_gone.store(true, Ordering::Release);
        self.release();
        // Producers sleeping in `push_wait` learn that nothing more will be taken.
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.room.notify();
        }
    }
}

/// Blocking operations (see [`crate::wait`]): they wait by this handle's [`WaitStrategy`]
/// (a clone starts with its original's).
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
impl<T> Producer<T, Wait> {
    /// Sets how [`push_wait`](Self::push_wait) waits (default: [`WaitStrategy::default`]).
    ///
    /// ```
    /// use flowline::wait::WaitStrategy;
    /// let (mut tx, _rx) = flowline::fifo::mpsc::waitable::<u8>(4).unwrap();
    /// tx.set_wait_strategy(WaitStrategy::Spin);
    /// assert_eq!(tx.clone().wait_strategy(), WaitStrategy::Spin);
    /// ```
    pub fn set_wait_strategy(&mut self, strategy: WaitStrategy) {
        self.strategy = strategy;
    }

    /// How [`push_wait`](Self::push_wait) waits.
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::mpsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(tx.wait_strategy(), flowline::wait::WaitStrategy::default());
    /// ```
    pub fn wait_strategy(&self) -> WaitStrategy {
        self.strategy
    }

    /// Appends `value`, waiting up to `timeout` for room (`Duration::MAX`: no deadline).
    /// Costs what [`push`](Self::push) costs when there is room.
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] if the consumer is gone (checked first),
    /// [`WaitError::Timeout`] if the ring stayed full; the item comes back in the error.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::waitable::<u32>(1).unwrap();
    /// tx.push_wait(1, Duration::from_secs(30)).unwrap(); // room: returns at once
    /// let mut tx2 = tx.clone();
    /// // The ring is full: this waits until the pop below makes room.
    /// let t = std::thread::spawn(move || tx2.push_wait(2, Duration::from_secs(30)));
    /// assert_eq!(rx.pop_wait(Duration::from_secs(30)), Ok(1));
    /// assert_eq!(rx.pop_wait(Duration::from_secs(30)), Ok(2));
    /// t.join().unwrap().unwrap();
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
            |p| &p.shared.room,
        );
        match (r, slot) {
            (Ok(()), _) => Ok(()),
            (Err(error), Some(value)) => Err(PushWaitError { error, value }),
            (Err(_), None) => unreachable!("the item is kept until it is pushed"),
        }
    }

    /// Burst with a wait: waits up to `timeout` until a slot is free, then reserves and
    /// copies as many items from the front of `items` as fit (one CAS) and returns how
    /// many (0 only for an empty `items`).
    ///
    /// # Errors
    ///
    /// As [`push_wait`](Self::push_wait); nothing was pushed.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, _rx) = flowline::fifo::mpsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(tx.push_burst_wait(&[1, 2, 3, 4, 5], Duration::from_secs(1)), Ok(4));
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
            |p| &p.shared.room,
        )
    }

    /// The sleeper's re-check: a slot is free, or the consumer is gone.
    fn has_room_or_closed(&self) -> bool {
        // Acquire (gone): pairs with the consumer's Release in its Drop. Relaxed (tail): an
        // estimate; a wrong answer costs a poll, not a wake-up, as the poll that follows
        // reserves with a CAS. Acquire (head): as in `reserve`.
        self.shared.cold.consumer_gone.load(Ordering::Acquire)
            || self
                .shared
                .tail
                .load(Ordering::Relaxed)
                .wrapping_sub(self.shared.head.load(Ordering::Acquire))
                < self.shared.slots as u64
    }
}

/// Blocking operations (see [`crate::wait`]): they wait by this end's [`WaitStrategy`].
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
impl<T> Consumer<T, Wait> {
    /// Sets how the blocking pops wait (default: [`WaitStrategy::default`]).
    ///
    /// ```
    /// use flowline::wait::WaitStrategy;
    /// let (_tx, mut rx) = flowline::fifo::mpsc::waitable::<u8>(4).unwrap();
    /// rx.set_wait_strategy(WaitStrategy::Spin);
    /// assert_eq!(rx.wait_strategy(), WaitStrategy::Spin);
    /// ```
    pub fn set_wait_strategy(&mut self, strategy: WaitStrategy) {
        self.strategy = strategy;
    }

    /// How the blocking pops wait.
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::mpsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(rx.wait_strategy(), flowline::wait::WaitStrategy::default());
    /// ```
    pub fn wait_strategy(&self) -> WaitStrategy {
        self.strategy
    }

    /// Takes the oldest published item, waiting up to `timeout` for one
    /// (`Duration::MAX`: no deadline). Costs what [`pop`](Self::pop) costs when one is
    /// there.
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] once every producer is gone and nothing is left;
    /// [`WaitError::Timeout`] if nothing came in time.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::waitable::<u32>(4).unwrap();
    /// std::thread::spawn(move || tx.push(7).unwrap());
    /// assert_eq!(rx.pop_wait(Duration::from_secs(30)), Ok(7));
    /// assert_eq!(rx.pop_wait(Duration::from_secs(30)), Err(flowline::wait::WaitError::Disconnected));
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
            |c| &c.shared.items,
        )
    }

    /// Burst with a wait: waits up to `timeout` until an item is published, then moves up
    /// to `max` published items onto `out` and returns how many (0 only for `max == 0`).
    ///
    /// # Errors
    ///
    /// As [`pop_wait`](Self::pop_wait); `out` is unchanged.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::waitable::<u32>(8).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// let mut v = Vec::new();
    /// assert_eq!(rx.pop_burst_wait(&mut v, 8, Duration::from_secs(1)), Ok(2));
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
            |c| &c.shared.items,
        )
    }

    /// Waits until at least one item is ready, without taking it; returns how many this
    /// end can take now (in order, up to the first reservation not yet published). For a
    /// thread that consumes through other calls (chunks, several rings) and only needs to
    /// sleep until there is work.
    ///
    /// # Errors
    ///
    /// [`WaitError::Timeout`] if `timeout` passed first; [`WaitError::Disconnected`] if
    /// every producer is gone and nothing is left.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::wait::WaitError;
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(rx.wait_for_items(Duration::from_millis(1)), Err(WaitError::Timeout));
    /// tx.push_burst(&[1, 2]);
    /// assert_eq!(rx.wait_for_items(Duration::from_secs(1)), Ok(2));
    /// assert_eq!(rx.pop(), Some(1));
    /// drop(tx);
    /// assert_eq!(rx.pop(), Some(2));
    /// assert_eq!(rx.wait_for_items(Duration::from_secs(1)), Err(WaitError::Disconnected));
    /// ```
    pub fn wait_for_items(&mut self, timeout: Duration) -> Result<usize, WaitError> {
        wait::wait_loop(
            self,
            self.strategy,
            timeout,
            // Counting all ready runs costs one descriptor read while nothing is ready.
            |c| wait::poll_items(c, |c| c.available(usize::MAX), Consumer::is_abandoned),
            Consumer::has_items_or_closed,
            |c| &c.shared.items,
        )
    }

    /// The sleeper's re-check: items left in the current run, a run published after it,
    /// or every producer gone.
    fn has_items_or_closed(&self) -> bool {
        self.head != self.valid_end
            || self.shared.run_at(self.run_end).is_some()
            || self.is_abandoned()
    }
}

/// Published items lent in place by [`Consumer::read_chunk`], released by `commit`.
///
/// Dropping a chunk without committing releases nothing: the items stay in the ring, and
/// the next read sees them again.
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(4).unwrap();
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
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.read_chunk(3).len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no item was ready.
    ///
    /// ```
    /// let (_tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert!(rx.read_chunk(3).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn raw_runs(&self) -> (*mut [T], *mut [T]) {
        let c = &*self.consumer;
        let sh = &*c.shared;
        sh.tracker
            .read_each(self.len, |k| sh.pos(c.head.wrapping_add(k as u64)));
        sh.runs_of(c.head, self.len)
    }

    /// The lent items as (at most) two runs in ring order.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(2).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// rx.pop();
    /// tx.push(3).unwrap(); // wraps
    /// let c = rx.read_chunk(2);
    /// assert_eq!(c.as_slices(), (&[2][..], &[3][..]));
    /// ```
    pub fn as_slices(&self) -> (&[T], &[T]) {
        let (a, b) = self.raw_runs();
        // SAFETY: the `len` slots from `head` hold published, initialised items of runs
        // the consumer took (Acquire in `run_at`) that no producer touches until they are
        // released; the runs are disjoint and in bounds, borrowed for the chunk's lifetime.
        unsafe { (&*a, &*b) }
    }

    /// The lent items as mutable runs, to modify packets in place before releasing them
    /// (or before dropping the chunk, which leaves them in the ring, modified).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(2).unwrap();
    /// tx.push(1).unwrap();
    /// rx.read_chunk(1).as_mut_slices().0[0] = 9;
    /// assert_eq!(rx.pop(), Some(9));
    /// ```
    pub fn as_mut_slices(&mut self) -> (&mut [T], &mut [T]) {
        let (a, b) = self.raw_runs();
        // SAFETY: as in `as_slices`, and `&mut self` makes the borrow exclusive.
        unsafe { (&mut *a, &mut *b) }
    }

    /// Drops the first `k` lent items in place and releases their slots to the producers
    /// with one index store. If an item's `Drop` panics, the other items are still dropped
    /// and all `k` are released (none is ever seen or dropped again).
    ///
    /// # Panics
    ///
    /// If `k > self.len()`.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
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
        /// Passes and releases the items when it goes out of scope: after their
        /// destructors ran, or while unwinding from one that panicked.
        struct Release<'a, T, W: WaitMode> {
            consumer: &'a mut Consumer<T, W>,
            n: usize,
        }
        impl<T, W: WaitMode> Drop for Release<'_, T, W> {
            fn drop(&mut self) {
                let c = &mut *self.consumer;
                c.head = c.head.wrapping_add(self.n as u64);
                c.release();
            }
        }
        let sh = &*self.consumer.shared;
        sh.tracker
            .write_each(k, |i| sh.pos(self.consumer.head.wrapping_add(i as u64)));
        let (a, b) = sh.runs_of(self.consumer.head, k);
        let _release = Release {
            consumer: self.consumer,
            n: k,
        };
        if core::mem::needs_drop::<T>() {
            // SAFETY: the k slots from `head` hold published items lent to this chunk (two
            // disjoint in-bounds runs); `_release` passes them after the drops, also on
            // unwind, so each is dropped exactly once and reused only after.
            unsafe { raw::drop_runs(a, b) };
        }
    }

    /// Drops all lent items and releases their slots.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
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
        f.debug_struct("mpsc::ReadChunk")
            .field("len", &self.len)
            .finish()
    }
}

impl<T, W: WaitMode> fmt::Debug for Consumer<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::Consumer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(not(loom))]
mod layout {
    use super::*;
    use static_assertions::const_assert;

    const_assert!(core::mem::align_of::<Consumer<u64>>() >= 128);
}

#[cfg(all(test, not(loom)))]
mod tests {
    // The crate may be `no_std`; the tests use the standard library's prelude.
    use super::*;
    #[allow(unused_imports)]
    use std::{
        borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec,
    };

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
        let stores = rx.stores;
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
            rx.stores, stores,
            "the consumer rewrote head on an empty ring"
        );
        assert_eq!(tx.push_burst(&[4]), 1);
        assert_eq!(rx.pop_burst(&mut out), 1);
        assert_eq!(rx.stores, stores + 1);
    }

    /// A bulk pop or a read chunk that comes up short, with nothing more published,
    /// releases what single pops left pending: a consumer looping on `pop_bulk_into(slots)`
    /// after one `pop` would otherwise wait forever on a producer that waits for that slot
    /// (found by review; fails without the releases in `available` / `ready_contiguous`).
    #[test]
    fn short_bulk_pops_and_read_chunks_leave_nothing_pending() {
        for bulk in [true, false] {
            let (mut tx, mut rx) = channel::<u32>(16).unwrap();
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

    #[test]
    fn full_and_wrap_with_capacity_1_and_2() {
        for cap in [1usize, 2] {
            let (mut tx, mut rx) = channel::<u64>(cap).unwrap();
            for round in 0..6u64 {
                for i in 0..cap as u64 {
                    tx.push(round * 10 + i).unwrap();
                }
                assert_eq!(tx.push(99), Err(99));
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
}
