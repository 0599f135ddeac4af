//! Lock-contention metering, for code that still takes locks: see where the time goes
//! before guessing.
//!
//! A kernel with lockmeter once showed why binding netperf to CPUs other than the ones
//! taking the NIC's interrupts lost ~30% of transactions per second: 3% of CPU in spinlock
//! contention, and which lock site it was. This module gives user code the same table:
//!
//! ```text
//!  UTIL    CON     HOLD MEAN(   MAX)      WAIT MEAN(   MAX) (% CPU)      TOTAL NOWAIT  SPIN RJECT  NAME
//! 29.5%   6.6%      0.5us( 148.0us)      0.9us( 143.0us) ( 0.49%)   37622512  93.4%  6.6%  0.0%  tcp_v4_rcv
//! ```
//!
//! - [`SpinLock`]: a test-and-test-and-set spinlock with backoff (the waiter reads the lock
//!   word and tries to take it only when it looks free, so waiters do not steal the line
//!   from the holder on every spin).
//! - [`MeteredSpinLock`] and [`MeteredMutex`] (over `std::sync::Mutex`): the same
//!   guard-based API as the lock they wrap, metered per lock *site*: the call site of
//!   `lock`/`try_lock` (`#[track_caller]`, shown as `file:line`), or one name for every
//!   acquisition of the lock if it was made with `named`.
//! - [`snapshot`] (the figures as [`SiteStats`]) and [`table`] (the lockmeter layout above,
//!   sorted by contention).
//!
//! Per site: acquisitions (TOTAL), acquired without waiting (NOWAIT %), had to wait
//! (SPIN / CON %), `try_lock` failures (RJECT %, of all attempts), hold time mean and max,
//! wait time mean and max, utilisation (UTIL: the share of wall time since the site's first
//! use that the lock was held from it), and the share of the machine's CPU time spent
//! waiting at that site (% CPU: wait time over wall time times the CPU count).
//!
//! # Cost
//!
//! Each thread records into its own shard of the site's [`counter::CounterGroup`](crate::counter::CounterGroup)
//! (found through a thread-local cache, no shared line), and the maxima are read before
//! they are raised (a shared write only on a new maximum). Counts are exact. Waits are
//! always timed; holds are timed for one acquisition in [`DEFAULT_HOLD_SAMPLING`] (32) by
//! default, chosen at random, because two clock reads per hold cost more than the lock:
//! an uncontended metered lock/unlock pair then costs one shard update and a sampling
//! test: on this project's test machine (a KVM guest of an AMD EPYC) 5-10 ns more than
//! the bare lock (spinlock or std mutex), against 25-40 ns more when every hold is timed
//! ([`MeteredSpinLock::with_hold_sampling`]`(1)`: exact hold figures). Timestamps are the
//! TSC on x86_64 (`core::arch::x86_64::_rdtsc`, about 12 ns a read there, converted to ns
//! with a rate calibrated once against `Instant`), `Instant` elsewhere and under Miri; a
//! reading that goes backwards (a thread moved to a core whose TSC is behind) counts as 0.
//! With the const parameter `METERED = false` the wrappers do no metering work (no
//! timestamp, no site, nothing recorded; the guard and the lock keep a few words of room
//! for it). A thread keeps its shard of a site until it exits; beyond 64 such threads per
//! site, and on targets whose padded line holds fewer than 8 words, the figures go to
//! shared atomics on the site's own line instead.
//! Do not use metered locks inside a global allocator or a signal handler: recording a
//! site's first use allocates and takes the registry's lock.
//!
//! # Example
//!
//! ```
//! use flowline::lockmeter::{self, MeteredMutex};
//!
//! // `METERED` defaults to `true`; a `let` without a type names it with `::<_>`.
//! let queue = MeteredMutex::<_>::named("socket", Vec::new());
//! queue.lock().unwrap().push(1u32);
//! assert!(queue.try_lock().is_ok());
//! let s = lockmeter::snapshot().into_iter().find(|s| s.name == "socket").unwrap();
//! assert_eq!((s.total, s.nowait, s.rejected), (2, 2, 0));
//! assert!(lockmeter::table().contains("socket"));
//! ```

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::{LockResult, Mutex, OnceLock, PoisonError, TryLockError, TryLockResult};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::counter::{CounterGroup, GroupHandle};
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::{Backoff, UnsafeCell};
use std::sync::Arc;

// ---------------------------------------------------------------------------- spinlock

/// A test-and-test-and-set spinlock with backoff (spin, then yield).
///
/// `lock` tries the atomic compare-and-swap only when a plain load shows the lock free, so waiting
/// threads share the lock's line read-only instead of taking it from the holder on every
/// spin. Not fair, no poisoning (a guard dropped while panicking still unlocks).
///
/// ```
/// use flowline::lockmeter::SpinLock;
/// let l = SpinLock::new(0u64);
/// *l.lock() += 1;
/// assert_eq!(*l.lock(), 1);
/// assert!(l.try_lock().is_some());
/// ```
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands `&mut T` to one thread at a time (the `locked` flag's Acquire
// CAS / Release store order each holder's accesses after the previous holder's), so
// sharing the lock between threads only moves `T` between them: `T: Send` suffices.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: owning the lock owns the `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// An unlocked lock holding `value`.
    ///
    /// ```
    /// let l = flowline::lockmeter::SpinLock::new("x");
    /// assert_eq!(*l.lock(), "x");
    /// ```
    pub fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, spinning (then yielding) while another thread holds it.
    ///
    /// ```
    /// let l = flowline::lockmeter::SpinLock::new(1);
    /// let mut g = l.lock();
    /// *g = 2;
    /// ```
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        if let Some(g) = self.try_lock() {
            return g;
        }
        self.lock_contended()
    }

    #[cold]
    fn lock_contended(&self) -> SpinGuard<'_, T> {
        let backoff = Backoff::new();
        loop {
            // Test: read (sharing the line, not taking it from the holder) while the lock
            // looks taken, with growing spins, until the backoff reaches its yielding
            // phase; from then on one try per yield. Relaxed: only a hint for when to try
            // the CAS, whose Acquire does the ordering.
            while self.locked.load(Ordering::Relaxed) && !backoff.is_completed() {
                backoff.snooze();
            }
            // And set.
            if let Some(g) = self.try_lock() {
                return g;
            }
            backoff.snooze();
        }
    }

    /// Takes the lock if it is free now.
    ///
    /// ```
    /// let l = flowline::lockmeter::SpinLock::new(());
    /// let g = l.lock();
    /// assert!(l.try_lock().is_none());
    /// drop(g);
    /// assert!(l.try_lock().is_some());
    /// ```
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        // Acquire (success): pairs with the previous holder's Release store in
        // `SpinGuard::drop`, so its accesses to the value happen before ours. Relaxed
        // (failure): nothing is read through a failed try. (A CAS rather than a swap: the
        // same locked instruction here, and loom models a spinning CAS as waiting.)
        match self
            .locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Some(SpinGuard {
                lock: self,
                _not_send: PhantomData,
            }),
            Err(_) => None,
        }
    }

    /// Whether some thread holds the lock now (a snapshot).
    ///
    /// ```
    /// let l = flowline::lockmeter::SpinLock::new(());
    /// let _g = l.lock();
    /// assert!(l.is_locked());
    /// ```
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }

    /// The value, by exclusive access (no locking needed).
    ///
    /// ```
    /// let mut l = flowline::lockmeter::SpinLock::new(5);
    /// *l.get_mut() += 1;
    /// assert_eq!(l.into_inner(), 6);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` excludes every guard and every other access.
        self.value.with_mut(|p| unsafe { &mut *p })
    }

    /// The value, consuming the lock.
    ///
    /// ```
    /// assert_eq!(flowline::lockmeter::SpinLock::new(7).into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: fmt::Debug> fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_lock() {
            Some(g) => f.debug_struct("SpinLock").field("value", &*g).finish(),
            None => f
                .debug_struct("SpinLock")
                .field("value", &"<locked>")
                .finish(),
        }
    }
}

