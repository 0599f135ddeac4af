//! Per-core sharded counters and counter groups: statistics that never serialise the hot
//! path.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use flowline::counter::ShardedCounter;
//!
//! // Two writers, each adding on a line of its own; any thread reads the sum.
//! let drops = Arc::new(ShardedCounter::new(2));
//! let threads: Vec<_> = (0..2)
//!     .map(|_| {
//!         let mut h = drops.handle();
//!         std::thread::spawn(move || (0..1000).for_each(|_| h.add(1)))
//!     })
//!     .collect();
//! threads.into_iter().for_each(|t| t.join().unwrap());
//! assert_eq!(drops.sum(), 2000);
//! ```
//!
//! In a Linux pktgen study twelve generator threads stopped scaling at 24 Mpps because
//! every packet did one `atomic_long_inc` on a shared drop counter: each increment is a
//! locked read-modify-write that must own the one line, so the threads queue for it.
//! Without it every thread ran at 31 Mpps. A statistic should cost the hot path a store to
//! a line its own core owns, and nothing else.
//!
//! # [`ShardedCounter`]
//!
//! An array of `CachePadded` shards. A writer takes a [`CounterHandle`], which owns one
//! shard exclusively while it lives and keeps the running value itself: [`CounterHandle::add`]
//! is one plain add in the handle and one `Relaxed` store to the shard (no lock prefix, no
//! load, no line shared with another writer). The number of handle shards is fixed at
//! creation; when all are taken, [`ShardedCounter::try_handle`] says so
//! ([`ShardsExhausted`]) instead of sharing a shard behind your back. A dropped handle's
//! shard is recycled with its value kept, so nothing counted is ever lost.
//!
//! Code that cannot keep a handle uses [`ShardedCounter::add`]: it picks a shard from the
//! current CPU (Linux `sched_getcpu`; elsewhere a per-thread index) among a separate set of
//! per-CPU shards and does a `fetch_add` there. That is a locked instruction, but on a line
//! that only threads running on the same CPU touch, so it is not shared across cores.
//!
//! # Reading
//!
//! [`ShardedCounter::sum`] reads every shard (one line each). Guarantees, while writers only
//! add (and the total stays below 2^64):
//! * **exact at quiescence**: once every add has happened-before the call (threads joined,
//!   or synchronised by other means), `sum()` is the exact total;
//! * **monotonic**: successive `sum()` calls from one thread never go backwards, because
//!   each shard only grows and reads of one location are coherent;
//! * **no torn values**: each shard is read with one atomic load.
//!
//! A `sum()` that runs concurrently with adds is some value between the totals at its start
//! and at its end; it is not a snapshot of one instant across shards.
//!
//! # Reset
//!
//! [`ShardedCounter::reset`] does not write the shards (that would race with their owners'
//! stores and could be overwritten by them). It records the current total as a baseline
//! that later sums subtract. An add that runs concurrently with `reset` is counted either
//! before the reset (and so discarded) or after it, never both and never lost twice;
//! monotonicity holds between resets.
//!
//! # [`CounterGroup`]
//!
//! Several counters of one writer in one padded line (packets, bytes, drops...), named at
//! creation, updated through one [`GroupHandle`], and read with
//! [`CounterGroup::snapshot`]: per shard the values are read consistently (a sequence
//! number makes the reader retry if it saw the writer half-way through an update), so a
//! snapshot never shows bytes counted for a packet that is not.

use core::cell::Cell;
use core::fmt;
use core::marker::PhantomData;

use crossbeam_utils::CachePadded;

use crate::slot::WORDS_PER_LINE;
use alloc::boxed::Box;
use alloc::sync::Arc;

use crate::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Upper bound on shards of one counter or group: bounds the memory of a bad argument
/// (`2^16` shards x 128 bytes = 8 MiB).
///
/// ```
/// assert!(flowline::counter::MAX_SHARDS >= 1024);
/// ```
pub const MAX_SHARDS: usize = 1 << 16;

