//! Reading one worker's hand-backs: the bursts of processed packets from its done ring and
//! the entries of its control ring, merged by their positions in the worker's hand-back
//! stream ([`protocol`](super::protocol)), with the lane's accounting, the order check and,
//! for an ordered distributor, the reorder window.

use std::collections::VecDeque;

use crate::counter::GroupHandle;

use super::lanes::{probe_offset, Lane, PROBE_STEP};
use super::protocol::Ret;
use super::reorder::Reorder;
use super::{DROPPED, LOST, NO_SEQ, RESCHEDULED};

/// The stream positions of the next `n` in-order hand-backs of `lane`: from `completed`
/// on, skipping the positions handed back out of order.
pub(super) fn unmarked_from<T>(lane: &Lane<T>, n: u64) -> Vec<u64> {
    let mut v = Vec::with_capacity(n as usize);
    let mut pos = lane.completed;
    while (v.len() as u64) < n {
        if !lane.marked(pos) {
            v.push(pos);
        }
        pos += 1;
    }
    v
}

/// What a read of worker `w`'s hand-backs uses, borrowed apart from the rest of the
/// distributor for one read (as [`Router`](super::lanes::Router) is for routing).
pub(super) struct LaneRead<'a, T, F> {
    pub(super) w: usize,
    /// Processed packets waiting for `collect`.
    pub(super) returned: &'a mut Vec<T>,
    pub(super) backlog: &'a mut VecDeque<T>,
    pub(super) backlog_at: &'a mut VecDeque<u64>,
    /// The poll this read belongs to (a reschedule's `backlog_at`).
    pub(super) epoch: u64,
    pub(super) stats: &'a mut GroupHandle<5>,
    pub(super) tag: &'a mut F,
    pub(super) check_order: bool,
    /// An ordered distributor's reorder window.
    pub(super) reorder: &'a mut Option<Reorder<T>>,
}