/// Access to a [`SpinLock`]'s value; unlocks when dropped.
///
/// ```
/// let l = flowline::lockmeter::SpinLock::new(vec![1]);
/// l.lock().push(2);
/// assert_eq!(l.lock().len(), 2);
/// ```
///
/// Like `std::sync::MutexGuard`, a guard is not `Send` (it unlocks on the thread that
/// locked) and is `Sync` only if `T` is: sharing a guard shares `&T`.
///
/// ```compile_fail
/// // A guard of a `Cell` cannot be shared between threads.
/// let l = flowline::lockmeter::SpinLock::new(std::cell::Cell::new(0));
/// let g = l.lock();
/// std::thread::scope(|s| {
///     s.spawn(|| g.set(1));
/// });
/// ```
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Neither `Send` nor `Sync` by default (a raw pointer); `Sync` is restored below for
    /// `T: Sync`.
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard hands out only `&T` (`DerefMut` needs `&mut` guard), so sharing it
// between threads is sharing `&T`: sound exactly when `T: Sync`.
unsafe impl<T: Sync> Sync for SpinGuard<'_, T> {}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (its Acquire CAS), so no other thread accesses
        // the value until the guard's Release store; the borrow ends with the guard's.
        self.lock.value.with(|p| unsafe { &*p })
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes this the only borrow through the
        // guard.
        self.lock.value.with_mut(|p| unsafe { &mut *p })
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: pairs with the next holder's Acquire CAS, so this holder's accesses to
        // the value happen before its.
        self.lock.locked.store(false, Ordering::Release);
    }
}

impl<T: fmt::Debug> fmt::Debug for SpinGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

// ---------------------------------------------------------------------------- clock

/// `later - earlier` in ticks, 0 if the clock went backwards (two cores' TSCs need not
/// agree exactly, and a thread may move between them mid-measurement).
#[inline(always)]
fn since(earlier: u64, later: u64) -> u64 {
    let d = later.wrapping_sub(earlier);
    if (d as i64) < 0 {
        0
    } else {
        d
    }
}

/// Timestamps in ticks: the TSC on x86_64 (not under Miri), else ns since a process epoch.
#[inline(always)]
fn ticks() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: `rdtsc` exists on every x86_64 CPU and has no preconditions.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        epoch().elapsed().as_nanos() as u64
    }
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds per tick, measured once (about 10 ms against `Instant`) on x86_64.
fn ns_per_tick() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        if cfg!(all(target_arch = "x86_64", not(miri))) {
            let (i0, t0) = (Instant::now(), ticks());
            while i0.elapsed().as_millis() < 10 {
                std::hint::spin_loop();
            }
            let (ns, dt) = (i0.elapsed().as_nanos() as f64, ticks().wrapping_sub(t0));
            if dt == 0 {
                1.0
            } else {
                ns / dt as f64
            }
        } else {
            1.0
        }
    })
}

// ---------------------------------------------------------------------------- sites

const TOTAL: usize = 0;
const CONTENDED: usize = 1;
const REJECTED: usize = 2;
/// Ticks held, summed over the timed holds (see [`Sampling`]).
const HOLD: usize = 3;
const WAIT: usize = 4;
/// Holds that were timed.
const TIMED: usize = 5;
const FIELDS: usize = 6;
const NAMES: [&str; FIELDS] = ["total", "contended", "rejected", "hold", "wait", "timed"];
/// Shards per site: threads beyond this many recording at once share `overflow`.
const SHARDS: usize = 64;

/// One lock site's figures, written by the threads that use it.
struct Site {
    name: String,
    /// `None` where a padded line holds fewer than 8 words (32-byte `CachePadded` targets):
    /// everything is then counted on `overflow`.
    group: Option<Arc<CounterGroup<FIELDS>>>,
    /// Counts of threads that found every shard taken (shared; on its own line, so the
    /// fields every record reads stay clean).
    overflow: CachePadded<[AtomicU64; 6]>,
    hold_max: AtomicU64,
    wait_max: AtomicU64,
    /// Ticks when the earliest recorded use began (lowered by a record that began earlier
    /// than every one before it: records arrive when holds end, not when waits start).
    since: AtomicU64,
}

impl Site {
    #[inline(always)]
    /// Adds `deltas`; `timed`: what an acquisition that waited or was timed adds to the
    /// maxima and the site's start.
    fn record(
        &self,
        h: Option<&mut GroupHandle<FIELDS>>,
        deltas: [u64; FIELDS],
        timed: Option<Timed>,
    ) {
        match h {
            Some(h) => h.add_all(deltas),
            None => {
                for (o, d) in self.overflow.iter().zip(deltas) {
                    if d != 0 {
                        // Relaxed: a statistic, read as a snapshot.
                        o.fetch_add(d, Ordering::Relaxed);
                    }
                }
            }
        }
        if let Some(t) = timed {
            if let Some(held) = t.held {
                raise(&self.hold_max, held);
            }
            raise(&self.wait_max, deltas[WAIT]);
            // Relaxed: a statistic. Read first: a shared write only for a new earliest
            // start.
            if t.began < self.since.load(Ordering::Relaxed) {
                self.since.fetch_min(t.began, Ordering::Relaxed);
            }
        }
    }
}

/// What an acquisition that waited or whose hold was timed adds beyond its counts.
#[derive(Clone, Copy)]
struct Timed {
    /// Ticks held, if the hold was timed.
    held: Option<u64>,
    /// Ticks when its wait (or, if it did not wait, its hold) began.
    began: u64,
}

/// Raises `max` to `v` if `v` is larger, writing the shared line only then.
#[inline(always)]
fn raise(max: &AtomicU64, v: u64) {
    // Relaxed: statistics, no other memory is published through them.
    if v > max.load(Ordering::Relaxed) {
        max.fetch_max(v, Ordering::Relaxed);
    }
}

/// Whose figures an acquisition counts toward: the lock's name if it has one, else the
/// `#[track_caller]` call site. Word-sized fields only (`Option<&str>` keeps its tag in the
/// pointer): a guard is built with word stores and moved with wide loads, and a byte-wide
/// enum tag in between made each move miss store-to-load forwarding (measured: +15-20 ns
/// per acquisition).
#[derive(Clone, Copy)]
struct Who {
    name: Option<&'static str>,
    caller: &'static Location<'static>,
}

impl Who {
    #[inline(always)]
    fn of(name: Option<&'static str>, caller: &'static Location<'static>) -> Who {
        Who { name, caller }
    }