/// Every shard is taken by a live handle.
///
/// ```
/// use std::sync::Arc;
/// use flowline::counter::ShardedCounter;
///
/// let c = Arc::new(ShardedCounter::new(1));
/// let _h = c.try_handle().unwrap();
/// let err = c.try_handle().unwrap_err();
/// assert_eq!(err.shards(), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardsExhausted {
    shards: usize,
}

impl ShardsExhausted {
    /// How many shards the counter has (all taken).
    ///
    /// ```
    /// let e = flowline::counter::ShardsExhausted::clone(&{
    ///     let c = std::sync::Arc::new(flowline::counter::ShardedCounter::new(1));
    ///     let _h = c.handle();
    ///     c.try_handle().unwrap_err()
    /// });
    /// assert_eq!(e.shards(), 1);
    /// ```
    #[must_use]
    pub fn shards(&self) -> usize {
        self.shards
    }
}

impl fmt::Display for ShardsExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "all {} counter shards are held by live handles: create the counter with more \
             shards (one per writer thread), drop an idle handle, or use the handle-less add",
            self.shards
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ShardsExhausted {}

fn check_shards(shards: usize) {
    assert!(
        (1..=MAX_SHARDS).contains(&shards),
        "a counter needs between 1 and {MAX_SHARDS} shards (one per writer), got {shards}"
    );
}

/// Acquires the first free shard among `owned` flags (compare-and-swap false -> true).
fn acquire<'a, I: Iterator<Item = &'a AtomicBool>>(owned: I) -> Option<usize> {
    for (i, flag) in owned.enumerate() {
        // Relaxed pre-check avoids a locked operation on shards that are taken.
        // Acquire on success: pairs with the Release store of the shard's previous owner
        // in its handle's Drop, so this owner reads the value it left.
        if !flag.load(Ordering::Relaxed)
            && flag
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return Some(i);
        }
    }
    None
}

/// One writer's shard: the running value and whether a handle owns it.
struct Shard {
    value: AtomicU64,
    owned: AtomicBool,
}

/// A counter split into per-writer and per-CPU shards; see the [module docs](self).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use flowline::counter::ShardedCounter;
///
/// let drops = Arc::new(ShardedCounter::new(4)); // up to 4 writers with handles
/// let workers: Vec<_> = (0..4)
///     .map(|_| {
///         let drops = Arc::clone(&drops);
///         std::thread::spawn(move || {
///             let mut h = drops.handle();
///             for _ in 0..1000 {
///                 h.inc();
///             }
///         })
///     })
///     .collect();
/// for w in workers {
///     w.join().unwrap();
/// }
/// assert_eq!(drops.sum(), 4000);
/// ```
pub struct ShardedCounter {
    shards: Box<[CachePadded<Shard>]>,
    cpu_shards: Box<[CachePadded<AtomicU64>]>,
    baseline: AtomicU64,
}

impl ShardedCounter {
    /// A counter with `writers` handle shards, plus one per-CPU shard per available CPU for
    /// the handle-less [`add`](ShardedCounter::add).
    ///
    /// # Panics
    ///
    /// If `writers` is 0 or above [`MAX_SHARDS`].
    ///
    /// ```
    /// let c = flowline::counter::ShardedCounter::new(8);
    /// assert_eq!(c.shards(), 8);
    /// ```
    #[must_use]
    pub fn new(writers: usize) -> ShardedCounter {
        check_shards(writers);
        let cpus = cpu_count().min(MAX_SHARDS);
        ShardedCounter {
            shards: (0..writers)
                .map(|_| {
                    CachePadded::new(Shard {
                        value: AtomicU64::new(0),
                        owned: AtomicBool::new(false),
                    })
                })
                .collect(),
            cpu_shards: (0..cpus)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            baseline: AtomicU64::new(0),
        }
    }

