//! The meter's clock: the TSC on x86_64 (a few cycles to read, calibrated once against
//! `Instant`), `Instant` elsewhere, and the arithmetic that turns tick pairs into spans.

use super::*;

/// `later - earlier` in ticks, 0 if the clock went backwards (two cores' TSCs need not
/// agree exactly, and a thread may move between them mid-measurement).
#[inline(always)]
pub(super) fn since(earlier: u64, later: u64) -> u64 {
    let d = later.wrapping_sub(earlier);
    if (d as i64) < 0 {
        0
    } else {
        d
    }
}

/// Timestamps in ticks: the TSC on x86_64 (not under Miri), else ns since a process epoch.
#[inline(always)]
pub(super) fn ticks() -> u64 {
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
pub(super) fn ns_per_tick() -> f64 {
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