    /// The identity a thread's cache compares: the address of the name (with its length,
    /// so that two names sharing a prefix stay apart) or of the location (with a length no
    /// `str` can have). Both are `'static`, so addresses are stable.
    #[inline(always)]
    fn key(&self) -> Key {
        match self.name {
            Some(n) => Key(n.as_ptr() as usize, n.len()),
            None => Key(self.caller as *const Location<'static> as usize, usize::MAX),
        }
    }

    /// The site's displayed name: the lock's name, or `file:line`.
    fn display(self) -> String {
        match self.name {
            Some(n) => n.to_string(),
            None => format!("{}:{}", self.caller.file(), self.caller.line()),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Key(usize, usize);

/// Every site, by its displayed name (a lock's name, or `file:line`): two locks given the
/// same name, or two call sites on one line, are one site.
fn registry() -> &'static Mutex<HashMap<String, Arc<Site>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Arc<Site>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// This thread's handles on the sites it used.
struct Local {
    site: Arc<Site>,
    handle: Option<GroupHandle<FIELDS>>,
}

/// This thread's sites: the one used last inline (reached with no pointer to follow:
/// a thread taking one lock in a loop finds it at a fixed offset of the thread-local),
/// the others in a list (a thread uses few sites; a short scan beats hashing).
struct Sites {
    hot: Option<(Key, Local)>,
    rest: Vec<(Key, Local)>,
}

std::thread_local! {
    static LOCAL: std::cell::RefCell<Sites> = const {
        std::cell::RefCell::new(Sites { hot: None, rest: Vec::new() })
    };
}

/// The site of a lock's name or of a call site, registered on its first use anywhere
/// (`since`: when that use started, in ticks, if it was timed; else now).
#[cold]
fn site_for(who: Who, since: Option<u64>) -> Arc<Site> {
    let since = since.unwrap_or_else(ticks);
    let name = who.display();
    let mut reg = registry().lock().unwrap_or_else(PoisonError::into_inner);
    Arc::clone(reg.entry(name.clone()).or_insert_with(|| {
        Arc::new(Site {
            name,
            group: (crate::slot::WORDS_PER_LINE >= NAMES.len() + 2)
                .then(|| Arc::new(CounterGroup::new(NAMES, SHARDS))),
            overflow: CachePadded::new(Default::default()),
            hold_max: AtomicU64::new(0),
            wait_max: AtomicU64::new(0),
            since: AtomicU64::new(since),
        })
    }))
}

/// Records one use of the site of `key` that did not wait and was not timed: one count on
/// this thread's shard of the site it used last (the common case: a thread taking one lock
/// in a loop), or through [`record_slow`].
#[inline(always)]
fn record_untimed(who: &Who) {
    let key = who.key();
    let fast = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else {
            return false;
        };
        match &mut l.hot {
            Some((
                k,
                Local {
                    handle: Some(h), ..
                },
            )) if *k == key => {
                h.add(TOTAL, 1);
                true
            }
            _ => false,
        }
    });
    if fast != Ok(true) {
        let mut d = [0u64; FIELDS];
        d[TOTAL] = 1;
        record_slow(*who, d, None);
    }
}

/// Records one use of the site of `key`: on this thread's shard of the site it used last
/// (the common case: a thread taking one lock in a loop; inlined, so an untimed use costs
/// one counter update), or through [`record_slow`].
#[inline(always)]
fn record(who: Who, deltas: [u64; FIELDS], timed: Option<Timed>) {
    let key = who.key();
    let fast = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else {
            return false;
        };
        match &mut l.hot {
            Some((k, e)) if *k == key => {
                e.site.record(e.handle.as_mut(), deltas, timed);
                true
            }
            _ => false,
        }
    });
    if fast != Ok(true) {
        record_slow(who, deltas, timed);
    }
}

/// Records one use of the site of `key`: finds (or registers) the site, makes it this
/// thread's most recent one.
#[inline(never)]
fn record_slow(who: Who, deltas: [u64; FIELDS], timed: Option<Timed>) {
    let key = who.key();
    // `try_with`: a lock used while this thread's locals are being destroyed is still
    // counted, on the shared overflow counters.
    let done = LOCAL.try_with(|l| {
        // Re-entered (a metered lock used by code that `record` itself calls into, such
        // as a global allocator): counted on the shared counters instead.
        let Ok(mut l) = l.try_borrow_mut() else {
            return false;
        };
        let l = &mut *l;
        if !matches!(&l.hot, Some((k, _)) if *k == key) {
            let entry = match l.rest.iter().position(|(k, _)| *k == key) {
                Some(i) => l.rest.swap_remove(i),
                None => {
                    let site = site_for(who, timed.map(|t| t.began));
                    let handle = site.group.as_ref().and_then(|g| g.try_handle().ok());
                    (key, Local { site, handle })
                }
            };
            if let Some(old) = l.hot.replace(entry) {
                l.rest.push(old);
            }
        }
        if let Some((_, e)) = &mut l.hot {
            e.site.record(e.handle.as_mut(), deltas, timed);
        }
        true
    });
    if done != Ok(true) {
        site_for(who, timed.map(|t| t.began)).record(None, deltas, timed);
    }
}

/// One lock site's figures (see the [module docs](self) for each column). Times are in
/// nanoseconds.
///
/// ```
/// let s = flowline::lockmeter::SiteStats { total: 4, nowait: 3, contended: 1, rejected: 1,
///     hold_total_ns: 400, hold_max_ns: 250, wait_total_ns: 90, wait_max_ns: 90,
///     elapsed_ns: 1000, ..Default::default() };
/// assert_eq!((s.hold_mean_ns(), s.wait_mean_ns()), (100.0, 90.0));
/// assert_eq!((s.util(), s.contention(), s.reject_rate()), (0.4, 0.25, 0.2));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteStats {
    /// The lock's name, or the call site as `file:line`.
    pub name: String,
    /// Acquisitions (TOTAL).
    pub total: u64,
    /// Acquisitions that did not wait (NOWAIT).
    pub nowait: u64,
    /// Acquisitions that had to wait (SPIN / CON).
    pub contended: u64,
    /// `try_lock` calls that found the lock taken (RJECT).
    pub rejected: u64,
    /// Time held, summed over acquisitions: exact when every hold was timed, else
    /// estimated as the mean of the timed holds times `total` (see
    /// [`MeteredSpinLock::with_hold_sampling`]).
    pub hold_total_ns: u64,
    /// Longest timed hold (with sampling, the longest of the holds that were timed).
    pub hold_max_ns: u64,
    /// Holds that were timed (`total` when every hold is): what the hold figures rest on.
    pub holds_timed: u64,
    /// Time waited, summed over the contended acquisitions.
    pub wait_total_ns: u64,
    /// Longest wait.
    pub wait_max_ns: u64,
    /// Wall time since the site's first use.
    pub elapsed_ns: u64,
    /// CPUs of the machine, for the share of CPU time spent waiting.
    pub cpus: usize,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl SiteStats {
    /// Mean hold time, ns (0 without acquisitions).
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { total: 2, hold_total_ns: 30, ..Default::default() };
    /// assert_eq!(s.hold_mean_ns(), 15.0);
    /// ```
    pub fn hold_mean_ns(&self) -> f64 {
        ratio(self.hold_total_ns, self.total)
    }

    /// Mean wait of the acquisitions that waited, ns (0 if none did).
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { contended: 2, wait_total_ns: 10, ..Default::default() };
    /// assert_eq!(s.wait_mean_ns(), 5.0);
    /// ```
    pub fn wait_mean_ns(&self) -> f64 {
        ratio(self.wait_total_ns, self.contended)
    }

    /// UTIL: the share of the wall time since the site's first use that the lock was held
    /// from this site. For one lock whose every hold is timed, 0 to 1 (a clock step can
    /// push it slightly past 1). With sampled holds it is an estimate, and a site that
    /// several locks pass through (one name, or one call site used on many locks) can
    /// pass 1: the locks were held at once.
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { hold_total_ns: 25, elapsed_ns: 100, ..Default::default() };
    /// assert_eq!(s.util(), 0.25);
    /// ```
    pub fn util(&self) -> f64 {
        ratio(self.hold_total_ns, self.elapsed_ns)
    }

    /// CON: the share of acquisitions that had to wait (0 to 1).
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { total: 4, contended: 1, ..Default::default() };
    /// assert_eq!(s.contention(), 0.25);
    /// ```
    pub fn contention(&self) -> f64 {
        ratio(self.contended, self.total)
    }

    /// NOWAIT: the share of acquisitions that did not wait (0 to 1).
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { total: 4, nowait: 3, ..Default::default() };
    /// assert_eq!(s.nowait_rate(), 0.75);
    /// ```
    pub fn nowait_rate(&self) -> f64 {
        ratio(self.nowait, self.total)
    }

    /// RJECT: the share of attempts (acquisitions and failed `try_lock`s) that failed.
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { total: 3, rejected: 1, ..Default::default() };
    /// assert_eq!(s.reject_rate(), 0.25);
    /// ```
    pub fn reject_rate(&self) -> f64 {
        ratio(self.rejected, self.total.saturating_add(self.rejected))
    }

    /// % CPU: the share of the machine's CPU time (wall time times `cpus`) spent waiting
    /// at this site (0 to 1 for a spinlock, whose waiters burn their CPU; a blocking
    /// mutex's waiters sleep, so with more waiting threads than CPUs it can pass 1).
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { wait_total_ns: 50, elapsed_ns: 100, cpus: 2, ..Default::default() };
    /// assert_eq!(s.cpu_waiting(), 0.25);
    /// ```
    pub fn cpu_waiting(&self) -> f64 {
        ratio(
            self.wait_total_ns,
            self.elapsed_ns.saturating_mul(self.cpus.max(1) as u64),
        )
    }
}

