//! Waiting without burning a core: wait strategies, and the sleeper / notify protocol the
//! rings use for their blocking operations (`pop_wait`, `push_wait`, ...).
//!
//! # What a busy ring pays
//!
//! Only rings made waitable pay anything: [`spsc::waitable`](crate::fifo::spsc::waitable)
//! and [`mpsc::waitable`](crate::fifo::mpsc::waitable) give ends of
//! [`WaitMode`](crate::fifo::WaitMode) [`Wait`](crate::fifo::Wait), which have the blocking
//! operations; `channel` gives [`NoWait`](crate::fifo::NoWait) ends, whose publications
//! compile the check below out entirely (the mode is a type parameter). The distributor
//! uses the same check once more: its workers' hand-backs notify one sleeper slot of the
//! distributor's own, where a sleeping `flush` waits.
//!
//! Each direction of a waitable ring (items for the consumer, room for the producer) has a
//! sleeper count on a line that is written only when a thread goes to sleep or wakes. After
//! every index publication the publishing side runs a *light barrier* and loads that count;
//! while nobody sleeps the line stays shared in both caches, so the check is an L1 hit and a
//! predictable branch: no shared write, no atomic read-modify-write. Only when the count is
//! non-zero does the publisher take the sleepers' mutex and notify.
//!
//! # No lost wake-ups
//!
//! The sleeper announces itself (increments the count), runs a *heavy barrier*, takes the
//! mutex, re-checks the ring, and only then waits on a condition variable, holding the
//! mutex from the re-check to the wait. The publisher stores its index, runs the light
//! barrier, then loads the count. The two barriers order each side's store before its load
//! (the store-load case that plain release / acquire does not cover): either the publisher
//! sees the announcement and wakes the sleeper, or the sleeper's re-check sees the new
//! index. The wake takes and releases the mutex, then notifies: that lock either comes
//! before the sleeper's re-check, which then sees the index, or after the sleeper entered
//! its wait, which the notify then ends.
//!
//! On Linux the barriers are asymmetric: the light one only keeps the compiler from
//! moving the load before the store (on x86_64 the load is an `asm!` block that may read
//! memory and writes none, so the ring end's fields stay in registers across it; elsewhere
//! a compiler fence), the heavy one the `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`
//! system call, which makes every CPU
//! running a thread of this process execute a full memory barrier before it returns (a few
//! microseconds, paid by the thread about to sleep). Where that call is unavailable (other
//! systems, old kernels, seccomp filters), under Miri and under loom, both barriers are
//! `fence(SeqCst)`: the ring's sleeper word then carries a flag, set when the ring is
//! made, that sends the publisher to a slow path with the fence (its first load proves
//! nothing; it loads the count again after the fence). The loom models (`tests/loom_wait.rs`) check the protocol with the
//! fences; Miri checks it with the fences; the asymmetric pair relies on the kernel's
//! documented guarantee. The x86_64 `asm!` form of the publisher's check, which is what
//! runs there natively, is seen by neither (nor by ThreadSanitizer): `tests/stress_wait.rs`
//! checks it, with membarrier and without (`FLOWLINE_NO_MEMBARRIER=1` in CI).
//!
//! Costs to know about:
//! - the publisher's check is one load, one test and one branch on a word that nobody
//!   writes while both sides run: the sleeper count, with a flag folded in where the
//!   barriers are symmetric (no membarrier), which sends every publication to the slow
//!   path that fences and loads again. The check is an `asm!` load on x86_64: a compiler
//!   fence as the light barrier made the compiler reload the ring end's fields after every
//!   publication (the measurements are in `docs/performance-notes.md` in the repository,
//!   "Waitable rings").
//! - each sleep runs the heavy barrier: on Linux it interrupts every CPU that is running a
//!   thread of this process (an IPI; microseconds), busy pollers on isolated cores
//!   included. Threads that sleep often (a consumer whose producer trickles) make the
//!   process's busy threads pay that; a strategy with more spins, or `SpinYield`, avoids it.
//! - where membarrier is unavailable (other systems, kernels before 4.14, a seccomp filter
//!   when the first waitable ring or distributor is made), the light barrier is a full
//!   fence on every publication (an `mfence` on x86, in an out-of-line slow path: tens of
//!   cycles per push or burst). Not measured here; the figures in the README are Linux
//!   with membarrier.
//! - if the barrier call fails after registration (a seccomp filter installed later,
//!   `ENOMEM`), waits stop sleeping for the rest of the process and poll with
//!   `yield_now` instead: still correct, no longer free while idle.
//!
//! # User code
//!
//! A task's waker is user code: its `wake`, `wake_by_ref`, `clone` and `drop` may do
//! anything, panic included. The rings run a waker only where their state is final (the
//! index and the flags it wakes for are published, no lock is held), and every `wake`
//! and `drop` of a waker registered on a ring runs through one function that
//! **contains** a panic: it is caught, counted in [`waker_panics`], and the operation
//! that ran the waker completes as if the waker had returned (the panic hook has
//! reported it, as for any panic). Such a waker belongs to another task than the caller,
//! and the operation may hold an item that unwinding would lose: a `pop` whose release of
//! the slot wakes a producer task still returns its item; an end's `Drop` still marks the
//! end gone. Other wakers registered on the same ring are all woken.
//!
//! The polling task's own waker is not contained: its `clone` (when a future registers)
//! and its `wake_by_ref` (when a future yields to its executor and asks to be polled
//! again) run before anything is taken or counted, and a panic there comes out of that
//! poll, leaving the ring and the future's item as they were. Containing it would leave
//! the task pending with no wake to come.
//!
//! ```
//! use std::time::Duration;
//! use flowline::fifo::spsc;
//! use flowline::wait::{WaitError, WaitStrategy};
//!
//! let (mut tx, mut rx) = spsc::waitable::<u64>(64).unwrap();
//! rx.set_wait_strategy(WaitStrategy::SpinPark { spins: 64, yields: 4 });
//! let t = std::thread::spawn(move || {
//!     for i in 0..1000 {
//!         tx.push_wait(i, Duration::from_secs(10)).unwrap();
//!     }
//! });
//! for i in 0..1000 {
//!     assert_eq!(rx.pop_wait(Duration::from_secs(10)), Ok(i));
//! }
//! t.join().unwrap();
//! // The producer is gone and the ring is empty: the wait ends at once.
//! assert_eq!(rx.pop_wait(Duration::from_secs(10)), Err(WaitError::Disconnected));
//! ```

use core::fmt;
use std::time::{Duration, Instant};

use crate::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};
use crate::sync::{Condvar, Mutex};

/// How a blocking operation waits while it cannot go on.
///
/// ```
/// use flowline::wait::WaitStrategy;
/// assert_eq!(WaitStrategy::default(), WaitStrategy::SpinPark { spins: 128, yields: 8 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStrategy {
    /// Poll in a loop with a spin-loop hint: the lowest latency, a whole core while waiting.
    Spin,
    /// Poll `spins` times with a spin-loop hint, then yield the CPU between polls (other
    /// threads run; the core stays busy when nothing else wants it).
    SpinYield {
        /// Polls before the first yield.
        spins: u32,
    },
    /// Poll `spins` times, yield `yields` times, then sleep until the other side publishes
    /// (or closes, or the timeout passes). Costs nothing while sleeping; waking takes the
    /// scheduler's time (microseconds).
    SpinPark {
        /// Polls before the first yield.
        spins: u32,
        /// Yields before sleeping.
        yields: u32,
    },
}

