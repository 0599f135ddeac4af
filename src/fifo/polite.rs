//! Polite polling: when a ring's consumer, finding its cached view of the producer's index
//! used up, should wait a moment before reading the producer's index line again.
//!
//! A consumer that trails a streaming producer closely finds one or two new items at each
//! read of the producer's index, and each of those reads moves the index line (written by
//! every push) away from the producer, whose next publication then waits for it to come
//! back. Waiting [`PAUSES`] spin-loop hints before the read lets the producer publish a
//! line's worth of items or more in the meantime, so one transfer of the index line moves
//! many items instead of one.
//!
//! The wait is only worth it while the consumer really trails a producer on another core,
//! and it costs latency when the next item would have come during it. So [`Polite`] waits
//! only after `hold` reads in a row each found new items (a consumer that waits for single
//! items one at a time, as in a ping-pong, finds nothing between two items and never
//! waits), keeps waiting while each wait pays off, and doubles `hold` (up to
//! [`MAX_HOLD`]) each time a wait did not pay off: a producer on the same thread, or one
//! that is slower than the consumer, makes the waits rarer and rarer (one in 4097 reads at
//! most once the hold is at its maximum).
//!
//! A wait pays off when its read finds at least [`PAYOFF`] new items **and** at least twice
//! what the last read without a wait found (counting only reads made with nothing left in
//! the cached view, like the waiting read itself). A read cannot tell the items the wait
//! brought from those that were there before it, so the second condition is what tells a
//! wait that let a producer on another core publish more (a trailing consumer finds one or
//! two items per read, then a line or more after a wait) from one that only waited for a
//! producer on the consumer's own thread, which pushes the same batch before each drain
//! whether or not the consumer waits.
//!
//! Known gap: a same-thread producer whose batches vary in size (alternating 8 and 16, say)
//! still makes some waits look paid off (a 16 after an 8), so such a consumer keeps
//! pausing now and then for nothing. Comparing with the largest read since the previous
//! wait instead of the last one closes that gap, but was measured to stop the waits of a
//! consumer that trails a producer on another core (its reads vary too, and single items
//! slowed down): a consumer fed from its own thread in varying batches should turn polite
//! polling off.
//!
//! Everything here is the consumer's own state: no shared write, no atomic, nothing a
//! model checker needs to see. The wait itself is compiled out under loom and Miri,
//! where it would only slow the models down.

/// Spin-loop hints in one polite wait (its length in time varies by CPU:
/// `docs/performance-notes.md` in the repository, section 12).
#[cfg_attr(any(loom, miri), allow(dead_code))]
pub(crate) const PAUSES: u32 = 16;

/// New items a polite wait must bring, at least, to count as paid off: one 64-byte line of
/// 8-byte items (and twice what the last read without a wait found, see the module docs).
pub(crate) const PAYOFF: usize = 8;

/// Reads in a row that found new items before the first wait.
pub(crate) const MIN_HOLD: u16 = 2;

/// The largest `hold`: after waits that never pay off, at most one read in this many waits.
pub(crate) const MAX_HOLD: u16 = 4096;

/// Bytes of items a read must ask for to wait politely under
/// [`PolitePolling::LargeReads`]: 4 lines of 64 bytes. A read that asks for
/// less moves a line or two per transfer of the index line anyway, and a wait then costs
/// more than the transfer it saves.
pub(crate) const LARGE_READ_BYTES: usize = 256;

/// Which reads of a [`spsc`](super::spsc) consumer may wait politely before reading the
/// producer's index again (see "Polite polling" in the [`spsc`](super::spsc) module docs).
///
/// ```
/// use flowline::fifo::spsc::{self, PolitePolling};
/// let (_tx, mut rx) = spsc::channel::<u64>(64).unwrap();
/// assert_eq!(rx.polite(), PolitePolling::Off); // the default
/// rx.set_polite(PolitePolling::LargeReads);
/// assert_eq!(rx.polite(), PolitePolling::LargeReads);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PolitePolling {
    /// No read waits: every call that finds its cached view used up reads the producer's
    /// index at once. The default.
    #[default]
    Off,
    /// Reads that ask for at least 256 bytes of items (32 `u64`s, 4 packets of 64 bytes;
    /// one item if it is that large) may wait; single pops and small bursts of small items
    /// never do.
    LargeReads,
    /// Every read may wait, single pops included.
    On,
}