/// The figures of every lock site used so far in this process, most contended first (by
/// CON, then by total wait).
///
/// ```
/// let l = flowline::lockmeter::MeteredSpinLock::<_>::named("snapshot-doc", 0);
/// *l.lock() += 1;
/// let all = flowline::lockmeter::snapshot();
/// assert!(all.iter().any(|s| s.name == "snapshot-doc" && s.total == 1));
/// ```
pub fn snapshot() -> Vec<SiteStats> {
    let sites: Vec<Arc<Site>> = registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
        .cloned()
        .collect();
    let now = ticks();
    let cpus = crate::topology::available_cpus();
    let mut out: Vec<SiteStats> = sites.iter().map(|s| s.stats(now, cpus)).collect();
    out.sort_by(|a, b| {
        b.contention()
            .total_cmp(&a.contention())
            .then(b.wait_total_ns.cmp(&a.wait_total_ns))
            .then(a.name.cmp(&b.name))
    });
    out
}

/// One site's figures by name, as [`snapshot`] has them (for tests: reads one site
/// instead of all of them).
#[cfg(test)]
fn snapshot_of(name: &str) -> Option<SiteStats> {
    let site = registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(name)
        .cloned()?;
    Some(site.stats(ticks(), crate::topology::available_cpus()))
}

impl Site {
    /// This site's figures at tick `now`, on a machine of `cpus` CPUs.
    fn stats(&self, now: u64, cpus: usize) -> SiteStats {
        let k = ns_per_tick();
        let ns = |t: u64| (t as f64 * k) as u64;
        // Each shard is read whole (a record lands in one shard, under its sequence
        // word); the shared overflow counters are read once each, but a record there
        // may land between two of those reads, so the parts are clamped to `total`.
        let g = self.group.as_ref().map(|g| g.snapshot());
        let o: [u64; FIELDS] = core::array::from_fn(|i| self.overflow[i].load(Ordering::Relaxed));
        let v = |i: usize| g.as_ref().map_or(0, |g| g[i]).wrapping_add(o[i]);
        let total = v(TOTAL);
        let contended = v(CONTENDED).min(total);
        let timed = v(TIMED).min(total);
        SiteStats {
            name: self.name.clone(),
            total,
            nowait: total - contended,
            contended,
            rejected: v(REJECTED),
            hold_total_ns: ns(estimate(v(HOLD), timed, total)),
            hold_max_ns: ns(self.hold_max.load(Ordering::Relaxed)),
            holds_timed: timed,
            wait_total_ns: ns(v(WAIT)),
            wait_max_ns: ns(self.wait_max.load(Ordering::Relaxed)),
            elapsed_ns: ns(since(self.since.load(Ordering::Relaxed), now)),
            cpus,
        }
    }
}

/// The total hold of `total` acquisitions from the sum of the `timed` ones: their mean times
/// `total` (exact when every hold was timed; 0 when none was).
fn estimate(sum: u64, timed: u64, total: u64) -> u64 {
    if timed == 0 || timed >= total {
        sum
    } else {
        let e = u128::from(sum) * u128::from(total) / u128::from(timed);
        u64::try_from(e).unwrap_or(u64::MAX)
    }
}

/// A duration for the table: ns below a microsecond, then us, then ms.
fn us(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.1}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1}us", ns / 1e3)
    } else {
        format!("{ns:.0}ns")
    }
}

/// The lockmeter table of [`snapshot`]: one line per site, most contended first.
///
/// ```
/// let l = flowline::lockmeter::MeteredMutex::<_>::named("table-doc", ());
/// drop(l.lock());
/// let t = flowline::lockmeter::table();
/// assert!(t.lines().next().unwrap().contains("UTIL"));
/// assert!(t.contains("table-doc"));
/// ```
pub fn table() -> String {
    format_table(&snapshot())
}

/// Formats `sites` in the lockmeter layout (as [`table`] does).
///
/// ```
/// let s = flowline::lockmeter::SiteStats { name: "x".into(), total: 1, nowait: 1, ..Default::default() };
/// assert!(flowline::lockmeter::format_table(&[s]).lines().nth(1).unwrap().ends_with("x"));
/// ```
pub fn format_table(sites: &[SiteStats]) -> String {
    let mut t = String::from(
        " UTIL    CON      HOLD MEAN(   MAX)       WAIT MEAN(   MAX) (% CPU)      TOTAL NOWAIT   SPIN  RJECT  NAME\n",
    );
    for s in sites {
        // Nothing timed yet (few acquisitions, sampled): no hold figures, rather than 0.
        let untimed = s.total > 0 && s.holds_timed == 0;
        let hold = |ns: f64| if untimed { "-".to_string() } else { us(ns) };
        t.push_str(&format!(
            "{:4.1}% {:5.1}%  {:>9}({:>9})  {:>9}({:>9}) ({:5.2}%) {:>10} {:5.1}% {:5.1}% {:5.1}%  {}\n",
            100.0 * s.util(),
            100.0 * s.contention(),
            hold(s.hold_mean_ns()),
            hold(s.hold_max_ns as f64),
            us(s.wait_mean_ns()),
            us(s.wait_max_ns as f64),
            100.0 * s.cpu_waiting(),
            s.total,
            100.0 * s.nowait_rate(),
            100.0 * s.contention(),
            100.0 * s.reject_rate(),
            s.name,
        ));
    }
    t
}

// ---------------------------------------------------------------------------- metered locks

/// The largest `one_in` of [`MeteredSpinLock::with_hold_sampling`]: one timed hold in 2^24
/// acquisitions (rarer would not leave a sample to speak of).
pub const MAX_HOLD_SAMPLING: u32 = 1 << 24;

/// The default of [`MeteredSpinLock::with_hold_sampling`] and
/// [`MeteredMutex::with_hold_sampling`]: one hold in 32 is timed.
pub const DEFAULT_HOLD_SAMPLING: u32 = 32;

/// Which acquisitions have their hold timed: one in `one_in`, at random. Each thread keeps
/// a budget of units; an acquisition spends `2^32 / one_in`, and the one that overdraws it
/// is timed and refills it with a random 1 to 2^33 units (mean 2^32). Common path: one
/// subtraction and a sign test on a thread-local.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sampling {
    one_in: u32,
    /// Units spent per acquisition: `2^32 / one_in`.
    step: u64,
}

/// This thread's sampling budget, and the xorshift state that draws the refills.
struct Sampler {
    budget: std::cell::Cell<i64>,
    rng: std::cell::Cell<u32>,
}

std::thread_local! {
    static SAMPLER: Sampler = const {
        Sampler { budget: std::cell::Cell::new(0), rng: std::cell::Cell::new(0) }
    };
}

impl Sampler {
    /// Refills the budget after it ran out; returns whether the acquisition that ran it
    /// out is timed: yes, except a thread's first (its budget started empty: timing it
    /// would time every thread's first hold, often its longest, and short-lived threads
    /// would then make most of the sample).
    #[cold]
    fn refill(&self, left: i64) -> bool {
        let mut x = self.rng.get();
        let first = x == 0;
        if first {
            // Seed: a per-thread count (threads reuse each other's thread-local
            // addresses) spread by the golden ratio, mixed with the cell's address;
            // never 0 (xorshift's fixed point).
            static THREADS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
            // Relaxed: only distinctness matters, and `fetch_add` gives it.
            let n = THREADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            x = (n.wrapping_mul(0x9E37_79B9) ^ (self as *const Sampler as usize as u32)) | 1;
        }
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng.set(x);
        // A gap of 3 to 2^33 - 1 units (the draw, never 0, times two, plus one), after the
        // overdraft: carrying it keeps the long-run rate at exactly one in `one_in`.
        self.budget.set(left + 1 + 2 * i64::from(x));
        !first
    }
}

impl Sampling {
    #[track_caller]
    fn one_in(one_in: u32) -> Sampling {
        assert!(
            (1..=MAX_HOLD_SAMPLING).contains(&one_in),
            "hold sampling is one timed hold in `one_in`, got {one_in}: give 1 to time every \
             hold, or up to MAX_HOLD_SAMPLING (2^24) to sample (the default is \
             DEFAULT_HOLD_SAMPLING)"
        );
        Sampling {
            one_in,
            step: (1u64 << 32) / u64::from(one_in),
        }
    }