    /// Number of handle shards (the most handles alive at once).
    ///
    /// ```
    /// assert_eq!(flowline::counter::ShardedCounter::new(2).shards(), 2);
    /// ```
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Takes a free shard for a writer.
    ///
    /// # Errors
    ///
    /// [`ShardsExhausted`] if every shard is held by a live handle.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let c = Arc::new(flowline::counter::ShardedCounter::new(1));
    /// let h = c.try_handle().unwrap();
    /// assert!(c.try_handle().is_err());
    /// drop(h);
    /// assert!(c.try_handle().is_ok());
    /// ```
    pub fn try_handle(self: &Arc<Self>) -> Result<CounterHandle, ShardsExhausted> {
        let shard = acquire(self.shards.iter().map(|s| &s.owned)).ok_or(ShardsExhausted {
            shards: self.shards.len(),
        })?;
        // Relaxed: the Acquire CAS in `acquire` already ordered the previous owner's last
        // store before this load.
        let value = self.shards[shard].value.load(Ordering::Relaxed);
        Ok(CounterHandle {
            counter: Arc::clone(self),
            slot: &self.shards[shard].value,
            shard,
            value,
            _not_sync: PhantomData,
        })
    }

    /// As [`try_handle`](ShardedCounter::try_handle).
    ///
    /// # Panics
    ///
    /// With the [`ShardsExhausted`] message if every shard is taken.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let c = Arc::new(flowline::counter::ShardedCounter::new(1));
    /// let mut h = c.handle();
    /// h.add(3);
    /// assert_eq!(c.sum(), 3);
    /// ```
    pub fn handle(self: &Arc<Self>) -> CounterHandle {
        match self.try_handle() {
            Ok(h) => h,
            Err(e) => panic!("{e}"),
        }
    }

    /// Handle-less add: `fetch_add` on the shard of the CPU this thread runs on.
    ///
    /// ```
    /// let c = flowline::counter::ShardedCounter::new(1);
    /// c.add(5);
    /// assert_eq!(c.sum(), 5);
    /// ```
    #[inline]
    pub fn add(&self, n: u64) {
        let i = cpu_index() % self.cpu_shards.len();
        // Relaxed: a statistic; readers synchronise with writers by other means (join)
        // when they need exactness.
        self.cpu_shards[i].fetch_add(n, Ordering::Relaxed);
    }

    fn raw_sum(&self) -> u64 {
        // Relaxed: each shard is one atomic value that only grows; coherence gives
        // monotonic reads per shard, and exactness needs the caller's happens-before.
        let owned = self.shards.iter().fold(0u64, |s, sh| {
            s.wrapping_add(sh.value.load(Ordering::Relaxed))
        });
        self.cpu_shards
            .iter()
            .fold(owned, |s, sh| s.wrapping_add(sh.load(Ordering::Relaxed)))
    }

    /// The total since creation or the last [`reset`](ShardedCounter::reset); see the
    /// [module docs](self) for the exact guarantees.
    ///
    /// ```
    /// let c = flowline::counter::ShardedCounter::new(1);
    /// assert_eq!(c.sum(), 0);
    /// ```
    pub fn sum(&self) -> u64 {
        // Relaxed: see raw_sum. A reset racing with this call can make the difference
        // negative for an instant; saturate rather than wrap.
        let base = self.baseline.load(Ordering::Relaxed);
        self.raw_sum().saturating_sub(base)
    }

    /// Starts counting from zero again: later sums subtract the total seen now. Adds
    /// concurrent with the reset land on one side of it (see the [module docs](self)).
    ///
    /// ```
    /// let c = flowline::counter::ShardedCounter::new(1);
    /// c.add(7);
    /// c.reset();
    /// c.add(1);
    /// assert_eq!(c.sum(), 1);
    /// ```
    pub fn reset(&self) {
        // Relaxed: the baseline is a plain value that sums subtract.
        self.baseline.store(self.raw_sum(), Ordering::Relaxed);
    }
}

impl fmt::Debug for ShardedCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedCounter")
            .field("sum", &self.sum())
            .field("shards", &self.shards.len())
            .finish()
    }
}

