//! The reorder window of an ordered distributor: a ring of slots indexed by sequence
//! number, filled in any order and released from its head in sequence order (the scheme of
//! DPDK's `rte_reorder` library: a sequence-indexed ring whose head moves past slots that
//! are filled or given up).
//!
//! Every packet an ordered distributor accepts is stamped with the next sequence number,
//! and only while the window has room: at most `window` sequence numbers are between the
//! oldest not released and the next to stamp, so the window never overflows and a full
//! one stops admission (backpressure) instead of dropping anything. A packet handed back
//! fills its slot; a dropped, rescheduled or lost packet gives its slot up (a skip). The
//! head releases every filled slot it reaches and steps over skipped ones.
//!
//! The common case does not touch the slots: a burst handed back whose sequence numbers
//! run on from the head (one worker, or the worker holding the oldest packets) is released
//! where it lies, and the head moves past it.

use super::ConfigError;
use crate::fifo::CapacityError;

/// The most packets an ordered distributor's reorder window spans.
///
/// ```
/// assert_eq!(flowline::distributor::MAX_WINDOW, 1 << 22);
/// ```
pub const MAX_WINDOW: usize = 1 << 22;

/// A sequence number's slot.
enum Slot<T> {
    /// Not handed back yet (or released).
    Empty,
    /// Handed back, waiting for an older one.
    Ready(T),
    /// Given up (dropped, rescheduled, lost): the head steps over it.
    Skipped,
}

/// The window (see the module docs).
pub(super) struct Reorder<T> {
    slots: Box<[Slot<T>]>,
    /// `slots.len() - 1` (a power of two less one).
    mask: u64,
    /// Sequence numbers the window spans (what the caller asked for).
    cap: u64,
    /// The oldest sequence number not released.
    head: u64,
    /// The next sequence number to stamp.
    next: u64,
    /// Slots at or past `head` that are `Ready` or `Skipped`.
    parked: u64,
    /// Of those, the `Ready` ones.
    ready: u64,
    /// The lane from which the distributor's next scan for a run of packets starts (ties
    /// between equally loaded lanes go round).
    pub(super) turn: usize,
}

impl<T> Reorder<T> {
    /// A window spanning `window` sequence numbers (1 to [`MAX_WINDOW`]).
    pub(super) fn new(window: usize) -> Result<Self, ConfigError> {
        if window == 0 || window > MAX_WINDOW {
            return Err(ConfigError::BadWindow(window));
        }
        let n = window.next_power_of_two();
        let mut slots = Vec::new();
        slots.try_reserve_exact(n).map_err(|_| {
            ConfigError::AllocFailed(CapacityError::AllocFailed {
                slots: n,
                bytes: n.saturating_mul(core::mem::size_of::<Slot<T>>()),
            })
        })?;
        slots.resize_with(n, || Slot::Empty);
        Ok(Reorder {
            slots: slots.into_boxed_slice(),
            mask: n as u64 - 1,
            cap: window as u64,
            head: 0,
            next: 0,
            parked: 0,
            ready: 0,
            turn: 0,
        })
    }

    /// Sequence numbers that can still be stamped now.
    #[inline(always)]
    pub(super) fn room(&self) -> u64 {
        self.cap - (self.next - self.head)
    }

    /// Stamps the next sequence number (the caller checked [`room`](Self::room)).
    #[inline(always)]
    pub(super) fn stamp(&mut self) -> u64 {
        debug_assert!(self.room() > 0, "stamped past the window");
        let s = self.next;
        self.next = s + 1;
        s
    }

    /// The oldest sequence number not released.
    #[inline(always)]
    pub(super) fn oldest(&self) -> u64 {
        self.head
    }

    /// Starts an empty window's numbering at `seq`, as if `seq` packets had passed (a test
    /// hook: sequence numbers near a wrap of a stamp's bits).
    #[cfg(feature = "__test_hooks")]
    pub(super) fn start_at(&mut self, seq: u64) {
        assert!(
            self.head == self.next && self.parked == 0,
            "the window is not empty"
        );
        self.head = seq;
        self.next = seq;
    }

    /// Packets handed back and held for an older one.
    pub(super) fn waiting(&self) -> u64 {
        self.ready
    }

    /// The window's size.
    pub(super) fn window(&self) -> u64 {
        self.cap
    }

    /// Takes the packets `out[start..]`, handed back with sequence numbers `seq(0)`,
    /// `seq(1)`, ...: a run that starts at the head stays where it is (released); any
    /// other burst moves into its slots. Then releases what the head reaches onto `out`.
    #[inline]
    pub(super) fn take_burst(
        &mut self,
        out: &mut Vec<T>,
        start: usize,
        seq: impl Fn(usize) -> u64,
    ) {
        let n = out.len() - start;
        let head = self.head;
        if (0..n).all(|k| seq(k) == head + k as u64) {
            self.head = head + n as u64;
            if self.parked > 0 {
                self.release(out);
            }
            return;
        }
        self.park_burst(out, start, seq);
    }

    /// [`take_burst`](Self::take_burst) of a burst that does not run on from the head.
    #[cold]
    #[inline(never)]
    fn park_burst(&mut self, out: &mut Vec<T>, start: usize, seq: impl Fn(usize) -> u64) {
        // Moves only: no user code runs while the burst is half parked.
        for (k, p) in out.drain(start..).enumerate() {
            let i = self.slot_of(seq(k));
            self.slots[i] = Slot::Ready(p);
            self.parked += 1;
            self.ready += 1;
        }
        self.release(out);
    }

    /// The `n` packets from the head on were taken out whole by the caller, in order;
    /// releases what the head then reaches onto `out`.
    #[inline]
    pub(super) fn advance(&mut self, n: u64, out: &mut Vec<T>) {
        debug_assert!(n <= self.next - self.head);
        self.head += n;
        if self.parked > 0 {
            self.release(out);
        }
    }