    /// Whether this acquisition's hold is timed.
    #[inline(always)]
    fn draw(self) -> bool {
        if self.one_in == 1 {
            return true;
        }
        // A thread whose locals are being destroyed times every hold.
        SAMPLER
            .try_with(|s| {
                // Cannot overflow: the budget stays below 2^34 and a step is at most 2^31.
                let left = s.budget.get() - self.step as i64;
                if left >= 0 {
                    s.budget.set(left);
                    false
                } else {
                    s.refill(left)
                }
            })
            .unwrap_or(true)
    }
}

/// Where and when a metered acquisition started, carried by its guard.
struct Stamp {
    who: Who,
    /// Ticks when the lock was taken (0 if the hold is not timed).
    acquired: u64,
    /// Ticks waited (0: did not wait).
    waited: u64,
    /// [`TIMED_HOLD`] and [`WAITED`] bits (a word, not two `bool`s: see [`Who`]).
    flags: usize,
}

/// [`Stamp::flags`]: the hold is timed.
const TIMED_HOLD: usize = 1;
/// [`Stamp::flags`]: the acquisition waited.
const WAITED: usize = 2;

impl Stamp {
    /// An acquisition that did not wait, its hold timed or not as `sampling` draws (the
    /// clock is read only if it is).
    #[inline(always)]
    fn uncontended(
        name: Option<&'static str>,
        caller: &'static Location<'static>,
        sampling: Sampling,
    ) -> Stamp {
        let timed = sampling.draw();
        Stamp {
            who: Who::of(name, caller),
            acquired: if timed { ticks() } else { 0 },
            waited: 0,
            flags: if timed { TIMED_HOLD } else { 0 },
        }
    }

    /// Whether the guard must read the clock when the hold ends.
    #[inline(always)]
    fn timed(&self) -> bool {
        self.flags & TIMED_HOLD != 0
    }

    #[inline(always)]
    fn contended(&self) -> bool {
        self.flags & WAITED != 0
    }

    /// Records the acquisition and, if timed, its hold (which ended at `end`) at its site.
    #[inline(always)]
    fn finish(&self, end: u64) {
        if self.flags == 0 {
            record_untimed(&self.who);
        } else {
            self.finish_timed(end);
        }
    }

    /// [`finish`](Self::finish) for an acquisition that waited or was timed (the rarer
    /// case, kept out of line).
    #[inline(never)]
    fn finish_timed(&self, end: u64) {
        let mut d = [0u64; FIELDS];
        d[TOTAL] = 1;
        if self.contended() {
            d[CONTENDED] = 1;
            d[WAIT] = self.waited;
        }
        let held = self.timed().then(|| {
            let held = since(self.acquired, end);
            d[HOLD] = held;
            d[TIMED] = 1;
            held
        });
        let timed = Timed {
            held,
            began: self.acquired.wrapping_sub(self.waited),
        };
        record(self.who, d, Some(timed));
    }
}

/// An acquisition whose first attempt failed: waits in `take`, timing the wait (always,
/// from the failed attempt: a wait costs more than the clock reads). Whether the hold is
/// timed is drawn from `sampling` as for acquisitions that did not wait, so the timed holds
/// are a fair sample of all of them. Out of line: the lock methods' common path (the
/// first attempt succeeds) stays small and builds its guard in place.
#[cold]
#[inline(never)]
fn acquire_contended<G>(who: Who, sampling: Sampling, take: impl FnOnce() -> G) -> (G, Stamp) {
    // Drawn first: a draw that refills the budget is not counted in the hold.
    let timed = sampling.draw();
    let t0 = ticks();
    let g = take();
    let acquired = ticks();
    let stamp = Stamp {
        who,
        acquired,
        waited: since(t0, acquired),
        flags: WAITED | if timed { TIMED_HOLD } else { 0 },
    };
    (g, stamp)
}

#[cold]
fn reject(name: Option<&'static str>, caller: &'static Location<'static>) {
    let mut d = [0u64; FIELDS];
    d[REJECTED] = 1;
    record(Who::of(name, caller), d, None);
}

/// A [`SpinLock`] metered per lock site (see the [module docs](self)). With
/// `METERED = false` it is the bare spinlock. `METERED` defaults to `true` in types
/// (struct fields, `let` annotations, aliases such as
/// `type SockLock<T> = MeteredSpinLock<T, false>;` to compile metering out); an expression
/// without a type names the default with `MeteredSpinLock::<_>::new(..)`.
///
/// ```
/// use flowline::lockmeter::MeteredSpinLock;
/// let l: MeteredSpinLock<u32> = MeteredSpinLock::new(0); // sites: the lock() call sites
/// *l.lock() += 1;
/// let bare: MeteredSpinLock<u32, false> = MeteredSpinLock::new(0); // records nothing
/// *bare.lock() += 1;
/// ```
pub struct MeteredSpinLock<T, const METERED: bool = true> {
    lock: SpinLock<T>,
    name: Option<&'static str>,
    sampling: Sampling,
}

impl<T, const METERED: bool> MeteredSpinLock<T, METERED> {
    /// A lock whose acquisitions are metered at each call site of `lock`/`try_lock`.
    ///
    /// ```
    /// let l = flowline::lockmeter::MeteredSpinLock::<_>::new(1);
    /// assert_eq!(*l.lock(), 1);
    /// ```
    pub fn new(value: T) -> Self {
        MeteredSpinLock {
            lock: SpinLock::new(value),
            name: None,
            sampling: Sampling::one_in(DEFAULT_HOLD_SAMPLING),
        }
    }

    /// A lock whose acquisitions are all metered under `name`.
    ///
    /// ```
    /// let l = flowline::lockmeter::MeteredSpinLock::<_>::named("rx queue", 1);
    /// assert_eq!(*l.lock(), 1);
    /// ```
    pub fn named(name: &'static str, value: T) -> Self {
        MeteredSpinLock {
            lock: SpinLock::new(value),
            name: Some(name),
            sampling: Sampling::one_in(DEFAULT_HOLD_SAMPLING),
        }
    }

    /// Times the hold of one acquisition in `one_in` (at random, see below), instead of one
    /// in [`DEFAULT_HOLD_SAMPLING`]; `1` times every hold.
    ///
    /// Counts (TOTAL, NOWAIT, SPIN, RJECT) are always exact, and so are waits (an
    /// acquisition that waits is always timed: the wait costs more than the clock reads).
    /// What sampling saves is the two clock reads around a hold (about 12 ns each on a KVM
    /// guest of an AMD EPYC; see the README's "Finding lock contention" for the measured
    /// cost of each setting). The price: the mean hold, the total and UTIL are estimates (the
    /// mean of the timed holds, which are a random sample of all holds, times the
    /// acquisitions), and the hold maximum is the longest hold that was timed, so a single
    /// long hold is seen with probability `1 / one_in` (a kind of hold that recurs is seen).
    /// [`SiteStats::holds_timed`] says how many holds the figures rest on. Locks that share
    /// a site (one name) should share a rate: the estimate weighs every timed hold alike.
    ///
    /// The draw: each thread keeps a budget that every acquisition spends by its lock's
    /// rate, and the acquisition that overdraws it is timed and refills it by a random
    /// amount, so the sampling does not lock onto a pattern of the program (a thread's
    /// first acquisition only fills its budget, so short-lived threads do not put their
    /// first, often cold, holds in the sample).
    ///
    /// # Panics
    ///
    /// If `one_in` is 0 or above [`MAX_HOLD_SAMPLING`].
    ///
    /// ```
    /// use flowline::lockmeter::{self, MeteredSpinLock};
    /// let exact = MeteredSpinLock::<_>::named("every hold", 0).with_hold_sampling(1);
    /// for _ in 0..10 {
    ///     *exact.lock() += 1;
    /// }
    /// let s = lockmeter::snapshot().into_iter().find(|s| s.name == "every hold").unwrap();
    /// assert_eq!((s.total, s.holds_timed), (10, 10));
    /// ```
    #[track_caller]
    pub fn with_hold_sampling(mut self, one_in: u32) -> Self {
        self.sampling = Sampling::one_in(one_in);
        self
    }

