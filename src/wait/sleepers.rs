//! The sleepers of one direction of a ring, and the publisher's check after each index
//! store: one load of a sleeper word and one branch while nobody sleeps (the
//! publisher's half of the asymmetric barrier pair), the wake of threads on a condvar and of
//! tasks by their wakers, and the containment of wakers that panic.

use super::*;

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
            // compiler fence would also make it reload them after every publication
            // (`docs/performance-notes.md`, section 12). The CPU's store-load order is the heavy
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
    pub(super) waiting: AtomicU32,
    pub(super) lock: Mutex<Wakers>,
    cv: Condvar,
}

/// A ring index and the sleepers that its stores wake: the sleepers on the next line of
/// the same padded unit. The publisher's check after its store addresses the sleeper word
/// from the index's own address (one line on), so no second pointer stays live in the
/// publisher's loop. The word sits on a line of its own because a load from the line just
/// stored waits for that line to come back from the reader that polls the index, once per
/// publication; the sleeper line is written only when a sleeper goes to sleep or wakes, so
/// it stays in both ends' caches (see `docs/performance-notes.md`, section 14).
/// Dereferences to the index.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct WakingIndex {
    index: AtomicUsize,
    sleepers: SleeperLine,
}

/// [`Sleepers`] starting a line of their own.
#[derive(Debug)]
#[repr(C, align(64))]
struct SleeperLine(Sleepers);

// The sleeper word is the first field of `Sleepers` (`repr(C)`), which starts the line
// after the index's (the 8-byte index, then the 64-byte-aligned sleepers): 64 bytes on,
// as the `asm!` load in `WakingIndex::notify` takes it.
#[cfg(all(
    target_arch = "x86_64",
    target_pointer_width = "64",
    not(loom),
    not(miri)
))]
const _: () = assert!(
    core::mem::size_of::<AtomicUsize>() == 8
        && core::mem::align_of::<SleeperLine>() == 64
        && core::mem::size_of::<WakingIndex>() <= 128
);

impl WakingIndex {
    /// An index at `value` with no sleepers (call [`register`] first, as for
    /// [`Sleepers::new`]).
    pub(crate) fn new(value: usize) -> Self {
        WakingIndex {
            index: AtomicUsize::new(value),
            sleepers: SleeperLine(Sleepers::new()),
        }
    }

    /// The sleepers that this index's publications wake.
    #[inline(always)]
    pub(crate) fn sleepers(&self) -> &Sleepers {
        &self.sleepers.0
    }

    /// The publisher's check right after it stored the index: [`Sleepers::notify`], with
    /// the word addressed from the index.
    #[inline(always)]
    pub(crate) fn notify(&self) {
        let w = load_after_publish!(
            "mov {w:e}, dword ptr [{p} + 64]",
            // The word is 64 bytes past the index (the assertion above).
            (self as *const Self).cast::<u8>(),
            self.sleepers.0.waiting
        );
        if w != 0 {
            self.sleepers.0.notify_cold(w);
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
pub(super) struct Wakers {
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
    #[cfg(any(test, feature = "__test_hooks"))]
    pub(crate) fn has_sleepers(&self) -> bool {
        // Relaxed: a diagnostic read.
        self.waiting.load(Ordering::Relaxed) & !PUBLISHERS_FENCE != 0
    }

    /// Sleepers and registered tasks (a snapshot, for tests).
    #[cfg(all(test, not(loom), feature = "async"))]
    pub(super) fn count(&self) -> u32 {
        self.waiting.load(Ordering::SeqCst) & !PUBLISHERS_FENCE
    }

    /// The publisher's check, right after it stored its index: wakes the sleepers, if any.
    /// One load and one test while nobody sleeps (and membarrier is in use).
    #[inline(always)]
    pub(crate) fn notify(&self) {
        let w = self.waiting_after_publish();
        if w != 0 {
            self.notify_cold(w);
        }
    }

    /// The rest of [`notify`](Self::notify) when the word was not 0: the full fence where
    /// the barriers are symmetric (the count loaded before it proves nothing), then the
    /// wake if anyone sleeps.
    #[cold]
    #[inline(never)]
    pub(super) fn notify_slow(&self, mut w: u32) {
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

    /// A waking index's sleeper word starts the line after the index's on 64-bit targets (where
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
            assert_eq!(word as usize - base as usize, 64);
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
