//! Hand-backs in any order: the [`Ticket`] that names a received packet's place in its
//! worker's stream, and the worker's calls that hand a packet back by it. The worker keeps
//! the oldest position it holds and a bitmap of the credit window for positions handed
//! back past it (the same scheme as the distributor's lane), so the in-order calls stay a
//! counter increment. Processed packets handed back past an older one wait on the worker
//! ([`Staging`](super::Staging), whose documentation states when they are published).

use crate::distributor::protocol::{bit_of, Ret};

use super::stats::{DROPPED, RESCHEDULED, RETURNED};
use super::{NotHeld, Worker};

/// A received packet's place in its worker's stream: what [`Worker::done_at`],
/// [`Worker::drop_at`] and [`Worker::reschedule_at`] name a packet by, so that a worker can
/// hand back packets of different flows in any order. The packets a receive appends have
/// consecutive tickets from [`Worker::next_ticket`] taken before it.
///
/// ```
/// use flowline::distributor::{self, Config};
/// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
/// d.distribute(&mut vec![1, 2]).unwrap();
/// let first = ws[0].next_ticket();
/// let mut b = Vec::new();
/// ws[0].recv_burst(&mut b, 8).unwrap(); // b[k] has ticket first.nth(k)
/// assert_eq!(ws[0].next_ticket(), first.nth(2));
/// assert_eq!(first.nth(2).back(1), first.nth(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(u64);

impl Ticket {
    /// The ticket `k` packets after this one.
    #[must_use]
    pub fn nth(self, k: usize) -> Ticket {
        Ticket(self.0.wrapping_add(k as u64))
    }

    /// The ticket `k` packets before this one.
    #[must_use]
    pub fn back(self, k: usize) -> Ticket {
        Ticket(self.0.wrapping_sub(k as u64))
    }
}

impl<T> Worker<T> {
    /// The ticket the next packet this worker receives will have; the packets one receive
    /// appends have consecutive tickets from it (see [`Ticket`]).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (_d, ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let t = ws[0].next_ticket();
    /// assert_eq!(t.nth(1).back(1), t);
    /// ```
    #[must_use]
    pub fn next_ticket(&self) -> Ticket {
        Ticket(self.recvd)
    }