/// CPUs for the handle-less shards: the machine's (with `std`), else one.
fn cpu_count() -> usize {
    #[cfg(feature = "std")]
    {
        crate::topology::available_cpus()
    }
    #[cfg(not(feature = "std"))]
    {
        1
    }
}

/// The CPU this thread runs on (Linux), or a per-thread index elsewhere; 0 without `std`
/// (no threads to tell apart: every handle-less add goes to the one shared shard).
#[cfg(not(feature = "std"))]
#[inline]
fn cpu_index() -> usize {
    0
}

/// The CPU this thread runs on (Linux), or a per-thread index elsewhere.
#[cfg(feature = "std")]
#[inline]
fn cpu_index() -> usize {
    if crate::sync::MODEL_CHECKING {
        // The model checker needs the same choice in every execution.
        return 0;
    }
    if let Some(cpu) = crate::topology::current_cpu() {
        return cpu;
    }
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    INDEX.with(|i| *i)
}

/// A writer's exclusive shard of a [`ShardedCounter`]. `Send`, not `Sync`.
///
/// (The raw shard pointer inside makes the type neither `Send` nor `Sync` by default; `Send`
/// is restored below.)
///
/// ```
/// use std::sync::Arc;
/// let c = Arc::new(flowline::counter::ShardedCounter::new(1));
/// let mut h = c.handle();
/// h.inc();
/// h.add(41);
/// assert_eq!(h.value(), 42);
/// ```
pub struct CounterHandle {
    counter: Arc<ShardedCounter>,
    /// `&counter.shards[shard].value`, kept so `add` is one store with no index arithmetic
    /// or bounds check. Valid while `counter` (which owns the shard array) is alive.
    slot: *const AtomicU64,
    shard: usize,
    /// The shard's running value; this handle is its only writer.
    value: u64,
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: the handle owns its shard exclusively and keeps the counter alive through its
// Arc; moving it to another thread moves that ownership. It stays !Sync (PhantomData<Cell>).
unsafe impl Send for CounterHandle {}

impl CounterHandle {
    /// Adds `n`: a plain add here and one `Relaxed` store to this handle's own shard.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let c = Arc::new(flowline::counter::ShardedCounter::new(1));
    /// c.handle().add(2);
    /// assert_eq!(c.sum(), 2);
    /// ```
    #[inline]
    pub fn add(&mut self, n: u64) {
        self.value = self.value.wrapping_add(n);
        // SAFETY: `slot` points into the shard array owned by `self.counter`, which this
        // handle keeps alive; the array is never reallocated.
        let slot = unsafe { &*self.slot };
        // Relaxed: single writer (this handle); readers need only an untorn, growing value.
        slot.store(self.value, Ordering::Relaxed);
    }

    /// Adds 1.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let c = Arc::new(flowline::counter::ShardedCounter::new(1));
    /// c.handle().inc();
    /// assert_eq!(c.sum(), 1);
    /// ```
    #[inline]
    pub fn inc(&mut self) {
        self.add(1);
    }

    /// This shard's value (everything added through it, by this and earlier handles).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let c = Arc::new(flowline::counter::ShardedCounter::new(1));
    /// assert_eq!(c.handle().value(), 0);
    /// ```
    #[must_use]
    pub fn value(&self) -> u64 {
        self.value
    }
}

impl Drop for CounterHandle {
    fn drop(&mut self) {
        // Release: pairs with the next owner's Acquire CAS, so it starts from this value.
        self.counter.shards[self.shard]
            .owned
            .store(false, Ordering::Release);
    }
}

impl fmt::Debug for CounterHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CounterHandle")
            .field("shard", &self.shard)
            .field("value", &self.value)
            .finish()
    }
}

/// One writer's line of a group: a sequence number (odd while an update is in progress)
/// and the values.
struct GroupShard<const N: usize> {
    seq: AtomicUsize,
    owned: AtomicBool,
    values: [AtomicU64; N],
}