    /// Takes the lock (see [`SpinLock::lock`]), timing the wait and, until the guard
    /// drops, the hold.
    ///
    /// ```
    /// let l = flowline::lockmeter::MeteredSpinLock::<_>::new(vec![]);
    /// l.lock().push(1);
    /// ```
    #[track_caller]
    #[inline(always)]
    pub fn lock(&self) -> MeteredSpinGuard<'_, T, METERED> {
        if !METERED {
            return MeteredSpinGuard {
                guard: ManuallyDrop::new(self.lock.lock()),
                stamp: None,
            };
        }
        let caller = Location::caller();
        match self.lock.try_lock() {
            Some(guard) => MeteredSpinGuard {
                guard: ManuallyDrop::new(guard),
                stamp: Some(Stamp::uncontended(self.name, caller, self.sampling)),
            },
            None => {
                let who = Who::of(self.name, caller);
                let (guard, stamp) =
                    acquire_contended(who, self.sampling, || self.lock.lock_contended());
                MeteredSpinGuard {
                    guard: ManuallyDrop::new(guard),
                    stamp: Some(stamp),
                }
            }
        }
    }

    /// Takes the lock if it is free now; a failure counts as a rejection (RJECT).
    ///
    /// ```
    /// let l = flowline::lockmeter::MeteredSpinLock::<_>::new(());
    /// let g = l.lock();
    /// assert!(l.try_lock().is_none());
    /// ```
    #[track_caller]
    #[inline]
    pub fn try_lock(&self) -> Option<MeteredSpinGuard<'_, T, METERED>> {
        if !METERED {
            return self.lock.try_lock().map(|guard| MeteredSpinGuard {
                guard: ManuallyDrop::new(guard),
                stamp: None,
            });
        }
        let caller = Location::caller();
        match self.lock.try_lock() {
            Some(guard) => Some(MeteredSpinGuard {
                guard: ManuallyDrop::new(guard),
                stamp: Some(Stamp::uncontended(self.name, caller, self.sampling)),
            }),
            None => {
                reject(self.name, caller);
                None
            }
        }
    }

    /// The value, consuming the lock.
    ///
    /// ```
    /// assert_eq!(flowline::lockmeter::MeteredSpinLock::<_>::new(3).into_inner(), 3);
    /// ```
    pub fn into_inner(self) -> T {
        self.lock.into_inner()
    }
}

impl<T: fmt::Debug, const METERED: bool> fmt::Debug for MeteredSpinLock<T, METERED> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredSpinLock")
            .field("name", &self.name)
            .field("lock", &self.lock)
            .finish()
    }
}

/// Access to a [`MeteredSpinLock`]'s value; records the hold and unlocks when dropped.
///
/// ```
/// let l = flowline::lockmeter::MeteredSpinLock::<_>::new(1);
/// let g = l.lock();
/// assert_eq!(*g, 1);
/// ```
pub type MeteredSpinGuard<'a, T, const METERED: bool = true> =
    MeteredGuard<SpinGuard<'a, T>, METERED>;

/// A metered lock's guard around the wrapped lock's guard `G`: gives access to the value
/// and, when dropped, unlocks first and then records the hold at the acquisition's site.
/// Used as [`MeteredSpinGuard`] and [`MeteredMutexGuard`].
///
/// ```
/// let l = flowline::lockmeter::MeteredSpinLock::<_>::new(vec![1]);
/// let mut g: flowline::lockmeter::MeteredGuard<_> = l.lock();
/// g.push(2);
/// assert_eq!(g.len(), 2);
/// ```
pub struct MeteredGuard<G, const METERED: bool = true> {
    /// Dropped by hand in `Drop`: the lock is released before the hold is recorded.
    guard: ManuallyDrop<G>,
    stamp: Option<Stamp>,
}

impl<G: Deref, const METERED: bool> Deref for MeteredGuard<G, METERED> {
    type Target = G::Target;
    fn deref(&self) -> &G::Target {
        &self.guard
    }
}

impl<G: DerefMut, const METERED: bool> DerefMut for MeteredGuard<G, METERED> {
    fn deref_mut(&mut self) -> &mut G::Target {
        &mut self.guard
    }
}

impl<G, const METERED: bool> Drop for MeteredGuard<G, METERED> {
    #[inline(always)]
    fn drop(&mut self) {
        let end = match &self.stamp {
            Some(s) if METERED && s.timed() => ticks(),
            _ => 0,
        };
        // SAFETY: `guard` is dropped exactly once, here; it is not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.guard) };
        // Recorded after the unlock, so the bookkeeping does not lengthen the hold.
        if METERED {
            if let Some(s) = &self.stamp {
                s.finish(end);
            }
        }
    }
}

impl<G: Deref, const METERED: bool> fmt::Debug for MeteredGuard<G, METERED>
where
    G::Target: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A `std::sync::Mutex` metered per lock site (see the [module docs](self)), with the same
/// API shape (`lock` returns a `LockResult`, poisoning included). With `METERED = false`
/// it is the bare mutex (see [`MeteredSpinLock`] for naming the default).
///
/// ```
/// use flowline::lockmeter::MeteredMutex;
/// let m: MeteredMutex<u32> = MeteredMutex::named("config", 1);
/// *m.lock().unwrap() += 1;
/// assert_eq!(m.into_inner().unwrap(), 2);
/// ```
pub struct MeteredMutex<T, const METERED: bool = true> {
    mutex: Mutex<T>,
    name: Option<&'static str>,
    sampling: Sampling,
}

impl<T, const METERED: bool> MeteredMutex<T, METERED> {
    /// A mutex whose acquisitions are metered at each call site of `lock`/`try_lock`.
    ///
    /// ```
    /// let m = flowline::lockmeter::MeteredMutex::<_>::new(1);
    /// assert_eq!(*m.lock().unwrap(), 1);
    /// ```
    pub fn new(value: T) -> Self {
        MeteredMutex {
            mutex: Mutex::new(value),
            name: None,
            sampling: Sampling::one_in(DEFAULT_HOLD_SAMPLING),
        }
    }

    /// A mutex whose acquisitions are all metered under `name`.
    ///
    /// ```
    /// let m = flowline::lockmeter::MeteredMutex::<_>::named("routes", 1);
    /// assert_eq!(*m.lock().unwrap(), 1);
    /// ```
    pub fn named(name: &'static str, value: T) -> Self {
        MeteredMutex {
            mutex: Mutex::new(value),
            name: Some(name),
            sampling: Sampling::one_in(DEFAULT_HOLD_SAMPLING),
        }
    }

    /// Times the hold of one acquisition in `one_in`; `1` times every hold. See
    /// [`MeteredSpinLock::with_hold_sampling`] for what is exact and what is estimated.
    ///
    /// # Panics
    ///
    /// If `one_in` is 0 or above [`MAX_HOLD_SAMPLING`].
    ///
    /// ```
    /// use flowline::lockmeter::{self, MeteredMutex};
    /// let m = MeteredMutex::<_>::named("sampled mutex", 0).with_hold_sampling(64);
    /// for _ in 0..100 {
    ///     *m.lock().unwrap() += 1;
    /// }
    /// let s = lockmeter::snapshot().into_iter().find(|s| s.name == "sampled mutex").unwrap();
    /// assert_eq!(s.total, 100);
    /// assert!(s.holds_timed <= 100);
    /// ```
    #[track_caller]
    pub fn with_hold_sampling(mut self, one_in: u32) -> Self {
        self.sampling = Sampling::one_in(one_in);
        self
    }