impl<T, F> LaneRead<'_, T, F>
where
    F: FnMut(&T) -> u64,
{
    /// Takes the next `n` processed packets (all visible) from `lane`'s done ring: each
    /// completes the oldest position not handed back. Accounting first, then the order
    /// check (the user's `tag`, which may panic) or the reorder window. Returns how many it
    /// took (`n`).
    #[inline(always)]
    pub(super) fn burst<const ORDERED: bool>(&mut self, lane: &mut Lane<T>, n: u64) -> u64 {
        let start = self.returned.len();
        let got = lane.done_rx.pop_burst_into(self.returned, n as usize) as u64;
        debug_assert_eq!(got, n, "visible packets vanished");
        // `completed` on, or, past positions handed back out of order, the unmarked ones.
        let at = lane.completed;
        let spread = if lane.ooo > 0 && (self.check_order || ORDERED) {
            Some(unmarked_from(lane, got))
        } else {
            None
        };
        lane.advance(got);
        if let Some(win) = self.reorder.as_mut().filter(|_| ORDERED) {
            // Ordered: the burst's sequence numbers are kept at its positions.
            let (tags, m) = (&lane.tags, lane.tag_mask);
            match &spread {
                Some(ps) => win.take_burst(self.returned, start, |k| tags[ps[k] as usize & m]),
                None => {
                    win.take_burst(self.returned, start, |k| tags[(at + k as u64) as usize & m])
                }
            }
        }
        let (w, tag) = (self.w, &mut *self.tag);
        let burst = &self.returned[start..];
        if !self.check_order {
        } else if let Some(positions) = spread {
            for (p, &pos) in burst.iter().zip(&positions) {
                lane.check(w, pos, tag(p));
            }
        } else if cfg!(debug_assertions) {
            for (k, p) in burst.iter().enumerate() {
                lane.check(w, at + k as u64, tag(p));
            }
        } else {
            // One packet per burst read, at a rotating offset: one `tag` call per burst
            // instead of one per packet.
            lane.probe = lane.probe.wrapping_add(PROBE_STEP);
            let k = probe_offset(lane.probe, burst.len());
            lane.check(w, at + k as u64, tag(&burst[k]));
        }
        got
    }

    /// Takes one control entry of `lane` (the next in its worker's stream); returns
    /// whether it was the leave marker.
    #[inline(always)]
    pub(super) fn control<const ORDERED: bool>(
        &mut self,
        lane: &mut Lane<T>,
        entry: Ret<T>,
    ) -> bool {
        let w = self.w;
        match entry {
            Ret::Dropped { pos, .. } => {
                self.stats.add(DROPPED, 1);
                if let Some(win) = self.reorder.as_mut().filter(|_| ORDERED) {
                    win.skip(lane.tags[pos as usize & lane.tag_mask], self.returned);
                }
                // Leaves its flow: not checked against the flow's older packets.
                lane.complete_at(w, pos, false);
            }
            Ret::Resched { pos, pkt, .. } => {
                self.stats.add(RESCHEDULED, 1);
                self.backlog.push_back(pkt);
                if let Some(win) = self.reorder.as_mut().filter(|_| ORDERED) {
                    // A new arrival: its old place in the order is given up.
                    win.skip(lane.tags[pos as usize & lane.tag_mask], self.returned);
                    self.backlog_at.push_back(NO_SEQ);
                } else {
                    self.backlog_at.push_back(self.epoch);
                }
                // Leaves its flow (it comes back as a new packet of its new tag's flow), so
                // it may pass the flow's older packets, which keep the flow on this worker
                // until they are back: not checked against them.
                lane.complete_at(w, pos, false);
            }
            // Processed, handed back out of order: kept, accounted, then checked.
            Ret::Done { pos, pkt, .. } if ORDERED => {
                let seq = lane.tags[pos as usize & lane.tag_mask];
                let win = self.reorder.as_mut().expect("matched");
                win.put(seq, pkt, self.returned);
                lane.complete_at(w, pos, false);
            }
            Ret::Done { pos, pkt, .. } => {
                self.returned.push(pkt);
                let checked = self.check_order && lane.sample_ooo();
                lane.complete_at(w, pos, checked);
                if checked {
                    let t = (self.tag)(self.returned.last().expect("just pushed"));
                    lane.check(w, pos, t);
                }
            }
            Ret::Unprocessed { pos, pkt, .. } => self.unprocessed::<ORDERED>(lane, pos, pkt),
            Ret::Lost { n, .. } => self.lost::<ORDERED>(lane, n),
            Ret::Leave { .. } => return true,
        }
        false
    }

    /// A packet a leaving worker handed back unprocessed: kept, still counted as
    /// outstanding (so its flow stays in flight at this worker), until the leave marker
    /// that follows arrives (a poll may see only part of a leaving worker's hand-back).
    #[inline(always)]
    fn unprocessed<const ORDERED: bool>(&mut self, lane: &mut Lane<T>, pos: u64, pkt: T) {
        lane.frozen = true;
        lane.cursor += 1;
        lane.passed_on += 1;
        // Kept before the user's `tag` runs: if it panics, the packet is not lost.
        lane.leaving.push(pkt);
        if ORDERED {
            lane.leaving_seqs
                .push(lane.tags[pos as usize & lane.tag_mask]);
        }
        if self.check_order {
            let t = (self.tag)(lane.leaving.last().expect("just pushed"));
            lane.check(self.w, pos, t);
        }
    }

    /// The `n` packets a dropped worker held (not contiguous if it handed some back out of
    /// order): counted as lost; the leave marker that follows right behind settles the
    /// lane, and until then its flows stay in flight.
    #[inline(always)]
    fn lost<const ORDERED: bool>(&mut self, lane: &mut Lane<T>, n: u64) {
        if let Some(win) = self.reorder.as_mut().filter(|_| ORDERED) {
            // The packets held: the `n` oldest positions not handed back.
            for pos in unmarked_from(lane, n) {
                win.skip(lane.tags[pos as usize & lane.tag_mask], self.returned);
            }
        }
        lane.frozen = true;
        lane.cursor += n;
        lane.passed_on += n;
        self.stats.add(LOST, n);
    }
}
