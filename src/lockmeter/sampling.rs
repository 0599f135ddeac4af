//! Which holds are timed: one acquisition in `one_in` on average, drawn per thread by a
//! budget that counts down and refills at random (xorshift), so the common path is one
//! subtraction and a sign test; and the stamp that carries a timed hold from acquisition
//! to release.

use super::*;

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
pub(super) struct Sampling {
    one_in: u32,
    /// Units spent per acquisition: `2^32 / one_in`.
    step: u64,
}

/// This thread's sampling budget, and the xorshift state that draws the refills.
pub(super) struct Sampler {
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
    pub(super) fn one_in(one_in: u32) -> Sampling {
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
    pub(super) fn draw(self) -> bool {
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
pub(super) struct Stamp {
    who: Who,
    /// Ticks when the lock was taken (0 if the hold is not timed).
    acquired: u64,
    /// Ticks waited (0: did not wait).
    waited: u64,
    /// [`TIMED_HOLD`] and [`WAITED`] bits (a word, not two `bool`s: see [`Who`]).
    flags: usize,
}

/// [`Stamp::flags`]: the hold is timed.
pub(super) const TIMED_HOLD: usize = 1;
/// [`Stamp::flags`]: the acquisition waited.
pub(super) const WAITED: usize = 2;

impl Stamp {
    /// An acquisition that did not wait, its hold timed or not as `sampling` draws (the
    /// clock is read only if it is).
    #[inline(always)]
    pub(super) fn uncontended(
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
    pub(super) fn timed(&self) -> bool {
        self.flags & TIMED_HOLD != 0
    }

    #[inline(always)]
    pub(super) fn contended(&self) -> bool {
        self.flags & WAITED != 0
    }

    /// Records the acquisition and, if timed, its hold (which ended at `end`) at its site.
    #[inline(always)]
    pub(super) fn finish(&self, end: u64) {
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
pub(super) fn acquire_contended<G>(
    who: Who,
    sampling: Sampling,
    take: impl FnOnce() -> G,
) -> (G, Stamp) {
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
pub(super) fn reject(name: Option<&'static str>, caller: &'static Location<'static>) {
    let mut d = [0u64; FIELDS];
    d[REJECTED] = 1;
    record(Who::of(name, caller), d, None);
}