    /// One packet handed back with sequence number `seq`; releases what the head reaches.
    #[inline]
    pub(super) fn put(&mut self, seq: u64, pkt: T, out: &mut Vec<T>) {
        if seq == self.head {
            out.push(pkt);
            self.head += 1;
        } else {
            let i = self.slot_of(seq);
            self.slots[i] = Slot::Ready(pkt);
            self.parked += 1;
            self.ready += 1;
        }
        if self.parked > 0 {
            self.release(out);
        }
    }

    /// Sequence number `seq` is given up (its packet was dropped, rescheduled, lost or
    /// given back to the caller); releases what the head reaches.
    pub(super) fn skip(&mut self, seq: u64, out: &mut Vec<T>) {
        if seq == self.head {
            self.head += 1;
        } else {
            let i = self.slot_of(seq);
            self.slots[i] = Slot::Skipped;
            self.parked += 1;
        }
        self.release(out);
    }

    /// The slot of `seq`, which must be in the window, past the head, and empty: a hand-back
    /// the window cannot take is a bug in the distributor's bookkeeping, not a user's.
    fn slot_of(&self, seq: u64) -> usize {
        assert!(
            seq >= self.head && seq < self.next,
            "distributor: sequence {seq} handed back outside the reorder window [{}, {})",
            self.head,
            self.next
        );
        let i = (seq & self.mask) as usize;
        assert!(
            matches!(self.slots[i], Slot::Empty),
            "distributor: sequence {seq} handed back twice"
        );
        i
    }

    /// Moves the head past every filled or skipped slot it reaches, releasing the packets
    /// onto `out` in sequence order.
    fn release(&mut self, out: &mut Vec<T>) {
        while self.parked > 0 {
            let i = (self.head & self.mask) as usize;
            match core::mem::replace(&mut self.slots[i], Slot::Empty) {
                Slot::Empty => break,
                Slot::Ready(p) => {
                    self.ready -= 1;
                    out.push(p);
                }
                Slot::Skipped => {}
            }
            self.parked -= 1;
            self.head += 1;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{ConfigError, Reorder, MAX_WINDOW};

    /// A run taken out whole from the head moves it past the run and releases what was
    /// parked behind; nothing when nothing was.
    #[test]
    fn advance_past_a_run_releases_what_waits_behind_it() {
        let mut w = Reorder::new(8).unwrap();
        for _ in 0..5 {
            w.stamp();
        }
        let mut out = Vec::new();
        w.put(3, 30, &mut out);
        w.skip(4, &mut out);
        assert!(out.is_empty());
        w.advance(3, &mut out);
        assert_eq!(out, [30]);
        assert_eq!((w.oldest(), w.waiting(), w.room()), (5, 0, 8));
        w.stamp();
        w.advance(1, &mut out);
        assert_eq!((out.len(), w.oldest()), (1, 6));
    }

    #[test]
    fn releases_in_sequence_order_whatever_the_hand_back_order() {
        let mut w = Reorder::new(8).unwrap();
        let seqs: Vec<u64> = (0..8).map(|_| w.stamp()).collect();
        assert_eq!(seqs, (0..8).collect::<Vec<_>>());
        assert_eq!(w.room(), 0);
        let mut out = Vec::new();
        w.put(3, 30, &mut out);
        w.skip(1, &mut out);
        out.push(20);
        out.push(40);
        // Sequences 2 and 4 as one burst: not from the head, so parked.
        w.take_burst(&mut out, 0, |k| [2, 4][k]);
        assert!(out.is_empty());
        assert_eq!(w.waiting(), 3);
        w.put(0, 0, &mut out);
        assert_eq!(out, [0, 20, 30, 40]);
        assert_eq!((w.waiting(), w.room()), (0, 5));
        // A run from the head stays where it lies.
        out.clear();
        out.push(50);
        w.take_burst(&mut out, 0, |k| 5 + k as u64);
        assert_eq!(out, [50]);
        // Sequence 6 is still out; 7 is given up and waits for it.
        w.skip(7, &mut out);
        assert_eq!((w.waiting(), w.room()), (0, 6));
        w.put(6, 70, &mut out);
        assert_eq!(out, [50, 70]);
        assert_eq!(w.room(), 8);
        assert_eq!(w.stamp(), 8);
    }

    #[test]
    #[should_panic(expected = "handed back twice")]
    fn a_sequence_handed_back_twice_is_caught() {
        let mut w = Reorder::new(4).unwrap();
        for _ in 0..3 {
            w.stamp();
        }
        let mut out = Vec::new();
        w.put(2, 2u64, &mut out);
        w.skip(2, &mut out);
    }

    #[test]
    #[should_panic(expected = "outside the reorder window")]
    fn a_sequence_never_stamped_is_caught() {
        let mut w = Reorder::new(4).unwrap();
        w.stamp();
        w.put(1, 1u64, &mut Vec::new());
    }

    #[test]
    #[should_panic(expected = "outside the reorder window")]
    fn a_sequence_already_released_is_caught() {
        let mut w = Reorder::new(4).unwrap();
        w.stamp();
        w.stamp();
        let mut out = Vec::new();
        w.put(0, 0u64, &mut out);
        w.skip(0, &mut out);
    }

    #[test]
    fn bad_windows_are_refused() {
        assert_eq!(Reorder::<u8>::new(0).err(), Some(ConfigError::BadWindow(0)));
        let too_big = MAX_WINDOW + 1;
        assert_eq!(
            Reorder::<u8>::new(too_big).err(),
            Some(ConfigError::BadWindow(too_big))
        );
        assert_eq!(Reorder::<u8>::new(3).unwrap().room(), 3);
    }
}