/// Several named counters of one writer in one padded line, read as consistent snapshots.
///
/// `N` must leave room in the line for the sequence word and the ownership flag:
/// `N <= WORDS_PER_LINE - 2` (14 on x86_64).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use flowline::counter::CounterGroup;
///
/// const PACKETS: usize = 0;
/// const BYTES: usize = 1;
/// let rx = Arc::new(CounterGroup::new(["packets", "bytes", "drops"], 2));
/// let mut h = rx.handle();
/// h.add_all([1, 1500, 0]);
/// h.add(PACKETS, 1);
/// h.add(BYTES, 64);
/// let s = rx.snapshot();
/// assert_eq!(s.get("packets"), Some(2));
/// assert_eq!(s[BYTES], 1564);
/// ```
pub struct CounterGroup<const N: usize> {
    names: [&'static str; N],
    shards: Box<[CachePadded<GroupShard<N>>]>,
}

impl<const N: usize> CounterGroup<N> {
    /// A group of counters named `names`, for up to `writers` handles at once.
    ///
    /// # Panics
    ///
    /// If `N` is 0 or does not fit in one line with the sequence word and the ownership
    /// flag (`N > WORDS_PER_LINE - 2`), or `writers` is 0 or above [`MAX_SHARDS`].
    ///
    /// ```
    /// let g = flowline::counter::CounterGroup::new(["rx", "tx"], 1);
    /// assert_eq!(g.names(), &["rx", "tx"]);
    /// ```
    #[must_use]
    pub fn new(names: [&'static str; N], writers: usize) -> CounterGroup<N> {
        assert!(
            N > 0 && N <= WORDS_PER_LINE - 2,
            "a counter group holds 1 to {} counters in one line, got {N}; split it into groups",
            WORDS_PER_LINE - 2
        );
        check_shards(writers);
        CounterGroup {
            names,
            shards: (0..writers)
                .map(|_| {
                    CachePadded::new(GroupShard {
                        seq: AtomicUsize::new(0),
                        owned: AtomicBool::new(false),
                        values: core::array::from_fn(|_| AtomicU64::new(0)),
                    })
                })
                .collect(),
        }
    }

    /// The counters' names, in index order.
    ///
    /// ```
    /// assert_eq!(flowline::counter::CounterGroup::new(["a"], 1).names(), &["a"]);
    /// ```
    #[must_use]
    pub fn names(&self) -> &[&'static str; N] {
        &self.names
    }

    /// Takes a free shard for a writer.
    ///
    /// # Errors
    ///
    /// [`ShardsExhausted`] if every shard is held by a live handle.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let g = Arc::new(flowline::counter::CounterGroup::new(["a"], 1));
    /// let _h = g.try_handle().unwrap();
    /// assert!(g.try_handle().is_err());
    /// ```
    pub fn try_handle(self: &Arc<Self>) -> Result<GroupHandle<N>, ShardsExhausted> {
        let shard = acquire(self.shards.iter().map(|s| &s.owned)).ok_or(ShardsExhausted {
            shards: self.shards.len(),
        })?;
        let sh = &self.shards[shard];
        // Relaxed: ordered after the previous owner's stores by the Acquire CAS.
        let values = core::array::from_fn(|i| sh.values[i].load(Ordering::Relaxed));
        let seq = sh.seq.load(Ordering::Relaxed);
        Ok(GroupHandle {
            group: Arc::clone(self),
            shard,
            line: &**sh as *const GroupShard<N>,
            seq,
            values,
            _not_sync: PhantomData,
        })
    }

    /// As [`try_handle`](CounterGroup::try_handle).
    ///
    /// # Panics
    ///
    /// With the [`ShardsExhausted`] message if every shard is taken.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let g = Arc::new(flowline::counter::CounterGroup::new(["a"], 1));
    /// g.handle().add(0, 1);
    /// assert_eq!(g.snapshot()[0], 1);
    /// ```
    #[must_use]
    pub fn handle(self: &Arc<Self>) -> GroupHandle<N> {
        match self.try_handle() {
            Ok(h) => h,
            Err(e) => panic!("{e}"),
        }
    }

    /// Sums every shard. Each shard's values are read as one consistent set (retrying while
    /// its writer is mid-update); different shards are read one after another.
    ///
    /// ```
    /// let g = flowline::counter::CounterGroup::new(["a", "b"], 3);
    /// assert_eq!(g.snapshot().values(), &[0, 0]);
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> GroupSnapshot<N> {
        let mut total = [0u64; N];
        for sh in self.shards.iter() {
            let vals = read_consistent(sh);
            for (t, v) in total.iter_mut().zip(vals) {
                *t = t.wrapping_add(v);
            }
        }
        GroupSnapshot {
            names: self.names,
            values: total,
        }
    }
}

/// Seqlock read of one group shard.
fn read_consistent<const N: usize>(sh: &GroupShard<N>) -> [u64; N] {
    let backoff = crate::sync::Backoff::new();
    loop {
        // Acquire: pairs with the writer's Release store that ended its update, so the
        // values of that update are visible.
        let s1 = sh.seq.load(Ordering::Acquire);
        if s1 % 2 == 0 {
            // Relaxed: validated by the sequence check below.
            let vals = core::array::from_fn(|i| sh.values[i].load(Ordering::Relaxed));
            // Acquire fence: keeps the value loads above before the re-check of `seq`
            // (pairs with the writer's Release fence after its odd store).
            fence(Ordering::Acquire);
            if sh.seq.load(Ordering::Relaxed) == s1 {
                return vals;
            }
        }
        backoff.snooze();
    }
}

impl<const N: usize> fmt::Debug for CounterGroup<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.snapshot(), f)
    }
}

