//! The heavy half of the asymmetric barrier pair: Linux `membarrier` (registered once per
//! process, as in the Linux kernel's and liburcu's use of it), the fallback to symmetric
//! fences where it is missing or opted out, and the switch that turns sleeping off for
//! good when a barrier fails after registration.

use super::*;

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
/// process's other threads once (see the [module docs](super)). `false` where the call is
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
#[must_use]
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
pub(super) fn heavy_barrier() -> bool {
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
#[cfg(feature = "__test_hooks")]
pub fn simulate_barrier_failure() -> bool {
    FAIL_BARRIER.store(true, Ordering::Relaxed);
    sleeping_disabled()
}

/// **Testing only:** whether a failed heavy barrier has disabled sleeping for the process
/// (see [`simulate_barrier_failure`]). Hidden from the docs and outside any semver promise.
#[doc(hidden)]
#[cfg(feature = "__test_hooks")]
pub fn sleeping_disabled() -> bool {
    // Relaxed: a diagnostic read.
    NO_SLEEP.load(Ordering::Relaxed)
}

/// Whether sleeping is still possible (see [`NO_SLEEP`]).
#[inline]
pub(super) fn can_sleep() -> bool {
    // Relaxed: a stale `true` only leads to one more attempt, which fails the same way.
    !NO_SLEEP.load(Ordering::Relaxed)
}