impl Default for WaitStrategy {
    /// `SpinPark { spins: 128, yields: 8 }`: a burst that arrives within about a
    /// microsecond is taken without a system call; a longer wait sleeps.
    fn default() -> Self {
        WaitStrategy::SpinPark {
            spins: 128,
            yields: 8,
        }
    }
}

/// Why a blocking operation gave up.
///
/// ```
/// use std::time::Duration;
/// use flowline::wait::WaitError;
/// let (_tx, mut rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
/// assert_eq!(rx.pop_wait(Duration::from_millis(1)), Err(WaitError::Timeout));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// The timeout passed first.
    Timeout,
    /// The other end was dropped: no item will come (the ring is empty), or no item will
    /// ever be taken.
    Disconnected,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Timeout => write!(f, "the wait timed out"),
            WaitError::Disconnected => write!(f, "the other end of the ring was dropped"),
        }
    }
}

impl std::error::Error for WaitError {}

/// A blocking push that gave up, with the item it could not place.
///
/// ```
/// use std::time::Duration;
/// use flowline::wait::WaitError;
/// let (mut tx, rx) = flowline::fifo::spsc::waitable::<u8>(1).unwrap();
/// tx.push(1).unwrap();
/// let e = tx.push_wait(2, Duration::from_millis(1)).unwrap_err();
/// assert_eq!((e.error, e.value), (WaitError::Timeout, 2));
/// drop(rx);
/// assert_eq!(tx.push_wait(3, Duration::ZERO).unwrap_err().error, WaitError::Disconnected);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PushWaitError<T> {
    /// Why.
    pub error: WaitError,
    /// The item, given back.
    pub value: T,
}

impl<T> fmt::Debug for PushWaitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushWaitError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for PushWaitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> std::error::Error for PushWaitError<T> {}

/// The asymmetric barrier pair (see the module docs).
#[cfg(all(target_os = "linux", not(loom), not(miri)))]
mod membarrier {
    use core::sync::atomic::{AtomicU8, Ordering};
    use std::sync::Once;

    const CMD_QUERY: libc::c_long = 0;
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    /// 1 once this process is registered for private expedited barriers.
    static READY: AtomicU8 = AtomicU8::new(0);
    static REGISTER: Once = Once::new();

    fn membarrier(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier takes two integer arguments (command, flags) and touches no
        // memory of this process; unknown commands fail with EINVAL.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long) }
    }

    /// Registers the process (once); afterwards `ready()` is true if the kernel offers
    /// private expedited barriers. Called when a ring is created, so the registration
    /// happens before either end of any ring runs on another thread.
    pub(super) fn register() {
        REGISTER.call_once(|| {
            // The process opted out: symmetric fences (see `asymmetric_barriers`).
            if std::env::var_os("FLOWLINE_NO_MEMBARRIER").is_some_and(|v| !v.is_empty() && v != "0")
            {
                return;
            }
            let supported = membarrier(CMD_QUERY);
            let wanted = CMD_PRIVATE_EXPEDITED | CMD_REGISTER_PRIVATE_EXPEDITED;
            if supported >= 0
                && supported & wanted == wanted
                && membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
            {
                // Relaxed: `Once` orders this store before every `call_once` return,
                // and ring handles reach other threads through a happens-before edge
                // (spawn, a channel) that starts after their creation.
                READY.store(1, Ordering::Relaxed);
            }
        });
    }

    #[inline(always)]
    pub(super) fn ready() -> bool {
        // Relaxed: see `register`; the value never changes after it.
        READY.load(Ordering::Relaxed) == 1
    }

    /// A full memory barrier on every CPU running a thread of this process. Returns false
    /// if the call failed (the caller then falls back to a fence).
    pub(super) fn heavy() -> bool {
        membarrier(CMD_PRIVATE_EXPEDITED) == 0
    }
}

/// Sets up the barriers (once per process). Ring constructors call it.
#[inline]
pub(crate) fn register() {
    #[cfg(all(target_os = "linux", not(loom), not(miri)))]
    membarrier::register();
}

/// Whether this process pairs the waitable rings' checks with `membarrier`: publishers then
/// pay no fence, and each thread that goes to sleep interrupts the CPUs running this
/// process's other threads once (see the [module docs](self)). `false` where the call is
/// unavailable (other systems, kernels before 4.14, a seccomp filter), under Miri and
/// loom, and when the environment variable `FLOWLINE_NO_MEMBARRIER` is set (to anything
/// but `0` or nothing) when the first waitable ring or distributor is created: then every
/// publication of a
/// waitable ring runs a full fence (tens of cycles) and sleeps interrupt nobody, the
/// better trade for a process whose busy pollers on isolated cores must never be
/// interrupted.
///
/// Decided once per process, when the first waitable ring or distributor is created
/// (`channel` rings do not set the barriers up); this call creates none and answers
/// `false` before that.
///
/// ```
/// let _ring = flowline::fifo::spsc::waitable::<u32>(8).unwrap();
/// let asymmetric = flowline::wait::asymmetric_barriers();
/// let opted_out = std::env::var_os("FLOWLINE_NO_MEMBARRIER")
///     .is_some_and(|v| !v.is_empty() && v != "0");
/// if opted_out {
///     assert!(!asymmetric);
/// }
/// ```
pub fn asymmetric_barriers() -> bool {
    #[cfg(all(target_os = "linux", not(loom), not(miri)))]
    {
        membarrier::ready()
    }
    #[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
    {
        false
    }
}

/// The sleeper's half: orders its announcement before its re-check of the ring. Returns
/// false if the barrier could not be run (the membarrier call failed after registration:
/// a seccomp filter installed later, `ENOMEM`); the caller must then not sleep, since
/// publishers order their side in the compiler only (no CPU fence).
fn heavy_barrier() -> bool {
    // Relaxed: a test switch, set before the waits it is meant for start.
    if FAIL_BARRIER.load(Ordering::Relaxed) {
        NO_SLEEP.store(true, Ordering::Relaxed);
        return false;
    }
    #[cfg(all(target_os = "linux", not(loom), not(miri)))]
    if membarrier::ready() {
        if membarrier::heavy() {
            return true;
        }
        NO_SLEEP.store(true, Ordering::Relaxed);
        return false;
    }
    fence(Ordering::SeqCst);
    true
}

/// Set once a heavy barrier failed: from then on waits poll with `yield_now` instead of
/// sleeping (correct without any barrier; costs a core's time slices while waiting).
static NO_SLEEP: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Test switch: makes every heavy barrier fail, as a membarrier call refused after
/// registration would (see [`simulate_barrier_failure`]).
static FAIL_BARRIER: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// **Testing only, not for production:** from now on, for the whole process, every
/// attempt to sleep finds the heavy barrier failing, as when the membarrier call is refused
/// after registration (a seccomp filter installed later, `ENOMEM`), so tests can check the
/// fallback: waits then poll with `yield_now` and still end correctly. Returns whether
/// sleeping had already been disabled. Hidden from the docs and outside any semver promise.
#[doc(hidden)]
pub fn simulate_barrier_failure() -> bool {
    FAIL_BARRIER.store(true, Ordering::Relaxed);
    sleeping_disabled()
}

/// **Testing only:** whether a failed heavy barrier has disabled sleeping for the process
/// (see [`simulate_barrier_failure`]). Hidden from the docs and outside any semver promise.
#[doc(hidden)]
pub fn sleeping_disabled() -> bool {
    // Relaxed: a diagnostic read.
    NO_SLEEP.load(Ordering::Relaxed)
}

/// Whether sleeping is still possible (see [`NO_SLEEP`]).
#[inline]
fn can_sleep() -> bool {
    // Relaxed: a stale `true` only leads to one more attempt, which fails the same way.
    !NO_SLEEP.load(Ordering::Relaxed)
}