/// A writer's exclusive line of a [`CounterGroup`]. `Send`, not `Sync`.
///
/// ```
/// use std::sync::Arc;
/// let g = Arc::new(flowline::counter::CounterGroup::new(["pkts"], 1));
/// let mut h = g.handle();
/// h.add(0, 5);
/// assert_eq!(h.values(), &[5]);
/// ```
pub struct GroupHandle<const N: usize> {
    group: Arc<CounterGroup<N>>,
    shard: usize,
    /// `&group.shards[shard]`, kept so an update reaches its line without going through
    /// the `Arc` and the array (two dependent loads and a bounds check). Valid while
    /// `group` (which owns the shard array, never reallocated) is alive.
    line: *const GroupShard<N>,
    seq: usize,
    values: [u64; N],
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: the handle owns its shard exclusively and keeps the group alive through its
// Arc; moving it to another thread moves that ownership (the raw `line` pointer is what
// made it !Send). It stays !Sync (PhantomData<Cell>).
unsafe impl<const N: usize> Send for GroupHandle<N> {}

impl<const N: usize> GroupHandle<N> {
    #[inline(always)]
    fn update(&mut self, f: impl FnOnce(&mut [u64; N]) -> u32) {
        // SAFETY: `line` points into the shard array owned by `self.group`, which this
        // handle keeps alive; the array is never reallocated.
        let sh = unsafe { &*self.line };
        // Relaxed odd store, then a Release fence: a reader that sees any value written
        // below also sees the odd sequence (its Acquire fence pairs with this one).
        sh.seq.store(self.seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let changed = f(&mut self.values);
        for (i, v) in self.values.iter().enumerate() {
            if changed & (1 << i) != 0 {
                // Relaxed: published by the Release store of `seq` below.
                sh.values[i].store(*v, Ordering::Relaxed);
            }
        }
        self.seq = self.seq.wrapping_add(2);
        // Release: pairs with the reader's Acquire load of `seq`.
        sh.seq.store(self.seq, Ordering::Release);
    }

    /// Adds `n` to counter `index`.
    ///
    /// # Panics
    ///
    /// If `index >= N`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let g = Arc::new(flowline::counter::CounterGroup::new(["a", "b"], 1));
    /// g.handle().add(1, 9);
    /// assert_eq!(g.snapshot().get("b"), Some(9));
    /// ```
    #[inline]
    pub fn add(&mut self, index: usize, n: u64) {
        assert!(
            index < N,
            "counter index {index} out of range for a group of {N}"
        );
        self.update(|v| {
            v[index] = v[index].wrapping_add(n);
            1 << index
        });
    }

    /// Adds `deltas[i]` to counter `i`, all in one update (a reader sees all or none).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let g = Arc::new(flowline::counter::CounterGroup::new(["pkts", "bytes"], 1));
    /// g.handle().add_all([1, 60]);
    /// assert_eq!(g.snapshot().values(), &[1, 60]);
    /// ```
    #[inline]
    pub fn add_all(&mut self, deltas: [u64; N]) {
        self.update(|v| {
            let mut changed = 0;
            for (i, (x, d)) in v.iter_mut().zip(deltas).enumerate() {
                if d != 0 {
                    *x = x.wrapping_add(d);
                    changed |= 1 << i;
                }
            }
            changed
        });
    }

    /// This shard's values.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let g = Arc::new(flowline::counter::CounterGroup::new(["a"], 1));
    /// assert_eq!(g.handle().values(), &[0]);
    /// ```
    #[must_use]
    pub fn values(&self) -> &[u64; N] {
        &self.values
    }
}

impl<const N: usize> Drop for GroupHandle<N> {
    fn drop(&mut self) {
        // Release: pairs with the next owner's Acquire CAS.
        self.group.shards[self.shard]
            .owned
            .store(false, Ordering::Release);
    }
}

impl<const N: usize> fmt::Debug for GroupHandle<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupHandle")
            .field("shard", &self.shard)
            .field("values", &self.values)
            .finish()
    }
}

