//! Reading one worker's hand-backs: the bursts of processed packets from its done ring and
//! the entries of its control ring, merged by their positions in the worker's hand-back
//! stream ([`protocol`](super::protocol)), with the lane's accounting; the schedule is told
//! of each hand-back ([`schedule`](super::schedule): an order check, or a reorder window).

use crate::counter::GroupHandle;

use super::backlog::Backlog;
use super::lanes::Lane;
use super::protocol::Ret;
use super::schedule::sealed::Scheduling;
use super::stats::{DROPPED, LOST, RESCHEDULED};

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
pub(super) struct LaneRead<'a, T, S> {
    pub(super) w: usize,
    /// Processed packets waiting for `collect`.
    pub(super) returned: &'a mut Vec<T>,
    pub(super) backlog: &'a mut Backlog<T>,
    /// The poll this read belongs to (an atomic schedule's note of a reschedule).
    pub(super) epoch: u64,
    pub(super) stats: &'a mut GroupHandle<5>,
    /// The distributor's schedule, told of each hand-back.
    pub(super) sched: &'a mut S,
}

impl<T, S: Scheduling<T>> LaneRead<'_, T, S> {
    /// Takes the next `n` processed packets (all visible) from `lane`'s done ring: each
    /// completes the oldest position not handed back. Accounting first, then the
    /// schedule's part (an order check, which runs the user's `tag` and may panic, or the
    /// reorder window). Returns how many it took (`n`).
    #[inline(always)]
    pub(super) fn burst(&mut self, lane: &mut Lane<T>, n: u64) -> u64 {
        let start = self.returned.len();
        let got = lane.done_rx.pop_burst_into(self.returned, n as usize) as u64;
        debug_assert_eq!(got, n, "visible packets vanished");
        // `completed` on, or, past positions handed back out of order, the unmarked ones.
        let at = lane.completed;
        let spread = if lane.ooo > 0 && self.sched.wants_positions() {
            Some(unmarked_from(lane, got))
        } else {
            None
        };
        lane.advance(got);
        self.sched.took_burst(
            self.w,
            lane,
            self.returned,
            self.backlog,
            start,
            at,
            spread.as_deref(),
        );
        got
    }

    /// Takes one control entry of `lane` (the next in its worker's stream); returns
    /// whether it was the leave marker.
    #[inline(always)]
    pub(super) fn control(&mut self, lane: &mut Lane<T>, entry: Ret<T>) -> bool {
        let w = self.w;
        match entry {
            Ret::Dropped { pos, .. } => {
                self.stats.add(DROPPED, 1);
                self.sched.dropped(lane, pos, self.returned, self.backlog);
                // Leaves its flow: not checked against the flow's older packets.
                lane.complete_at(w, pos, false);
            }
            Ret::Resched { pos, pkt, .. } => {
                self.stats.add(RESCHEDULED, 1);
                let note =
                    self.sched
                        .rescheduled(w, lane, pos, self.epoch, self.returned, self.backlog);
                self.backlog.push_back(pkt, note);
                // Leaves its flow (it comes back as a new packet of its new tag's flow), so
                // it may pass the flow's older packets, which keep the flow on this worker
                // until they are back: not checked against them.
                lane.complete_at(w, pos, false);
            }
            // Processed, handed back out of order.
            Ret::Done { pos, pkt, .. } => {
                self.sched
                    .done_at(w, lane, pos, pkt, self.returned, self.backlog);
            }
            Ret::Unprocessed { pos, pkt, .. } => self.unprocessed(lane, pos, pkt),
            Ret::Lost { n, .. } => self.lost(lane, n),
            Ret::Leave { .. } => return true,
        }
        false
    }

    /// A packet a leaving worker handed back unprocessed: kept, still counted as
    /// outstanding (so its flow stays in flight at this worker), until the leave marker
    /// that follows arrives (a poll may see only part of a leaving worker's hand-back).
    #[inline(always)]
    fn unprocessed(&mut self, lane: &mut Lane<T>, pos: u64, pkt: T) {
        lane.frozen = true;
        lane.cursor += 1;
        lane.passed_on += 1;
        // Kept before the schedule's check runs the user's `tag`: if it panics, the packet
        // is not lost.
        lane.leaving.push(pkt);
        self.sched.unprocessed(self.w, lane, pos);
    }

    /// The `n` packets a dropped worker held (not contiguous if it handed some back out of
    /// order): counted as lost; the leave marker that follows right behind settles the
    /// lane, and until then its flows stay in flight.
    #[inline(always)]
    fn lost(&mut self, lane: &mut Lane<T>, n: u64) {
        self.sched.lost(lane, n, self.returned, self.backlog);
        lane.frozen = true;
        lane.cursor += n;
        lane.passed_on += n;
        self.stats.add(LOST, n);
    }
}