/// Loads a sleeper word after the caller's index store, keeping the compiler (only) from
/// moving the load before the store: the publisher's half of the asymmetric barrier pair.
/// `$asm` reads the word at an address formed from the pointer `$p` (x86_64); `$word` is
/// the same word, for the other targets.
macro_rules! load_after_publish {
    ($asm:literal, $p:expr, $word:expr) => {{
        #[cfg(all(
            target_arch = "x86_64",
            target_pointer_width = "64",
            not(loom),
            not(miri)
        ))]
        {
            // An `asm!` load: it may read memory (not `nomem`), so the compiler cannot move
            // it before the index store, which it might read; it writes none (`readonly`),
            // so the compiler keeps the ring end's fields in registers across it. A
            // compiler fence would also make it reload them after every publication (~4
            // instructions per single push). The CPU's store-load order is the heavy
            // barrier's part (module docs).
            let waiting: u32;
            // SAFETY: the address is that of a live `AtomicU32` (each caller says why);
            // the block reads that one aligned 4-byte word (an atomic load on x86_64),
            // writes no memory and leaves the stack alone, as declared.
            unsafe {
                core::arch::asm!(
                    $asm,
                    p = in(reg) $p,
                    w = out(reg) waiting,
                    options(nostack, readonly, preserves_flags),
                );
            }
            waiting
        }
        #[cfg(loom)]
        {
            // Under loom the word always carries the bit (`asymmetric_barriers` is false):
            // `notify_slow` fences and loads it. A load here would add one more step to
            // every publication of every model and change nothing it can see.
            let _ = &$word;
            PUBLISHERS_FENCE
        }
        #[cfg(not(any(
            all(target_arch = "x86_64", target_pointer_width = "64", not(miri)),
            loom
        )))]
        {
            core::sync::atomic::compiler_fence(Ordering::SeqCst);
            // Relaxed: the barrier pair orders this load after the index store and against
            // the sleeper's announcement (module docs, and `notify_slow` where the pair is
            // two fences); the wake itself synchronises via the mutex.
            $word.load(Ordering::Relaxed)
        }
    }};
}

/// Threads sleeping until one direction of a ring makes progress (items to take, or
/// room to fill), or until a distributor's workers hand something back (the slot a
/// sleeping `flush` waits on), and the means to wake them.
///
/// `repr(C)` with the word first: [`WakingIndex`] addresses the word from the index before
/// it.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Sleepers {
    /// Threads announced as sleeping, and async tasks registered to be woken, plus
    /// [`PUBLISHERS_FENCE`] where publishers must run a full fence before they trust the
    /// count. Written only by sleepers (and by the wake that consumes a task's
    /// registration); read by every publication of a waitable ring.
    waiting: AtomicU32,
    lock: Mutex<Wakers>,
    cv: Condvar,
}

/// A ring index and the sleepers that its stores wake, side by side on the index's line:
/// the publisher's check after its store addresses the sleeper word from the index's own
/// address (8 bytes on), so no second pointer stays live in the publisher's loop, and
/// reads it from the line it has just written. The sleepers write the word only when they
/// go to sleep or wake, so the line moves no more often than the index makes it move.
/// Dereferences to the index.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct WakingIndex {
    index: AtomicUsize,
    sleepers: Sleepers,
}

// The sleeper word is the first field of `Sleepers` (`repr(C)`), which follows the index
// with no padding where its alignment is at most the index's size: 8 bytes on, as the
// `asm!` load in `WakingIndex::notify` takes it.
#[cfg(all(
    target_arch = "x86_64",
    target_pointer_width = "64",
    not(loom),
    not(miri)
))]
const _: () =
    assert!(core::mem::size_of::<AtomicUsize>() == 8 && core::mem::align_of::<Sleepers>() <= 8);

impl WakingIndex {
    /// An index at `value` with no sleepers (call [`register`] first, as for
    /// [`Sleepers::new`]).
    pub(crate) fn new(value: usize) -> Self {
        WakingIndex {
            index: AtomicUsize::new(value),
            sleepers: Sleepers::new(),
        }
    }

    /// The sleepers that this index's publications wake.
    #[inline(always)]
    pub(crate) fn sleepers(&self) -> &Sleepers {
        &self.sleepers
    }

    /// The publisher's check right after it stored the index: [`Sleepers::notify`], with
    /// the word addressed from the index.
    #[inline(always)]
    pub(crate) fn notify(&self) {
        let w = load_after_publish!(
            "mov {w:e}, dword ptr [{p} + 8]",
            // The word is 8 bytes past the index (the assertion above).
            (self as *const Self).cast::<u8>(),
            self.sleepers.waiting
        );
        if w != 0 {
            self.sleepers.notify_slow(w);
        }
    }
}

impl core::ops::Deref for WakingIndex {
    type Target = AtomicUsize;

    #[inline(always)]
    fn deref(&self) -> &AtomicUsize {
        &self.index
    }
}

/// The wakers of async tasks waiting on one direction (empty without the `async`
/// feature), guarded by the sleepers' mutex.
#[derive(Debug, Default)]
struct Wakers {
    #[cfg(feature = "async")]
    list: Vec<(u64, core::task::Waker)>,
    /// The key the next registration gets.
    #[cfg(feature = "async")]
    next_key: u64,
}

/// The bit of [`Sleepers::waiting`] that tells publishers to run a full fence and load the
/// count again before they trust it: set for good at creation where the barriers are
/// symmetric (no membarrier: other systems, the opt-out, Miri, loom). So the publisher's
/// hot path is one load and one test of a word that is 0 while nobody sleeps where
/// membarrier is in use; otherwise the bit sends every publication to the slow path.
const PUBLISHERS_FENCE: u32 = 1 << 31;

impl Sleepers {
    /// Call [`register`] first (ring constructors do): created before the barriers are
    /// set up, the publishers of this direction fence on every publication (correct, and
    /// slower).
    pub(crate) fn new() -> Self {
        let fence = if asymmetric_barriers() {
            0
        } else {
            PUBLISHERS_FENCE
        };
        Sleepers {
            waiting: AtomicU32::new(fence),
            lock: Mutex::new(Wakers::default()),
            cv: Condvar::new(),
        }
    }

    /// Whether a thread is announced as sleeping (a snapshot, for tests).
    pub(crate) fn has_sleepers(&self) -> bool {
        // Relaxed: a diagnostic read.
        self.waiting.load(Ordering::Relaxed) & !PUBLISHERS_FENCE != 0
    }

    /// Sleepers and registered tasks (a snapshot, for tests).
    #[cfg(all(test, not(loom), feature = "async"))]
    fn count(&self) -> u32 {
        self.waiting.load(Ordering::SeqCst) & !PUBLISHERS_FENCE
    }

    /// The publisher's check, right after it stored its index: wakes the sleepers, if any.
    /// One load and one test while nobody sleeps (and membarrier is in use).
    #[inline(always)]
    pub(crate) fn notify(&self) {
        let w = self.waiting_after_publish();
        if w != 0 {
            self.notify_slow(w);
        }
    }

    /// The rest of [`notify`](Self::notify) when the word was not 0: the full fence where
    /// the barriers are symmetric (the count loaded before it proves nothing), then the
    /// wake if anyone sleeps.
    #[cold]
    #[inline(never)]
    fn notify_slow(&self, mut w: u32) {
        if w & PUBLISHERS_FENCE != 0 {
            // The light barrier without membarrier: a full fence between the caller's
            // index store and the load of the count (module docs).
            fence(Ordering::SeqCst);
            // Relaxed: ordered by the fence pair; the wake synchronises via the mutex.
            w = self.waiting.load(Ordering::Relaxed);
        }
        if w & !PUBLISHERS_FENCE != 0 {
            self.wake_all();
        }
    }