    /// Hands back the processed packet of ticket `t`, which need not be the oldest held:
    /// packets of different flows may come back in any order. Within one flow they must
    /// still come back in the order received: the distributor checks the order it reads,
    /// as for [`done`](Self::done) (a packet that waits until the older ones are back, as
    /// below, reaches it in order).
    ///
    /// The oldest packet held goes back as `done` sends it. A later one waits on the
    /// worker, in a slot of its credit window, and is published by the first of:
    /// - every older packet handed back: it then follows them on the ring of processed
    ///   packets as an in-order hand-back, so a burst handed back in any order costs the
    ///   distributor what an in-order burst costs;
    /// - this worker's next receive (any of the `recv_burst` calls),
    ///   [`publish_handed_back`](Self::publish_handed_back), [`drop_at`](Self::drop_at),
    ///   [`reschedule_at`](Self::reschedule_at), [`leave`](Self::leave) or drop: it then
    ///   goes on the control ring with its position, in the order of the hand-backs.
    ///
    /// So a worker that hands packets back by ticket and then blocks elsewhere, still
    /// holding an older one, calls `publish_handed_back` first. The distributor counts a
    /// worker's credit from the oldest packet it holds: packets handed back past it free no
    /// credit until it is back, published or not.
    ///
    /// # Errors
    ///
    /// [`NotHeld`] (with the packet) if this worker does not hold the packet of ticket
    /// `t` (never received, or handed back already).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// // Two flows, 1 and 2, on one worker.
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![1, 2]).unwrap();
    /// let first = w.next_ticket();
    /// let mut b = Vec::new();
    /// w.recv_burst(&mut b, 8).unwrap();
    /// w.done_at(first.nth(1), b.pop().unwrap()).unwrap(); // flow 2 first
    /// let mut out = Vec::new();
    /// d.collect(&mut out);
    /// assert!(out.is_empty()); // it waits for packet 1, still held
    /// w.done_at(first, b.pop().unwrap()).unwrap();
    /// assert!(w.done_at(first, 1).is_err()); // handed back already
    /// d.collect(&mut out);
    /// assert_eq!(out, [1, 2]);
    /// ```
    pub fn done_at(&mut self, t: Ticket, pkt: T) -> Result<(), NotHeld<T>> {
        match self.claim(t) {
            Claim::NotHeld => Err(NotHeld(pkt)),
            Claim::Oldest => self.done(pkt),
            Claim::Later(pos) => {
                // Counted where it is published (`take_oldest_slow`, `publish_staged`).
                self.mark_later(pos);
                if let Err(pkt) = self.staged.put(pos, pkt) {
                    // No room to stage it (the slots could not be allocated): it goes now,
                    // on the control ring, as `publish_staged` sends it.
                    self.post_done_quietly(pos, pkt);
                    self.ends().wake.notify();
                }
                Ok(())
            }
        }
    }

    /// [`drop_packet`](Self::drop_packet) for the packet of ticket `t`, in any order across
    /// flows (see [`done_at`](Self::done_at)).
    ///
    /// # Errors
    ///
    /// [`NotHeld`] (with the packet) if this worker does not hold the packet of ticket `t`.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// d.distribute(&mut vec![1, 2]).unwrap();
    /// let first = ws[0].next_ticket();
    /// let mut b = Vec::new();
    /// ws[0].recv_burst(&mut b, 8).unwrap();
    /// ws[0].drop_at(first.nth(1), b.pop().unwrap()).unwrap();
    /// ws[0].done(b.pop().unwrap()).unwrap();
    /// let mut out = Vec::new();
    /// d.collect(&mut out);
    /// assert_eq!((out, d.stats().snapshot().get("dropped")), (vec![1], Some(1)));
    /// ```
    pub fn drop_at(&mut self, t: Ticket, pkt: T) -> Result<(), NotHeld<T>> {
        let claim = self.claim(t);
        if !matches!(claim, Claim::NotHeld) {
            // The hand-backs before it go first, in their order.
            self.publish_staged(false);
        }
        match claim {
            Claim::NotHeld => Err(NotHeld(pkt)),
            Claim::Oldest => self.drop_packet(pkt),
            Claim::Later(pos) => {
                // Counted before it is published, as in `drop_packet`.
                self.ends().stats.add(DROPPED, 1);
                self.post(Ret::Dropped {
                    at: self.handed,
                    pos,
                });
                self.took_later(pos);
                // User code last, as in `drop_packet`.
                drop(pkt);
                Ok(())
            }
        }
    }

    /// [`reschedule`](Self::reschedule) for the packet of ticket `t`, in any order across
    /// flows (see [`done_at`](Self::done_at)): the packet is routed again as the next
    /// packet of its new tag's flow.
    ///
    /// # Errors
    ///
    /// [`NotHeld`] (with the packet) if this worker does not hold the packet of ticket `t`.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &(u64, u64)| p.0).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![(1, 10), (2, 20)]).unwrap();
    /// let first = w.next_ticket();
    /// let mut b = Vec::new();
    /// w.recv_burst(&mut b, 8).unwrap();
    /// // Re-tag the second packet while the first is still held.
    /// w.reschedule_at(first.nth(1), (3, 20)).unwrap();
    /// w.done(b.remove(0)).unwrap();
    /// d.distribute(&mut Vec::new()).unwrap();
    /// w.recv_burst(&mut b, 8).unwrap();
    /// assert_eq!(b, [(2, 20), (3, 20)]);
    /// ```
    pub fn reschedule_at(&mut self, t: Ticket, pkt: T) -> Result<(), NotHeld<T>> {
        let claim = self.claim(t);
        if !matches!(claim, Claim::NotHeld) {
            // The hand-backs before it go first, in their order.
            self.publish_staged(false);
        }
        match claim {
            Claim::NotHeld => Err(NotHeld(pkt)),
            Claim::Oldest => self.reschedule(pkt),
            Claim::Later(pos) => {
                // Counted before it is published, as in `reschedule`.
                self.ends().stats.add(RESCHEDULED, 1);
                self.post(Ret::Resched {
                    at: self.handed,
                    pos,
                    pkt,
                });
                self.took_later(pos);
                Ok(())
            }
        }
    }

    /// [`forward`](Worker::forward) of the packet of ticket `t`, in any order (the same
    /// hand-back as [`done_at`](Worker::done_at)): at an atomic stage, not ahead of an
    /// older packet of its own flow (the distributor panics for a worker that does: the
    /// flow's order at the next stage would break).
    ///
    /// # Errors
    ///
    /// [`NotHeld`] (with the packet) if this worker does not hold the packet of ticket `t`.
    ///
    /// ```
    /// use flowline::distributor::{self, Config, StageType};
    /// let (mut d, mut ws) = distributor::new_pipeline(
    ///     Config::default().workers(1).credit(8),
    ///     &[StageType::Atomic, StageType::Parallel],
    ///     |p: &(usize, u64)| *p, // (stage, flow)
    /// ).unwrap();
    /// d.distribute(&mut vec![(0, 1), (0, 2)]).unwrap();
    /// let first = ws[0].next_ticket();
    /// let mut b = Vec::new();
    /// ws[0].recv_burst(&mut b, 8).unwrap();
    /// ws[0].forward_at(first.nth(1), (1, 2)).unwrap(); // flow 2 first
    /// ws[0].publish_handed_back(); // now, not when flow 1's packet is back
    /// ws[0].forward_at(first, (1, 1)).unwrap();
    /// d.distribute(&mut Vec::new()).unwrap();
    /// b.clear();
    /// ws[0].recv_burst(&mut b, 8).unwrap();
    /// assert_eq!(b, [(1, 2), (1, 1)]);
    /// ```
    pub fn forward_at(&mut self, t: Ticket, pkt: T) -> Result<(), NotHeld<T>> {
        self.done_at(t, pkt)
    }

    /// Which packet ticket `t` names: none held, the oldest held, or a later one.
    fn claim(&self, t: Ticket) -> Claim {
        let pos = t.0;
        if pos < self.low || pos >= self.recvd {
            return Claim::NotHeld;
        }
        if pos == self.low {
            return Claim::Oldest;
        }
        let bits = &self.ends_ref().handed_bits;
        let (word, bit) = bit_of(pos, bits.len());
        if bits[word] & bit != 0 {
            Claim::NotHeld
        } else {
            Claim::Later(pos)
        }
    }

    /// The packet at `pos` (above the oldest held) was published out of order: one more
    /// hand-back, one packet less held, its position marked.
    fn took_later(&mut self, pos: u64) {
        self.mark_later(pos);
        self.handed += 1;
    }

    /// The packet at `pos` (above the oldest held) is handed back: one packet less held,
    /// its position marked (the hand-back is counted where it is published).
    fn mark_later(&mut self, pos: u64) {
        let bits = &mut self.ends().handed_bits;
        let (word, bit) = bit_of(pos, bits.len());
        bits[word] |= bit;
        self.ooo += 1;
        self.held -= 1;
    }

    /// Publishes now the processed packets handed back by ticket that wait behind an older
    /// packet still held (see [`done_at`](Self::done_at)): each goes on the control ring
    /// with its position, in the order they were handed back. A receive does this first
    /// on its own; a worker that is about to block elsewhere while it holds an older
    /// packet calls it, so that those packets reach `collect` meanwhile.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let mut w = ws.pop().unwrap();
    /// d.distribute(&mut vec![1, 2]).unwrap();
    /// let first = w.next_ticket();
    /// let mut b = Vec::new();
    /// w.recv_burst(&mut b, 8).unwrap();
    /// w.done_at(first.nth(1), b.pop().unwrap()).unwrap(); // packet 1 is still held
    /// w.publish_handed_back();
    /// let mut out = Vec::new();
    /// d.collect(&mut out);
    /// assert_eq!(out, [2]);
    /// ```
    #[inline]
    pub fn publish_handed_back(&mut self) {
        if !self.staged.is_empty() {
            self.publish_staged(true);
        }
    }

    /// Publishes every staged hand-back on the control ring, with its position, in the
    /// order they were handed back; wakes a sleeping flush if `notify`.
    #[cold]
    #[inline(never)]
    pub(super) fn publish_staged(&mut self, notify: bool) {
        if self.staged.is_empty() {
            return;
        }
        // The order empties itself when the last staged packet is taken.
        let mut i = 0;
        while i < self.staged.order_len() {
            let pos = self.staged.order_at(i);
            i += 1;
            // Empty (or reused by a later position) for one that went in order since.
            if let Some(pkt) = self.staged.take(pos) {
                self.post_done_quietly(pos, pkt);
            }
        }
        if notify {
            self.ends().wake.notify();
        }
    }

    /// Publishes processed packet `pkt`, received at `pos`, on the control ring with its
    /// position (counted first, as in `done`), without waking a sleeping flush.
    fn post_done_quietly(&mut self, pos: u64, pkt: T) {
        self.ends().stats.add(RETURNED, 1);
        self.post_quietly(Ret::Done {
            at: self.handed,
            pos,
            pkt,
        });
        self.handed += 1;
    }

    /// [`done_burst`](Self::done_burst) while packets are staged: one in-order hand-back
    /// at a time, so that a staged packet that an earlier one uncovers follows it at once.
    #[cold]
    #[inline(never)]
    pub(super) fn done_each(&mut self, pkts: &mut Vec<T>) -> Result<(), NotHeld<()>> {
        let n = pkts.len().min(self.held);
        for pkt in pkts.drain(..n) {
            if self.done(pkt).is_err() {
                unreachable!("as many packets are held as are handed back here");
            }
        }
        if pkts.is_empty() {
            Ok(())
        } else {
            Err(NotHeld(()))
        }
    }

    /// `n` packets went back in order: each was the oldest held. Moves `low` past them
    /// (and past the positions handed back out of order that they uncover).
    #[inline(always)]
    pub(super) fn take_oldest(&mut self, n: usize) {
        if self.ooo == 0 {
            self.low += n as u64;
        } else {
            self.take_oldest_slow(n);
        }
    }

    /// The hand-back of the oldest packet, when nothing else is held and every later
    /// position is staged (none was published out of order): they all follow it, in
    /// position order, as one burst on the ring of processed packets; the bitmap then has
    /// no mark left.
    fn take_all_staged(&mut self) {
        let (from, to) = (self.low + 1, self.recvd);
        let k = (to - from) as usize;
        debug_assert_eq!(k, self.staged.len());
        // Counted before they are published, as in `done`.
        self.ends().stats.add(RETURNED, k as u64);
        let Some(ends) = self.ends.as_mut() else {
            unreachable!("a worker's ring ends are taken only by its Drop");
        };
        ends.handed_bits.fill(0);
        let staged = &mut self.staged;
        let mut run = (from..to).map(|pos| staged.take_known(pos));
        if ends.done.push_burst_iter(&mut run) != k {
            unreachable!("done ring sized to the worker's credit cannot be full");
        }
        self.ooo = 0;
        self.low = to;
        self.handed += k as u64;
        ends.wake.notify();
    }

    /// How many staged packets [`take_oldest_slow`](Self::take_oldest_slow)`(n)` is about
    /// to publish: all of them when no packet is held any more, else those it will walk
    /// past.
    fn uncovered(&self, n: usize) -> usize {
        if self.held == 0 {
            return self.staged.len();
        }
        let bits = &self.ends_ref().handed_bits;
        let (mut low, mut ooo, mut k) = (self.low, self.ooo, 0);
        for _ in 0..n {
            low += 1;
            while ooo > 0 {
                let (word, bit) = bit_of(low, bits.len());
                if bits[word] & bit == 0 {
                    break;
                }
                k += usize::from(self.staged.holds(low));
                ooo -= 1;
                low += 1;
            }
        }
        k
    }

    /// [`take_oldest`](Self::take_oldest) past positions handed back out of order: the
    /// staged packets that become the oldest go on the ring of processed packets, in
    /// order, as one burst right after the hand-back that uncovered them.
    #[cold]
    #[inline(never)]
    fn take_oldest_slow(&mut self, n: usize) {
        if n == 1 && self.held == 0 && self.ooo == self.staged.len() {
            // Every position past this one is staged: the whole rest goes.
            self.take_all_staged();
            return;
        }
        if !self.staged.is_empty() {
            // Counted before they are published, as in `done`.
            let k = self.uncovered(n);
            self.ends().stats.add(RETURNED, k as u64);
        }
        let Some(ends) = self.ends.as_mut() else {
            unreachable!("a worker's ring ends are taken only by its Drop");
        };
        let bits = &mut ends.handed_bits;
        let (low, ooo, staged) = (&mut self.low, &mut self.ooo, &mut self.staged);
        let mut published = 0;
        for _ in 0..n {
            *low += 1;
            // Past the positions handed back since, yielding those still staged.
            let mut uncovered = core::iter::from_fn(|| {
                while *ooo > 0 {
                    let pos = *low;
                    let (word, bit) = bit_of(pos, bits.len());
                    if bits[word] & bit == 0 {
                        return None;
                    }
                    bits[word] &= !bit;
                    *ooo -= 1;
                    *low += 1;
                    if let Some(pkt) = staged.take(pos) {
                        return Some(pkt);
                    }
                }
                None
            });
            published += ends.done.push_burst_iter(&mut uncovered);
            if uncovered.next().is_some() {
                unreachable!("done ring sized to the worker's credit cannot be full");
            }
        }
        if published > 0 {
            self.handed += published as u64;
            ends.wake.notify();
        }
    }
}

/// What a ticket names (see [`Worker::claim`]).
enum Claim {
    NotHeld,
    Oldest,
    Later(u64),
}