    /// Takes the mutex (see `std::sync::Mutex::lock`), timing the wait and, until the
    /// guard drops, the hold.
    ///
    /// # Errors
    ///
    /// As `std::sync::Mutex::lock`: the mutex is poisoned (a holder panicked); the error
    /// still carries the guard.
    ///
    /// ```
    /// let m = flowline::lockmeter::MeteredMutex::<_>::new(vec![]);
    /// m.lock().unwrap().push(1);
    /// ```
    #[track_caller]
    #[inline(always)]
    pub fn lock(&self) -> LockResult<MeteredMutexGuard<'_, T, METERED>> {
        if !METERED {
            return wrap(self.mutex.lock(), None);
        }
        let caller = Location::caller();
        let stamp = || Some(Stamp::uncontended(self.name, caller, self.sampling));
        match self.mutex.try_lock() {
            Ok(guard) => Ok(MeteredMutexGuard {
                guard: ManuallyDrop::new(guard),
                stamp: stamp(),
            }),
            Err(TryLockError::Poisoned(e)) => Err(PoisonError::new(MeteredMutexGuard {
                guard: ManuallyDrop::new(e.into_inner()),
                stamp: stamp(),
            })),
            Err(TryLockError::WouldBlock) => {
                let who = Who::of(self.name, caller);
                let (r, stamp) = acquire_contended(who, self.sampling, || self.mutex.lock());
                wrap(r, Some(stamp))
            }
        }
    }

    /// Takes the mutex if it is free now; `WouldBlock` counts as a rejection (RJECT).
    ///
    /// # Errors
    ///
    /// As `std::sync::Mutex::try_lock`: `WouldBlock` if held, `Poisoned` (with the guard)
    /// if a holder panicked.
    ///
    /// ```
    /// let m = flowline::lockmeter::MeteredMutex::<_>::new(());
    /// let g = m.lock().unwrap();
    /// assert!(m.try_lock().is_err());
    /// ```
    #[track_caller]
    #[inline]
    pub fn try_lock(&self) -> TryLockResult<MeteredMutexGuard<'_, T, METERED>> {
        let caller = Location::caller();
        let stamp = |name| METERED.then(|| Stamp::uncontended(name, caller, self.sampling));
        match self.mutex.try_lock() {
            Ok(guard) => Ok(MeteredMutexGuard {
                guard: ManuallyDrop::new(guard),
                stamp: stamp(self.name),
            }),
            Err(TryLockError::Poisoned(e)) => Err(TryLockError::Poisoned(PoisonError::new(
                MeteredMutexGuard {
                    guard: ManuallyDrop::new(e.into_inner()),
                    stamp: stamp(self.name),
                },
            ))),
            Err(TryLockError::WouldBlock) => {
                if METERED {
                    reject(self.name, caller);
                }
                Err(TryLockError::WouldBlock)
            }
        }
    }

    /// The value, consuming the mutex.
    ///
    /// # Errors
    ///
    /// As `std::sync::Mutex::into_inner`: poisoned (the error carries the value).
    ///
    /// ```
    /// assert_eq!(flowline::lockmeter::MeteredMutex::<_>::new(3).into_inner().unwrap(), 3);
    /// ```
    pub fn into_inner(self) -> LockResult<T> {
        self.mutex.into_inner()
    }
}

fn wrap<'a, T, const METERED: bool>(
    r: LockResult<std::sync::MutexGuard<'a, T>>,
    stamp: Option<Stamp>,
) -> LockResult<MeteredMutexGuard<'a, T, METERED>> {
    match r {
        Ok(guard) => Ok(MeteredMutexGuard {
            guard: ManuallyDrop::new(guard),
            stamp,
        }),
        Err(e) => Err(PoisonError::new(MeteredMutexGuard {
            guard: ManuallyDrop::new(e.into_inner()),
            stamp,
        })),
    }
}

impl<T: fmt::Debug, const METERED: bool> fmt::Debug for MeteredMutex<T, METERED> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredMutex")
            .field("name", &self.name)
            .field("mutex", &self.mutex)
            .finish()
    }
}