    /// The sleeper word, loaded after the caller's index store with only the compiler
    /// kept from moving the load before the store: the publisher's half of the
    /// asymmetric barrier pair. Where the barriers are symmetric the word has
    /// [`PUBLISHERS_FENCE`] set, and [`notify_slow`](Self::notify_slow) fences and loads
    /// again.
    #[inline(always)]
    fn waiting_after_publish(&self) -> u32 {
        load_after_publish!(
            "mov {w:e}, dword ptr [{p}]",
            self.waiting.as_ptr(),
            self.waiting
        )
    }

    #[cold]
    #[inline(never)]
    fn wake_all(&self) {
        // Taking the mutex waits out a sleeper between its re-check and its wait: once it
        // is released, every sleeper either waits on the condvar already or re-checks
        // after this publication, which it then sees.
        #[cfg_attr(not(feature = "async"), allow(unused_mut))]
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // Each registration is consumed by this wake (its task registers again if it still
        // has to wait).
        #[cfg(feature = "async")]
        let tasks = core::mem::take(&mut g.list);
        #[cfg(feature = "async")]
        if !tasks.is_empty() {
            // Relaxed: as the thread sleepers' own decrement.
            self.waiting
                .fetch_sub(tasks.len() as u32, Ordering::Relaxed);
        }
        drop(g);
        // Notified after the mutex is released, so a woken sleeper does not find it still
        // held by this thread (and block on it once more) when it takes it back.
        self.cv.notify_all();
        // The wakers run after the mutex is released (a waker may poll its task inline, and
        // the poll takes this mutex) and after the caller's publication: each one that
        // panics is contained (see [`run_waker`]), so every registration consumed here is
        // woken and the caller's operation completes.
        #[cfg(feature = "async")]
        for (_, waker) in tasks {
            run_waker(move || waker.wake());
        }
    }

    /// Registers an async task to be woken by the next publication in this direction, or
    /// refreshes its waker, then re-checks: returns true (and leaves nothing registered)
    /// if `ready()` is true by then, so the caller polls again instead of returning
    /// `Pending`. `key` is the task's registration, `None` when it has none (or a wake
    /// consumed it).
    ///
    /// The protocol is the thread sleepers' one (module docs): announce (count), heavy
    /// barrier, re-check under the mutex; a publisher that misses the registration has
    /// published before the re-check, which then sees it. If the heavy barrier cannot be
    /// run, nothing is registered and the task is woken at once (it polls again: correct,
    /// and busy).
    #[cfg(feature = "async")]
    pub(crate) fn register_waker(
        &self,
        key: &mut Option<u64>,
        waker: &core::task::Waker,
        ready: impl Fn() -> bool,
    ) -> bool {
        // User code (the waker's clone and drop) runs outside the mutex and before the
        // count moves: a waker that panics leaves nothing counted and nothing locked, and
        // one whose drop frees a task that deregisters here cannot deadlock.
        let fresh = waker.clone();
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let live = key.and_then(|k| g.list.iter().position(|(kk, _)| *kk == k));
        let mut old = None;
        let mut unused = None;
        if let Some(i) = live {
            // Still registered: keep the count, refresh the waker.
            if g.list[i].1.will_wake(waker) {
                unused = Some(fresh);
            } else {
                old = Some(core::mem::replace(&mut g.list[i].1, fresh));
            }
        } else {
            // Announce before the barrier and the re-check, as a thread sleeper does; the
            // mutex is released meanwhile, so a publisher that sees the count never waits
            // for the barrier.
            drop(g);
            // SeqCst: the announcement is the store of the sleeper's store-load pair.
            self.waiting.fetch_add(1, Ordering::SeqCst);
            if !heavy_barrier() {
                // Relaxed: as in `sleep_until`.
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                *key = None;
                run_waker(move || drop(fresh));
                // The task's own waker, asked to poll again: not contained (see
                // `run_waker`), nothing is registered or taken here.
                waker.wake_by_ref();
                return false;
            }
            g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            let k = g.next_key;
            g.next_key += 1;
            g.list.push((k, fresh));
            *key = Some(k);
        }
        let ready_now = ready();
        let removed = if ready_now {
            Self::remove(&self.waiting, &mut g, key)
        } else {
            None
        };
        drop(g);
        // Every waker this call let go of is dropped here, with no lock held, each on its
        // own (a second panic during the first one's unwinding would abort).
        run_waker(move || drop(old));
        run_waker(move || drop(removed));
        run_waker(move || drop(unused));
        ready_now
    }

    /// Drops a task's registration, if a wake has not consumed it (a future dropped while
    /// pending, or one that completed). A future that never registered (the common case
    /// on a busy ring) pays one test.
    #[cfg(feature = "async")]
    #[inline(always)]
    pub(crate) fn deregister(&self, key: &mut Option<u64>) {
        if key.is_some() {
            self.deregister_registered(key);
        }
    }

    /// [`deregister`](Self::deregister) of a live key, out of line.
    #[cfg(feature = "async")]
    #[cold]
    #[inline(never)]
    fn deregister_registered(&self, key: &mut Option<u64>) {
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let removed = Self::remove(&self.waiting, &mut g, key);
        drop(g);
        run_waker(move || drop(removed));
    }

    /// Whether a wake consumed the registration `key` (then `key` becomes `None`); false
    /// if it is still registered.
    #[cfg(feature = "async")]
    pub(crate) fn consumed(&self, key: &mut Option<u64>) -> bool {
        let g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let live = key.is_some_and(|k| g.list.iter().any(|(kk, _)| *kk == k));
        drop(g);
        if !live {
            *key = None;
        }
        !live
    }

    /// Takes a registration out of the list; the caller drops the waker after releasing
    /// the mutex.
    #[cfg(feature = "async")]
    fn remove(
        waiting: &AtomicU32,
        g: &mut Wakers,
        key: &mut Option<u64>,
    ) -> Option<core::task::Waker> {
        let k = key.take()?;
        let i = g.list.iter().position(|(kk, _)| *kk == k)?;
        // Relaxed: a publisher that still sees the count only takes the mutex.
        waiting.fetch_sub(1, Ordering::Relaxed);
        Some(g.list.swap_remove(i).1)
    }

    /// Sleeps until `ready()` is true or `deadline` passes; returns `ready()`'s last
    /// answer. `ready` must only read shared state (it runs under the mutex, so it must not
    /// publish, which could take another direction's mutex).
    pub(crate) fn sleep_until(&self, ready: impl Fn() -> bool, deadline: Option<Instant>) -> bool {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return ready();
        }
        // Announce, then the heavy barrier, both before taking the mutex: a publisher that
        // sees the announcement blocks on the mutex only while this thread re-checks, never
        // during the barrier (which may take microseconds). A publisher that takes the
        // mutex first has stored its index before releasing it, so the re-check below
        // (after this thread acquires it) sees the index.
        // SeqCst: the announcement is the store of the sleeper's store-load pair.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        if !heavy_barrier() {
            // Relaxed: see below.
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return ready();
        }
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let ready_now = loop {
            if ready() {
                break true;
            }
            match deadline {
                None => g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break false;
                    }
                    g = self
                        .cv
                        .wait_timeout(g, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        };
        drop(g);
        // Relaxed: a publisher that still sees the count only takes the mutex for nothing.
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        ready_now
    }
}