/// Totals of a [`CounterGroup`], with the counters' names.
///
/// ```
/// let g = flowline::counter::CounterGroup::new(["a", "b"], 1);
/// let s = g.snapshot();
/// assert_eq!(s.iter().collect::<Vec<_>>(), [("a", 0), ("b", 0)]);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct GroupSnapshot<const N: usize> {
    names: [&'static str; N],
    values: [u64; N],
}

impl<const N: usize> GroupSnapshot<N> {
    /// A snapshot of these values (sums made elsewhere, such as the distributor's worker
    /// registry totals).
    #[cfg(feature = "std")]
    pub(crate) fn from_values(names: [&'static str; N], values: [u64; N]) -> Self {
        GroupSnapshot { names, values }
    }

    /// The value of the counter called `name`, if there is one.
    ///
    /// ```
    /// let g = flowline::counter::CounterGroup::new(["a"], 1);
    /// assert_eq!(g.snapshot().get("z"), None);
    /// ```
    #[must_use]
    pub fn get(&self, name: &str) -> Option<u64> {
        self.names
            .iter()
            .position(|n| *n == name)
            .map(|i| self.values[i])
    }

    /// The values in index order.
    ///
    /// ```
    /// let g = flowline::counter::CounterGroup::new(["a"], 1);
    /// assert_eq!(g.snapshot().values(), &[0]);
    /// ```
    #[must_use]
    pub fn values(&self) -> &[u64; N] {
        &self.values
    }

    /// `(name, value)` pairs in index order.
    ///
    /// ```
    /// let g = flowline::counter::CounterGroup::new(["a"], 1);
    /// assert_eq!(g.snapshot().iter().next(), Some(("a", 0)));
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.names.iter().copied().zip(self.values.iter().copied())
    }
}

impl<const N: usize> core::ops::Index<usize> for GroupSnapshot<N> {
    type Output = u64;
    fn index(&self, i: usize) -> &u64 {
        &self.values[i]
    }
}

impl<const N: usize> fmt::Debug for GroupSnapshot<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(not(loom))]
mod layout {
    use super::*;
    use crate::slot::LINE_BYTES;
    use static_assertions::const_assert_eq;