impl PolitePolling {
    /// The fewest items a read must ask for to wait, for items of `item_bytes` bytes.
    pub(crate) const fn min_want(self, item_bytes: usize) -> usize {
        match self {
            PolitePolling::Off => usize::MAX,
            PolitePolling::On => 1,
            PolitePolling::LargeReads => {
                if item_bytes == 0 {
                    // Zero-sized items move no lines at all: never wait.
                    usize::MAX
                } else {
                    LARGE_READ_BYTES.div_ceil(item_bytes)
                }
            }
        }
    }
}

/// `hold` of a consumer that never waits ([`PolitePolling::Off`]).
const OFF: u16 = u16::MAX;

/// One consumer's polite-polling state (see the [module docs](self)).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Polite {
    /// Reads in a row (up to `hold`) that found new items.
    streak: u16,
    /// Reads in a row with new items needed before a read waits first; [`OFF`]: never.
    hold: u16,
    /// New items the last read without a wait, made with nothing left in the cached view,
    /// found (saturated at `u16::MAX`).
    last: u16,
    /// Waits so far (unit tests of the rings check how often they wait).
    #[cfg(test)]
    pub(crate) waits: usize,
}

impl Polite {
    /// The state of a consumer that has just turned polite polling on.
    pub(crate) const fn new() -> Self {
        Polite {
            streak: 0,
            hold: MIN_HOLD,
            last: 0,
            #[cfg(test)]
            waits: 0,
        }
    }

    /// Turns waiting on or off (off: every read of the index is immediate).
    pub(crate) fn set_enabled(&mut self, on: bool) {
        #[cfg(test)]
        let waits = self.waits;
        *self = Polite::new();
        #[cfg(test)]
        {
            self.waits = waits;
        }
        if !on {
            self.hold = OFF;
        }
    }

    #[cfg(test)]
    pub(crate) fn enabled(&self) -> bool {
        self.hold != OFF
    }

    /// Whether the next read of the producer's index, by a consumer with nothing left in
    /// its cached view, should wait first.
    #[inline(always)]
    pub(crate) fn should_wait(&self) -> bool {
        self.streak >= self.hold
    }

    /// Records what a read of the producer's index found: `gain` new items, after a wait
    /// (`waited`) or not, and whether it was made with nothing left in the cached view
    /// (`empty`: always so after a wait; a read that tops up a partly used view is not
    /// compared with waiting reads). Only reads that may wait are recorded: the consumer
    /// sends reads too small to wait straight to the index.
    #[inline(always)]
    pub(crate) fn observe(&mut self, gain: usize, waited: bool, empty: bool) {
        #[cfg(test)]
        {
            self.waits += usize::from(waited);
        }
        if waited {
            if gain >= PAYOFF.max(usize::from(self.last).saturating_mul(2)) {
                self.hold = MIN_HOLD;
            } else {
                self.hold = self.hold.saturating_mul(2).min(MAX_HOLD);
                self.streak = 0;
                return;
            }
        } else if empty {
            self.last = u16::try_from(gain).unwrap_or(u16::MAX);
        }
        if gain == 0 {
            self.streak = 0;
        } else if self.streak < self.hold.min(MAX_HOLD) {
            self.streak += 1;
        }
    }
}

/// The polite wait: [`PAUSES`] spin-loop hints (none under loom or Miri).
///
/// Inlined on purpose: an out-of-line call inside a consumer's loop is a call that may
/// unwind, and the unwinding path drops the consumer by address, so the compiler then keeps
/// the consumer's fields in memory (a store of its index and reloads of its fields on every
/// pop) instead of registers. See `sync::HandleArc` for the measured cost.
#[inline(always)]
pub(crate) fn wait() {
    #[cfg(not(any(loom, miri)))]
    for _ in 0..PAUSES {
        core::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests;