/// Waker panics contained so far (see [`waker_panics`]).
#[cfg(feature = "async")]
static WAKER_PANICS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// How many times, in this process, a task's waker panicked in its `wake`, `wake_by_ref`
/// or `drop` while this crate ran it. Such a panic never reaches the caller of the ring
/// operation that ran the waker: it is caught, counted here, and the operation completes
/// (the panic hook has already reported it, as for any panic). See the module docs,
/// "User code".
///
/// ```
/// // No waker has panicked in this program.
/// assert_eq!(flowline::wait::waker_panics(), 0);
/// ```
#[cfg(feature = "async")]
#[cfg_attr(docsrs, doc(cfg(feature = "async")))]
pub fn waker_panics() -> usize {
    // Relaxed: a statistic.
    WAKER_PANICS.load(Ordering::Relaxed)
}

/// The one place where this crate runs the code of a waker it holds for a task (its
/// `wake`, `wake_by_ref`, `drop`): a panic in it is contained and counted
/// ([`waker_panics`]), never unwound into the operation that ran it, whose item may be in
/// flight (a `pop` that released a slot and has not returned its item yet) or whose flags
/// may not be published yet (an end's `Drop`). Callers run it after their state is final,
/// with no lock held, one waker per call (a second panic while the first unwinds would
/// abort). The polling task's own waker (`cx.waker()`, asked to poll again when a future
/// yields) is not run through it: a panic there reaches that task's executor from a poll
/// that took nothing, instead of leaving the task pending with no wake to come.
#[cfg(feature = "async")]
#[inline]
pub(crate) fn run_waker(f: impl FnOnce()) {
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        // Relaxed: a statistic.
        WAKER_PANICS.fetch_add(1, Ordering::Relaxed);
        // A payload whose own `drop` panics (rust-lang/rust#86027) is leaked instead.
        if let Err(q) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(p))) {
            core::mem::forget(q);
        }
    }
}

/// One poll of a wait for one item, for `pop_wait` and `pop_async` of both rings: the item
/// `pop` returns, or, when it finds none and the other end is `gone`, one more `pop`
/// (items published before the drop are seen after it) and `Closed` if that finds nothing.
pub(crate) fn poll_one<H, R>(
    h: &mut H,
    mut pop: impl FnMut(&mut H) -> Option<R>,
    gone: impl Fn(&H) -> bool,
) -> Step<R> {
    match pop(h) {
        Some(v) => Step::Ready(v),
        None if gone(h) => pop(h).map_or(Step::Closed, Step::Ready),
        None => Step::Pending,
    }
}

/// One poll of a wait for room, for `push_wait` and `push_async` of both rings: `Closed`
/// if the other end is `gone` (checked first: an item is never pushed into a ring nobody
/// reads) or the item was already pushed; otherwise `push` of the item in `slot`, which
/// stays there if the ring is full.
pub(crate) fn poll_push<H, T>(
    h: &mut H,
    slot: &mut Option<T>,
    push: impl FnOnce(&mut H, T) -> Result<(), T>,
    gone: impl Fn(&H) -> bool,
) -> Step<()> {
    if gone(h) {
        return Step::Closed;
    }
    match slot.take().map(|v| push(h, v)) {
        Some(Ok(())) => Step::Ready(()),
        Some(Err(v)) => {
            *slot = Some(v);
            Step::Pending
        }
        None => Step::Closed,
    }
}

/// A burst with a wait, for both rings' `push_burst_wait`: the fast path is one Relaxed
/// load of the consumer-gone flag (`gone_now`, a line nobody writes until the drop) and one
/// `push`; only after a full ring does it wait (the out-of-line [`wait_after_miss`]), with
/// the Acquire check (`gone`) before each poll. An Acquire load on every burst would make
/// the compiler reload the ring end's fields after it (0.86-0.90x of polling at bursts of
/// 32, against 0.97-1.09x this way).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn push_burst_or_wait<H>(
    h: &mut H,
    strategy: impl Fn(&H) -> WaitStrategy,
    timeout: Duration,
    gone_now: impl Fn(&H) -> bool,
    gone: impl Fn(&H) -> bool,
    mut push: impl FnMut(&mut H) -> usize,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<usize, WaitError> {
    if gone_now(h) {
        return Err(WaitError::Disconnected);
    }
    match push(h) {
        0 => push_burst_wait_slow(h, strategy, timeout, gone, push, ready, sleepers),
        n => Ok(n),
    }
}

/// [`push_burst_or_wait`] after a full ring: out of line and cold, so that the fast path
/// compiles into the caller's loop without it.
#[allow(clippy::too_many_arguments)]
#[cold]
#[inline(never)]
fn push_burst_wait_slow<H>(
    h: &mut H,
    strategy: impl Fn(&H) -> WaitStrategy,
    timeout: Duration,
    gone: impl Fn(&H) -> bool,
    mut push: impl FnMut(&mut H) -> usize,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<usize, WaitError> {
    // Read here, not on the fast path: copying the strategy out of the handle before the
    // first push cost 4 instructions per burst.
    let strategy = strategy(h);
    wait_after_miss(
        h,
        strategy,
        timeout,
        |h| {
            if gone(h) {
                return Step::Closed;
            }
            match push(h) {
                0 => Step::Pending,
                n => Step::Ready(n),
            }
        },
        ready,
        sleepers,
    )
}

/// One poll of a wait for items that takes (or counts) them with `take`, for the burst
/// and `wait_for_items` forms of both rings: what `take` returned, or, when it returned 0
/// and the other end is `gone`, one more `take` (items published before the drop are seen
/// after it) and `Closed` if that finds nothing either.
pub(crate) fn poll_items<H>(
    h: &mut H,
    mut take: impl FnMut(&mut H) -> usize,
    gone: impl Fn(&H) -> bool,
) -> Step<usize> {
    match take(h) {
        0 if gone(h) => match take(h) {
            0 => Step::Closed,
            n => Step::Ready(n),
        },
        0 => Step::Pending,
        n => Step::Ready(n),
    }
}

/// One poll of a blocking operation.
pub(crate) enum Step<R> {
    /// Done.
    Ready(R),
    /// Nothing yet.
    Pending,
    /// The other end is gone and nothing more will come.
    Closed,
}

/// Waits by `strategy` until `poll` is ready or closed, or `timeout` passes. `ready` is the
/// sleeper's read-only re-check (true when a poll would make progress or see the close);
/// `sleepers` the direction to sleep on. The clock is read only after the first poll
/// failed, so an operation that finds what it wants at once costs no clock read.
#[inline]
pub(crate) fn wait_loop<H, R>(
    h: &mut H,
    strategy: WaitStrategy,
    timeout: Duration,
    mut poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<R, WaitError> {
    match poll(h) {
        Step::Ready(r) => return Ok(r),
        Step::Closed => return Err(WaitError::Disconnected),
        Step::Pending => {}
    }
    wait_after_miss(h, strategy, timeout, poll, ready, sleepers)
}

/// [`wait_loop`] for a caller whose own poll has just found nothing: it pauses (spins,
/// yields or sleeps by `strategy`) before every poll, the first included. A poll that
/// finds the ring empty (or full) has read the other end's index line, taking it from its
/// writer; polling again at once would take it again before the writer could move, so
/// a busy wait polls exactly as often as a loop of `pop` and `spin_loop` does.
#[inline(never)]
pub(crate) fn wait_after_miss<H, R>(
    h: &mut H,
    strategy: WaitStrategy,
    timeout: Duration,
    mut poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
) -> Result<R, WaitError> {
    // The clock is read only when a deadline matters: never for `Duration::MAX`, and first
    // at the first check (after 64 polls, or when the spinning ends), so a wait that ends
    // within a short spin reads no clock; the deadline counts from that first read.
    // `Some(None)`: no deadline (too far to represent).
    let mut deadline: Option<Option<Instant>> = if timeout == Duration::MAX {
        Some(None)
    } else {
        None
    };
    let expired = |deadline: &mut Option<Option<Instant>>| match *deadline {
        Some(d) => d.is_some_and(|d| Instant::now() >= d),
        None => {
            *deadline = Some(Instant::now().checked_add(timeout));
            timeout.is_zero()
        }
    };
    let (spins, yields, park) = match strategy {
        WaitStrategy::Spin => (u32::MAX, 0, false),
        WaitStrategy::SpinYield { spins } => (spins, u32::MAX, false),
        WaitStrategy::SpinPark { spins, yields } => (spins, yields, true),
    };
    let spin_forever = strategy == WaitStrategy::Spin;
    let mut n = 0u32;
    loop {
        // Every pass follows a poll that found nothing. The clock every 64 polls while
        // spinning, on every poll after. A wait that times out looks once more first, so
        // it reports what a poll sees now (an item, or the other end gone): the caller's
        // own miss may have been its only poll.
        if (n >= spins || n % 64 == 63) && expired(&mut deadline) {
            return match poll(h) {
                Step::Ready(r) => Ok(r),
                Step::Closed => Err(WaitError::Disconnected),
                Step::Pending => Err(WaitError::Timeout),
            };
        }
        if spin_forever || n < spins {
            n = n.wrapping_add(1);
            spin_once();
        } else if n - spins < yields || !park || !can_sleep() {
            n = n.saturating_add(1);
            yield_once();
        } else {
            // `n >= spins` here, so the deadline has been read.
            sleepers(h).sleep_until(|| ready(h), deadline.flatten());
            // Woken (or timed out, or spurious): spin again before the next sleep, so
            // several threads woken for one slot do not all go back to sleep at once.
            n = 0;
        }
        match poll(h) {
            Step::Ready(r) => return Ok(r),
            Step::Closed => return Err(WaitError::Disconnected),
            Step::Pending => {}
        }
    }
}

/// Runs a future to completion on the calling thread, parking the thread while the future
/// is pending (its waker unparks it). For threads that wait on one future at a time, tests
/// and examples: not an async runtime (no tasks, no I/O, no timers).
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u32>(4).unwrap();
/// let t = std::thread::spawn(move || tx.push(7).unwrap());
/// assert_eq!(flowline::wait::block_on(rx.pop_async()), Ok(7));
/// t.join().unwrap();
/// ```
#[cfg(all(feature = "async", not(loom)))]
#[cfg_attr(docsrs, doc(cfg(feature = "async")))]
pub fn block_on<F: core::future::Future>(future: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake};
    /// Unparks the blocked thread.
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let mut future = core::pin::pin!(future);
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        // A wake that came before this park makes it return at once (the park token).
        std::thread::park();
    }
}