/// Access to a [`MeteredMutex`]'s value; records the hold and unlocks when dropped.
///
/// ```
/// let m = flowline::lockmeter::MeteredMutex::<_>::new(1);
/// assert_eq!(*m.lock().unwrap(), 1);
/// ```
pub type MeteredMutexGuard<'a, T, const METERED: bool = true> =
    MeteredGuard<std::sync::MutexGuard<'a, T>, METERED>;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    fn site(name: &str) -> SiteStats {
        snapshot_of(name).unwrap_or_else(|| panic!("no site {name}"))
    }

    /// One thread holds the lock for a known time while another waits: the figures match
    /// within loose bounds (not exact times: this machine is shared and noisy).
    fn held_while_another_waits(spin: bool, name: &'static str) {
        const HOLD: Duration = Duration::from_millis(30);
        // Every hold timed: the figures below compare single holds.
        let spin_lock = MeteredSpinLock::<u32>::named(name, 0).with_hold_sampling(1);
        let mutex = MeteredMutex::<u32>::named(name, 0).with_hold_sampling(1);
        let started = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                if spin {
                    let _g = spin_lock.lock();
                    started.wait();
                    std::thread::sleep(HOLD);
                } else {
                    let _g = mutex.lock().unwrap();
                    started.wait();
                    std::thread::sleep(HOLD);
                }
            });
            started.wait();
            if spin {
                *spin_lock.lock() += 1;
            } else {
                *mutex.lock().unwrap() += 1;
            }
        });
        let s = site(name);
        assert_eq!((s.total, s.contended, s.nowait, s.rejected), (2, 1, 1, 0));
        assert_eq!(s.holds_timed, 2);
        let hold = HOLD.as_nanos() as u64;
        assert!(
            s.hold_max_ns >= hold * 9 / 10,
            "hold max {} ns",
            s.hold_max_ns
        );
        assert!(
            s.hold_max_ns < 5_000_000_000,
            "hold max {} ns",
            s.hold_max_ns
        );
        // The waiter started waiting after the barrier, within the holder's sleep.
        assert!(s.wait_max_ns >= hold / 2, "wait max {} ns", s.wait_max_ns);
        assert!(s.wait_max_ns <= s.hold_max_ns + 1_000_000_000);
        assert!(s.hold_mean_ns() <= s.hold_max_ns as f64);
        assert!(s.wait_mean_ns() <= s.wait_max_ns as f64 + 1.0);
        assert!(s.util() > 0.0 && s.util() <= 1.05, "util {}", s.util());
        assert_eq!(s.contention(), 0.5);
    }

    /// Acquisitions on one thread, alternating a lock that times every hold and one that
    /// times one in 16: the first has every hold timed, the second about a 16th (the
    /// expected count is 1/16 of the acquisitions, with a standard deviation of about 1%
    /// of that; the bounds are far wider), whatever the interleaving.
    #[test]
    fn holds_are_timed_at_each_locks_own_rate() {
        let n: u64 = if cfg!(miri) { 640 } else { 64_000 };
        let exact = MeteredSpinLock::<u64>::named("unit-rate-exact", 0).with_hold_sampling(1);
        let sampled = MeteredMutex::<u64>::named("unit-rate-16", 0).with_hold_sampling(16);
        std::thread::spawn(move || {
            for _ in 0..n {
                *exact.lock() += 1;
                *sampled.lock().unwrap() += 1;
            }
        })
        .join()
        .unwrap();
        let (e, s) = (site("unit-rate-exact"), site("unit-rate-16"));
        assert_eq!((e.total, e.holds_timed), (n, n));
        assert_eq!(s.total, n);
        let expected = n / 16;
        assert!(
            s.holds_timed >= expected / 2 && s.holds_timed <= expected * 3 / 2,
            "{} of {n} holds timed, expected about {expected}",
            s.holds_timed
        );
        assert!(s.hold_mean_ns() <= s.hold_max_ns as f64 + 1.0);
    }

    /// Short-lived threads: each takes a lock 8 times. A thread's first acquisition only
    /// fills its sampling budget, so about 7/32 of a hold per thread is timed (about 22 for
    /// 100 threads); timing every thread's first hold would give at least 100.
    #[test]
    fn short_lived_threads_do_not_fill_the_sample_with_first_holds() {
        let threads: u64 = if cfg!(miri) { 12 } else { 100 };
        let l = MeteredSpinLock::<u64>::named("unit-short-threads", 0);
        for _ in 0..threads {
            std::thread::scope(|s| {
                s.spawn(|| {
                    for _ in 0..8 {
                        *l.lock() += 1;
                    }
                });
            });
        }
        let s = site("unit-short-threads");
        assert_eq!(s.total, threads * 8);
        // Expected 7/32 per thread; the bound is that plus five standard deviations.
        let expected = threads as f64 * 7.0 / 32.0;
        assert!(
            (s.holds_timed as f64) < expected + 5.0 * expected.sqrt(),
            "{} holds timed of {} threads' 8 each",
            s.holds_timed,
            threads
        );
    }

    /// More threads on one site than it has shards: the rest count on the shared
    /// overflow counters, and the figures stay exact. Not under Miri: 70 interpreted
    /// threads for counting logic on plain atomics (the unsafe code, the counter handles'
    /// line pointers, runs in every other test here).
    #[test]
    #[cfg_attr(miri, ignore)]
    fn threads_beyond_the_shards_count_exactly() {
        let threads = SHARDS + 6;
        let l = MeteredMutex::<u64>::named("unit-overflow", 0).with_hold_sampling(1);
        let all_in = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    *l.lock().unwrap() += 1;
                    // Every thread keeps its shard until it exits: wait for all.
                    all_in.wait();
                    for _ in 0..4 {
                        *l.lock().unwrap() += 1;
                    }
                });
            }
        });
        let s = site("unit-overflow");
        let n = threads as u64 * 5;
        assert_eq!((s.total, s.holds_timed, s.rejected), (n, n, 0));
        assert_eq!(s.nowait + s.contended, n);
    }

    /// One thread cycling through more sites than its inline cache holds: every site
    /// keeps its own exact count.
    #[test]
    fn many_sites_on_one_thread_count_exactly() {
        let names = ["unit-many-a", "unit-many-b", "unit-many-c", "unit-many-d"];
        let locks = names.map(|n| MeteredSpinLock::<u32>::named(n, 0));
        let unnamed = MeteredSpinLock::<u32>::new(0);
        std::thread::spawn(move || {
            for round in 0..10 {
                for (i, l) in locks.iter().enumerate() {
                    for _ in 0..=i {
                        *l.lock() += 1;
                    }
                }
                if round % 2 == 0 {
                    *unnamed.lock() += 1;
                }
            }
        })
        .join()
        .unwrap();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(site(n).total, 10 * (i as u64 + 1), "{n}");
        }
    }

    /// A lock taken from a thread-local's destructor, when this thread's lockmeter cache
    /// may already be gone: still counted.
    #[test]
    fn locks_taken_while_thread_locals_are_destroyed_are_counted() {
        static LOCK: OnceLock<MeteredSpinLock<u32>> = OnceLock::new();
        struct TakesTheLockOnDrop;
        impl Drop for TakesTheLockOnDrop {
            fn drop(&mut self) {
                let l = LOCK.get_or_init(|| MeteredSpinLock::named("unit-tls-teardown", 0));
                *l.lock() += 1;
            }
        }
        std::thread_local! {
            static GUARD: std::cell::RefCell<Option<TakesTheLockOnDrop>> =
                const { std::cell::RefCell::new(None) };
        }
        std::thread::spawn(|| {
            let l = LOCK.get_or_init(|| MeteredSpinLock::named("unit-tls-teardown", 0));
            *l.lock() += 1; // this thread's cache now exists
            GUARD.with(|g| *g.borrow_mut() = Some(TakesTheLockOnDrop));
        })
        .join()
        .unwrap();
        assert_eq!(site("unit-tls-teardown").total, 2);
    }

    #[test]
    fn untimed_sites_show_no_hold_figures() {
        let s = SiteStats {
            name: "x".into(),
            total: 3,
            nowait: 3,
            ..Default::default()
        };
        assert!(format_table(&[s]).lines().nth(1).unwrap().contains("  -("));
    }

    #[test]
    fn estimated_total_is_the_timed_mean_times_the_acquisitions() {
        assert_eq!(estimate(100, 4, 40), 1000);
        assert_eq!(estimate(100, 40, 40), 100, "every hold timed: exact");
        assert_eq!(estimate(0, 0, 40), 0, "nothing timed yet");
        assert_eq!(estimate(u64::MAX, 1, 2), u64::MAX, "saturates");
    }

    #[test]
    #[should_panic(expected = "give 1 to time every hold")]
    fn zero_hold_sampling_is_refused_with_a_message() {
        let _ = MeteredSpinLock::<u8>::new(0).with_hold_sampling(0);
    }

    #[test]
    #[should_panic(expected = "up to MAX_HOLD_SAMPLING")]
    fn absurd_hold_sampling_is_refused_with_a_message() {
        let _ = MeteredMutex::<u8>::new(0).with_hold_sampling(MAX_HOLD_SAMPLING + 1);
    }

    #[test]
    fn spinlock_figures_match_a_known_hold() {
        held_while_another_waits(true, "unit-spin-known-hold");
    }

    #[test]
    fn mutex_figures_match_a_known_hold() {
        held_while_another_waits(false, "unit-mutex-known-hold");
    }

    /// A holder whose thread panics (the guard dropped while unwinding) unlocks, and the
    /// metered hold is still recorded; nothing is poisoned (spinlocks have no poisoning).
    #[test]
    fn spinlock_holder_that_panics_unlocks() {
        let l = MeteredSpinLock::<u32>::named("unit-spin-panic", 0);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                let mut g = l.lock();
                *g = 7;
                panic!("holder dies");
            })
            .join()
        });
        assert!(r.is_err());
        assert!(!l.lock.is_locked());
        assert_eq!(*l.lock(), 7);
        assert_eq!(site("unit-spin-panic").total, 2);
    }

    #[test]
    fn failed_try_lock_counts_as_rejected() {
        let l = MeteredSpinLock::<()>::named("unit-reject", ());
        let g = l.lock();
        assert!(l.try_lock().is_none());
        assert!(l.try_lock().is_none());
        drop(g);
        assert!(l.try_lock().is_some());
        let m = MeteredMutex::<()>::named("unit-reject-mutex", ());
        let g = m.lock().unwrap();
        assert!(matches!(m.try_lock(), Err(TryLockError::WouldBlock)));
        drop(g);
        let s = site("unit-reject");
        assert_eq!((s.total, s.nowait, s.rejected), (2, 2, 2));
        assert_eq!(s.reject_rate(), 0.5);
        assert_eq!(site("unit-reject-mutex").rejected, 1);
    }

    #[test]
    fn unnamed_locks_are_metered_per_call_site() {
        let l = MeteredSpinLock::<u8>::new(0);
        for _ in 0..3 {
            *l.lock() += 1; // one site
        }
        *l.lock() += 1; // another
        let line_a = line!() - 3;
        let mine: Vec<SiteStats> = snapshot()
            .into_iter()
            .filter(|s| s.name.starts_with(file!()))
            .collect();
        let a = mine
            .iter()
            .find(|s| s.name == format!("{}:{}", file!(), line_a))
            .expect("site of the loop");
        let b = mine
            .iter()
            .find(|s| s.name == format!("{}:{}", file!(), line_a + 2))
            .expect("site after the loop");
        assert_eq!((a.total, b.total), (3, 1));
    }

    #[test]
    fn unmetered_locks_record_nothing() {
        let l = MeteredSpinLock::<u8, false>::named("unit-off", 0);
        *l.lock() += 1;
        assert!(l.try_lock().is_some());
        let m = MeteredMutex::<u8, false>::named("unit-off", 0);
        *m.lock().unwrap() += 1;
        assert!(snapshot().iter().all(|s| s.name != "unit-off"));
    }

    #[test]
    fn poisoned_mutex_is_reported_and_still_metered() {
        let m = std::sync::Arc::new(MeteredMutex::<u8>::named("unit-poison", 0));
        let m2 = std::sync::Arc::clone(&m);
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("poison it");
        })
        .join();
        let r = m.lock();
        assert!(r.is_err());
        assert_eq!(*r.unwrap_err().into_inner(), 0);
        assert_eq!(site("unit-poison").total, 2);
    }

    #[test]
    fn table_is_sorted_by_contention() {
        let s = |name: &str, total, contended| SiteStats {
            name: name.into(),
            total,
            contended,
            nowait: total - contended,
            ..Default::default()
        };
        let mut v = vec![s("calm", 10, 0), s("hot", 10, 5)];
        v.sort_by(|a, b| b.contention().total_cmp(&a.contention()));
        let t = format_table(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("NOWAIT") && lines[0].contains("RJECT"));
        assert!(lines[1].ends_with("hot") && lines[2].ends_with("calm"));
        assert!(lines[1].contains("50.0%"));
    }
}