    // A shard, group shard of the largest N, or per-CPU shard each fill exactly one
    // padded unit: no two writers share a line.
    const_assert_eq!(core::mem::size_of::<CachePadded<Shard>>(), LINE_BYTES);
    const_assert_eq!(core::mem::size_of::<CachePadded<AtomicU64>>(), LINE_BYTES);
    const_assert_eq!(
        core::mem::size_of::<CachePadded<GroupShard<{ WORDS_PER_LINE - 2 }>>>(),
        LINE_BYTES
    );

    // Handles move to their writer's thread but are never shared: the raw line pointers
    // (`CounterHandle::slot`, `GroupHandle::line`) do not change that.
    static_assertions::assert_impl_all!(CounterHandle: Send);
    static_assertions::assert_not_impl_any!(CounterHandle: Sync);
    static_assertions::assert_impl_all!(GroupHandle<2>: Send);
    static_assertions::assert_not_impl_any!(GroupHandle<2>: Sync);
}

#[cfg(all(test, not(loom)))]
mod tests {
    // The crate may be `no_std`; the tests use the standard library's prelude.
    use super::*;
    #[allow(unused_imports)]
    use std::{
        borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec,
    };

    #[test]
    fn handles_recycle_shards_and_keep_values() {
        let c = Arc::new(ShardedCounter::new(2));
        let mut a = c.handle();
        let mut b = c.handle();
        a.add(10);
        b.add(5);
        assert!(c.try_handle().is_err());
        drop(a);
        let mut a2 = c.handle();
        assert_eq!(a2.value(), 10, "recycled shard keeps its value");
        a2.inc();
        assert_eq!(c.sum(), 16);
        drop((a2, b));
        assert_eq!(c.sum(), 16);
    }

    #[test]
    fn handle_less_add_and_reset() {
        let c = Arc::new(ShardedCounter::new(1));
        c.add(3);
        c.handle().add(4);
        assert_eq!(c.sum(), 7);
        c.reset();
        assert_eq!(c.sum(), 0);
        c.add(1);
        assert_eq!(c.sum(), 1);
    }

    #[test]
    #[should_panic(expected = "between 1 and")]
    fn zero_shards_panics_with_message() {
        let _ = ShardedCounter::new(0);
    }

    #[test]
    #[should_panic(expected = "counter shards are held")]
    fn handle_panics_when_exhausted() {
        let c = Arc::new(ShardedCounter::new(1));
        let _h = c.handle();
        let _ = c.handle();
    }

    #[test]
    #[should_panic(expected = "1 to 14 counters")]
    #[cfg(target_arch = "x86_64")]
    fn oversized_group_panics() {
        let _ = CounterGroup::new([""; 15], 1);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn group_index_out_of_range_panics() {
        let g = Arc::new(CounterGroup::new(["a"], 1));
        g.handle().add(1, 1);
    }

    #[test]
    fn threads_count_exactly() {
        let n = if cfg!(miri) { 50 } else { 100_000 };
        let c = Arc::new(ShardedCounter::new(3));
        let g = Arc::new(CounterGroup::new(["pkts", "bytes"], 3));
        let ts: Vec<_> = (0..3)
            .map(|_| {
                let (c, g) = (Arc::clone(&c), Arc::clone(&g));
                std::thread::spawn(move || {
                    let mut h = c.handle();
                    let mut gh = g.handle();
                    for _ in 0..n {
                        h.inc();
                        c.add(1);
                        gh.add_all([1, 64]);
                        let s = g.snapshot();
                        assert_eq!(s[1], 64 * s[0], "torn group snapshot");
                    }
                })
            })
            .collect();
        let mut last = 0;
        while !ts.iter().all(|t| t.is_finished()) {
            let s = c.sum();
            assert!(s >= last, "sum went backwards");
            last = s;
        }
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(c.sum(), 6 * n);
        assert_eq!(g.snapshot().values(), &[3 * n, 3 * 64 * n]);
    }
}