/// How many async operations one ring end completes in a row, without waiting, before its
/// next future yields to the executor once: 128, tokio's per-task budget. See
/// [`Consumer::set_async_budget`](crate::fifo::spsc::Consumer::set_async_budget).
///
/// ```
/// assert_eq!(flowline::wait::DEFAULT_ASYNC_BUDGET, 128);
/// ```
#[cfg(feature = "async")]
#[cfg_attr(docsrs, doc(cfg(feature = "async")))]
pub const DEFAULT_ASYNC_BUDGET: u32 = 128;

/// The cooperative budget of one async ring end: a task whose rings are always ready
/// would otherwise never return `Pending`, and on a single-threaded executor no other task
/// would run. After `budget` completions in a row, the next poll wakes its own task and
/// returns `Pending` once (the item stays where it was: nothing is taken or pushed by
/// that poll). Any `Pending` refills it, since the task went back to its executor then
/// anyway. Budget 0: never yield. Touched only by the async futures, never by the
/// synchronous operations.
#[cfg(feature = "async")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Coop {
    budget: u32,
    /// Completions left before the next yield; for budget 0 (never yield) `u32::MAX`,
    /// refilled without a yield when it runs out, so the busy path tests one field.
    left: u32,
}

#[cfg(feature = "async")]
impl Coop {
    pub(crate) const fn new() -> Self {
        Coop {
            budget: DEFAULT_ASYNC_BUDGET,
            left: DEFAULT_ASYNC_BUDGET,
        }
    }

    pub(crate) fn budget(&self) -> u32 {
        self.budget
    }

    /// The same budget, full.
    pub(crate) fn refilled(mut self) -> Self {
        self.refill();
        self
    }

    pub(crate) fn set(&mut self, budget: u32) {
        self.budget = budget;
        self.refill();
    }

    fn refill(&mut self) {
        self.left = if self.budget == 0 {
            u32::MAX
        } else {
            self.budget
        };
    }

    /// Whether a poll may go on without yielding first (what [`proceed`](Self::proceed)
    /// answers, without refilling).
    #[inline(always)]
    pub(crate) fn has_left(&self) -> bool {
        self.left != 0
    }

    /// Counts one completed operation against the budget: only after
    /// [`has_left`](Self::has_left) or [`proceed`](Self::proceed) said so (then `left` is
    /// not 0, and the count is one decrement).
    #[inline(always)]
    pub(crate) fn spend_one(&mut self) {
        debug_assert_ne!(self.left, 0, "a completion counted against a spent budget");
        // Wrapping, not saturating: never 0 here (above), and a stray completion would
        // only postpone the next yield.
        self.left = self.left.wrapping_sub(1);
    }

    /// At the start of a poll: `false` when the budget is spent (then refilled, and the
    /// caller yields; budget 0 refills and goes on).
    fn proceed(&mut self) -> bool {
        if self.left == 0 {
            self.refill();
            return self.budget == 0;
        }
        true
    }
}

/// One poll of an async wait: polls the operation, and if it must wait, first yields to
/// the executor up to the strategy's `spins + yields` times (`yielded` counts them), then
/// registers the task (`key`) on `sleepers` and re-checks with `ready`, looping while the
/// re-check says the operation can go on. A completed operation leaves nothing registered.
///
/// Inlined into each future's `poll` is only the busy ring's case: nothing registered,
/// budget left, and the operation done at the first try (the budget's count and nothing
/// else); everything else, with a second try of the operation, is out of line.
#[cfg(feature = "async")]
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn poll_async<H, R>(
    h: &mut H,
    key: &mut Option<u64>,
    yielded: &mut u32,
    strategy: WaitStrategy,
    cx: &mut core::task::Context<'_>,
    mut poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
    coop: impl Fn(&mut H) -> &mut Coop,
) -> core::task::Poll<Result<R, WaitError>> {
    if key.is_none() && coop(h).has_left() {
        if let Step::Ready(r) = poll(h) {
            coop(h).spend_one();
            return core::task::Poll::Ready(Ok(r));
        }
    }
    poll_async_slow(h, key, yielded, strategy, cx, poll, ready, sleepers, coop)
}

/// [`poll_async`] past its fast case.
#[cfg(feature = "async")]
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn poll_async_slow<H, R>(
    h: &mut H,
    key: &mut Option<u64>,
    yielded: &mut u32,
    strategy: WaitStrategy,
    cx: &mut core::task::Context<'_>,
    mut poll: impl FnMut(&mut H) -> Step<R>,
    ready: impl Fn(&H) -> bool,
    sleepers: impl Fn(&H) -> &Sleepers,
    coop: impl Fn(&mut H) -> &mut Coop,
) -> core::task::Poll<Result<R, WaitError>> {
    use core::task::Poll;
    if !coop(h).proceed() {
        // The task's own waker: a panic comes out of this poll, which took nothing.
        cx.waker().wake_by_ref();
        return Poll::Pending;
    }
    // The strategy's spins and yields, as self-wakes: the task goes back to its
    // executor's queue and polls again when its turn comes, so a partner task on the same
    // executor runs meanwhile, and no registration (no heavy barrier) is needed when the
    // partner answers within the window. A self-wake poll costs about what a few spins
    // cost a thread, so the window is the spins and yields together (136 polls by
    // default). `Spin` and `SpinYield` have no window end: they never register.
    let window = match strategy {
        WaitStrategy::SpinPark { spins, yields } => Some(spins.saturating_add(yields)),
        WaitStrategy::Spin | WaitStrategy::SpinYield { .. } => None,
    };
    loop {
        let done = match poll(h) {
            Step::Ready(r) => Ok(r),
            Step::Closed => Err(WaitError::Disconnected),
            Step::Pending => {
                // Polled again after registering: if a wake consumed the registration, the
                // window starts over (as a woken thread spins again before it sleeps), so
                // that tasks woken together for one slot do not all register at once.
                if key.is_some() && sleepers(h).consumed(key) {
                    *yielded = 0;
                }
                let in_window = key.is_none() && window.map_or(true, |w| *yielded < w);
                if in_window || !can_sleep() {
                    *yielded = yielded.saturating_add(1);
                    // The task's own waker: a panic comes out of this poll, which took
                    // nothing (see `run_waker`).
                    cx.waker().wake_by_ref();
                } else if sleepers(&*h).register_waker(key, cx.waker(), || ready(&*h)) {
                    continue;
                }
                // The task goes back to its executor: a fresh budget.
                coop(h).refill();
                return Poll::Pending;
            }
        };
        sleepers(h).deregister(key);
        coop(h).spend_one();
        return Poll::Ready(done);
    }
}

#[inline(always)]
fn spin_once() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

#[inline(always)]
fn yield_once() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

#[cfg(all(test, not(loom)))]
mod fence_bit_tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// The sleeper word carries the fence bit exactly where the barriers are symmetric
    /// (so publishers fence there), and the bit never counts as a sleeper.
    #[test]
    fn the_fence_bit_follows_the_barriers() {
        register();
        let s = Sleepers::new();
        let w = s.waiting.load(Ordering::SeqCst);
        assert_eq!(w & PUBLISHERS_FENCE != 0, !asymmetric_barriers());
        assert_eq!(w & !PUBLISHERS_FENCE, 0);
        assert!(!s.has_sleepers());
        s.notify();
    }

    /// A waking index's sleeper word sits 8 bytes past the index on 64-bit targets (where
    /// the publisher's `asm!` load addresses it so), and its check wakes a sleeper
    /// announced there.
    #[test]
    fn a_waking_index_finds_its_sleeper_word() {
        register();
        let ix = WakingIndex::new(3);
        assert_eq!(ix.load(Ordering::SeqCst), 3);
        if cfg!(target_pointer_width = "64") {
            let base = (&ix as *const WakingIndex).cast::<u8>();
            let word = ix.sleepers().waiting.as_ptr().cast::<u8>().cast_const();
            assert_eq!(word as usize - base as usize, 8);
        }
        let fence = ix.sleepers().waiting.load(Ordering::SeqCst);
        let woken = Arc::new(AtomicBool::new(false));
        std::thread::scope(|t| {
            t.spawn(|| {
                // As a sleeper would: announce, then wait on the condvar until woken.
                let mut g = ix.sleepers().lock.lock().unwrap();
                ix.sleepers().waiting.fetch_add(1, Ordering::SeqCst);
                while ix.load(Ordering::SeqCst) == 3 {
                    g = ix.sleepers().cv.wait(g).unwrap();
                }
                woken.store(true, Ordering::SeqCst);
            });
            while ix.sleepers().waiting.load(Ordering::SeqCst) == fence {
                std::thread::yield_now();
            }
            ix.store(4, Ordering::SeqCst);
            ix.notify();
        });
        assert!(woken.load(Ordering::SeqCst));
    }

    /// With the fence bit set (as without membarrier), a publication still wakes a
    /// sleeper: the slow path fences, loads the count again and wakes.
    #[test]
    fn the_fence_path_wakes_sleepers() {
        register();
        // A word without the bit is only made where membarrier is in use.
        let bits: &[u32] = if asymmetric_barriers() {
            &[0, PUBLISHERS_FENCE]
        } else {
            &[PUBLISHERS_FENCE]
        };
        for &bit in bits {
            let s = Arc::new(Sleepers::new());
            s.waiting.store(bit, Ordering::SeqCst);
            let ready = Arc::new(AtomicBool::new(false));
            let t = {
                let (s, ready) = (Arc::clone(&s), Arc::clone(&ready));
                std::thread::spawn(move || {
                    let t0 = Instant::now();
                    let deadline = t0 + Duration::from_secs(20);
                    let woken = s.sleep_until(|| ready.load(Ordering::SeqCst), Some(deadline));
                    // Woken by the notify, not by the deadline.
                    woken && t0.elapsed() < Duration::from_secs(10)
                })
            };
            while !s.has_sleepers() && !t.is_finished() {
                std::thread::yield_now();
            }
            ready.store(true, Ordering::SeqCst);
            s.notify();
            assert!(
                t.join().unwrap(),
                "woken with the item there (bit {bit:#x})"
            );
            assert_eq!(s.waiting.load(Ordering::SeqCst), bit, "count back to 0");
        }
    }
}

#[cfg(all(test, not(loom), feature = "async"))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The sleeper count that publishers check follows the registrations exactly: up on
    /// registration, unchanged on a refresh, down on withdrawal, on a wake (which consumes
    /// every registration), and when the re-check finds the operation ready.
    #[test]
    fn registrations_keep_the_sleeper_count_exact() {
        register();
        let s = Sleepers::new();
        let c = Arc::new(Count(AtomicUsize::new(0)));
        let w = Waker::from(c.clone());
        let (mut a, mut b) = (None, None);
        assert!(!s.register_waker(&mut a, &w, || false));
        assert!(!s.register_waker(&mut a, &w, || false), "a refresh");
        assert!(!s.register_waker(&mut b, &w, || false));
        assert_eq!(s.count(), 2);
        s.deregister(&mut b);
        assert_eq!((s.count(), b), (1, None));
        s.notify();
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert_eq!(s.count(), 0, "the wake consumed it");
        // `a` still holds its old key, which the wake consumed: registering again counts
        // again, and withdrawing the stale key changes nothing.
        assert!(!s.register_waker(&mut a, &w, || false));
        assert_eq!(s.count(), 1);
        let mut stale = Some(u64::MAX);
        s.deregister(&mut stale);
        assert_eq!(s.count(), 1);
        s.deregister(&mut a);
        // Ready at the re-check: nothing stays registered.
        assert!(s.register_waker(&mut a, &w, || true));
        assert_eq!((s.count(), a), (0, None));
        s.notify();
        assert_eq!(
            c.0.load(Ordering::SeqCst),
            1,
            "nobody registered, nobody woken"
        );
    }
    /// A waker that panics in `wake` (`on_wake`) or in `clone`.
    fn bad_waker(on_wake: bool) -> Waker {
        use std::task::{RawWaker, RawWakerVTable};
        static WAKE_PANICS: RawWakerVTable = RawWakerVTable::new(
            |p| RawWaker::new(p, &WAKE_PANICS),
            |_| panic!("waker panics in wake"),
            |_| panic!("waker panics in wake_by_ref"),
            |_| {},
        );
        static CLONE_PANICS: RawWakerVTable =
            RawWakerVTable::new(|_| panic!("waker panics in clone"), |_| {}, |_| {}, |_| {});
        let vtable = if on_wake { &WAKE_PANICS } else { &CLONE_PANICS };
        // SAFETY: the vtables never dereference the data pointer, and `clone` returns a
        // waker with the same (valid) vtable.
        unsafe { Waker::from_raw(RawWaker::new(core::ptr::null(), vtable)) }
    }

    /// Wakers that panic (two of three here) are contained: the publication returns, the
    /// other registrations are woken and the count stays exact; one whose clone panics
    /// (before anything is registered) leaves nothing counted.
    #[test]
    fn panicking_wakers_lose_no_other_wake_and_no_count() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        register();
        let s = Sleepers::new();
        let c = Arc::new(Count(AtomicUsize::new(0)));
        let good = Waker::from(c.clone());
        let bad = bad_waker(true);
        // Two panicking wakers around a good one: one panic comes out (no abort from a
        // second panic during the first's unwinding), and the good one is woken.
        let (mut a, mut b, mut d) = (None, None, None);
        assert!(!s.register_waker(&mut a, &bad, || false));
        assert!(!s.register_waker(&mut b, &good, || false));
        assert!(!s.register_waker(&mut d, &bad, || false));
        assert_eq!(s.count(), 3);
        let before = waker_panics();
        // Contained: the publication that ran them completes, and both panics are counted.
        s.notify();
        assert!(waker_panics() - before >= 2);
        assert_eq!(
            c.0.load(Ordering::SeqCst),
            1,
            "woken despite the others' panics"
        );
        assert_eq!(s.count(), 0);
        let clone_panics = bad_waker(false);
        let mut k = None;
        let r = catch_unwind(AssertUnwindSafe(|| {
            s.register_waker(&mut k, &clone_panics, || false)
        }));
        assert!(r.is_err());
        assert_eq!((s.count(), k), (0, None));
        // Registrations still work afterwards.
        assert!(!s.register_waker(&mut k, &good, || false));
        s.notify();
        assert_eq!(c.0.load(Ordering::SeqCst), 2);
    }

    /// A waker whose `drop` panics: the drop that follows a poll which took its item (the
    /// poll withdraws its registration, which a racing wake had not consumed yet) is
    /// contained, and the item comes out of the poll (it was dropped with the unwinding).
    #[test]
    fn a_waker_dropped_after_the_poll_took_its_item_loses_nothing() {
        use std::task::{RawWaker, RawWakerVTable};
        static DROP_PANICS: RawWakerVTable = RawWakerVTable::new(
            |p| RawWaker::new(p, &DROP_PANICS),
            |_| {},
            |_| {},
            |_| panic!("waker panics in drop"),
        );
        register();
        struct H {
            s: Sleepers,
            item: Option<Box<u64>>,
            coop: Coop,
        }
        let mut h = H {
            s: Sleepers::new(),
            item: None,
            coop: Coop::new(),
        };
        let mut key = None;
        let mut yielded = 0;
        let strategy = WaitStrategy::SpinPark {
            spins: 0,
            yields: 0,
        };
        let poll = |h: &mut H, key: &mut Option<u64>, yielded: &mut u32, cx: &mut Context| {
            poll_async(
                h,
                key,
                yielded,
                strategy,
                cx,
                |h| h.item.take().map_or(Step::Pending, Step::Ready),
                |h| h.item.is_some(),
                |h| &h.s,
                |h| &mut h.coop,
            )
        };
        // Never dropped itself (its drop panics): only the clones the ring keeps are.
        // SAFETY: the vtable never dereferences the data pointer.
        let bad = core::mem::ManuallyDrop::new(unsafe {
            Waker::from_raw(RawWaker::new(core::ptr::null(), &DROP_PANICS))
        });
        let mut cx = Context::from_waker(&bad);
        assert!(poll(&mut h, &mut key, &mut yielded, &mut cx).is_pending());
        assert_eq!(h.s.count(), 1, "registered");
        // The item arrives and the task polls before any wake consumed its registration.
        h.item = Some(Box::new(7));
        let before = waker_panics();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            poll(&mut h, &mut key, &mut yielded, &mut cx)
        }));
        match r {
            Ok(core::task::Poll::Ready(Ok(v))) => assert_eq!(*v, 7),
            Ok(other) => panic!("expected the item, got {other:?}"),
            Err(_) => panic!("the waker's panic came out of the poll and took the item"),
        }
        assert!(waker_panics() > before, "the panic is counted");
        assert_eq!((h.s.count(), key), (0, None), "withdrawn");
    }

    /// A refresh that replaces a registered waker and then finds the operation ready lets
    /// go of two wakers at once: each drop is contained on its own, so two panicking
    /// drops do not abort the process (the second would panic during the first's
    /// unwinding).
    #[test]
    fn two_panicking_waker_drops_in_one_call_are_contained_apart() {
        use std::task::{RawWaker, RawWakerVTable};
        // Two vtables, so the wakers do not `will_wake` each other.
        static A: RawWakerVTable = RawWakerVTable::new(
            |p| RawWaker::new(p, &A),
            |_| {},
            |_| {},
            |_| panic!("waker panics in drop"),
        );
        static B: RawWakerVTable = RawWakerVTable::new(
            |p| RawWaker::new(p, &B),
            |_| {},
            |_| {},
            |_| panic!("waker panics in drop"),
        );
        register();
        let s = Sleepers::new();
        // SAFETY: the vtables never dereference the data pointer; the originals are never
        // dropped (their drop panics), only the clones the sleepers keep.
        let (a, b) = unsafe {
            (
                core::mem::ManuallyDrop::new(Waker::from_raw(RawWaker::new(core::ptr::null(), &A))),
                core::mem::ManuallyDrop::new(Waker::from_raw(RawWaker::new(core::ptr::null(), &B))),
            )
        };
        let mut key = None;
        assert!(!s.register_waker(&mut key, &a, || false));
        let before = waker_panics();
        assert!(
            s.register_waker(&mut key, &b, || true),
            "ready at the re-check"
        );
        assert!(
            waker_panics() - before >= 2,
            "both drops ran and were contained"
        );
        assert_eq!((s.count(), key), (0, None));
    }

    /// A waker this crate lets go of is dropped with no lock held, so a waker whose drop
    /// touches the same ring (here: takes its sleepers' mutex) runs: a refresh that finds
    /// the operation ready drops both the replaced waker and the refreshed one.
    #[test]
    fn wakers_are_dropped_with_no_lock_held() {
        use std::sync::atomic::AtomicBool;
        register();
        struct Probe {
            s: Arc<Sleepers>,
            lock_was_free: Arc<AtomicBool>,
        }
        impl Wake for Probe {
            fn wake(self: Arc<Self>) {}
        }
        impl Drop for Probe {
            fn drop(&mut self) {
                let free = self.s.lock.try_lock().is_ok();
                self.lock_was_free.store(free, Ordering::SeqCst);
            }
        }
        let s = Arc::new(Sleepers::new());
        let free_a = Arc::new(AtomicBool::new(false));
        let a = Waker::from(Arc::new(Probe {
            s: s.clone(),
            lock_was_free: free_a.clone(),
        }));
        let (_c, b) = {
            let c = Arc::new(Count(AtomicUsize::new(0)));
            (c.clone(), Waker::from(c))
        };
        let mut key = None;
        assert!(!s.register_waker(&mut key, &a, || false));
        // The last handle on `a`'s probe is now the registration's clone.
        drop(a);
        assert!(
            s.register_waker(&mut key, &b, || true),
            "ready at the re-check"
        );
        assert!(free_a.load(Ordering::SeqCst), "dropped with the mutex held");
        assert_eq!((s.count(), key), (0, None));
    }
}
