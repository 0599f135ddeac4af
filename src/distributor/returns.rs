//! Returns and leaves: reading the workers' hand-backs (completed, rescheduled and
//! dropped packets, and leaves) from their lanes, `collect`, and `flush`, which waits until
//! every packet in flight is back.

use std::time::{Duration, Instant};

use crate::sync::Backoff;

use super::config::FlushError;
use super::handbacks::LaneRead;
use super::lanes::Pick;
use super::lanes::NOT_STAGED;
use super::protocol::Ret;
use super::schedule::Schedule;
use super::Distributor;

impl<T, S: Schedule<T>> Distributor<T, S> {
    /// Reads every worker's return rings: completions, returned packets, reschedules, leaves.
    pub(crate) fn poll_returns(&mut self) {
        // Completions lower loads: a pick of the last routing pass no longer holds (every
        // pass resets it too; this keeps it right for any caller of `route`).
        self.pick = Pick::NONE;
        self.epoch += 1;
        for w in 0..self.lanes.len() {
            self.poll_lane(w);
        }
    }

    /// Reads the return rings of the lanes due this call: those whose worker holds a
    /// batch's worth of published packets (its return ring may hold a burst), those near
    /// their credit (routing needs their completions), those with a control entry, and
    /// one lane in turn whatever its load (the last few hand-backs of a quiet lane are
    /// seen within as many calls as there are lanes). A lane read less often only looks
    /// busier than it is.
    pub(super) fn poll_due(&mut self) {
        self.pick = Pick::NONE;
        self.epoch += 1;
        let n = self.lanes.len();
        let turn = self.rotor;
        self.rotor = if turn + 1 >= n { 0 } else { turn + 1 };
        let (batch, near) = (self.batch, self.credit - self.batch);
        for w in 0..n {
            let lane = &mut self.lanes[w];
            // A control entry (a reschedule, a drop, a leave) is read at once, as by a call
            // that reads every lane: a reschedule goes before input that comes after it.
            // Its ring's index line moves only when the worker posts one.
            if w == turn || lane.due(batch, near) || lane.rx.has_unread() {
                self.poll_lane(w);
            }
        }
    }

    /// For [`collect`](Self::collect) with batching on: reads the lanes that the last
    /// `distribute` found due (a worker holding a batch's worth of published packets, or
    /// a lane near its credit) and still are; the calls of `distribute` read control
    /// entries and the lane in turn.
    fn poll_batches(&mut self) {
        self.pick = Pick::NONE;
        self.epoch += 1;
        let (batch, near) = (self.batch, self.credit - self.batch);
        let lanes = core::mem::take(&mut self.due_lanes);
        for &w in &lanes {
            if self.lanes[w].due(batch, near) {
                self.poll_lane(w);
            }
        }
        self.due_lanes = lanes;
    }

    /// Reads worker `w`'s two return rings and merges them in the worker's order: control
    /// entries carry their position, processed packets fill the positions between them.
    /// The schedule is told of each hand-back (an atomic one checks processed and
    /// unprocessed packets against the tag sent at their position; an ordered one's go
    /// through its reorder window).
    #[inline(always)]
    fn poll_lane(&mut self, w: usize) {
        let Self {
            lanes,
            returned,
            backlog,
            epoch,
            stats,
            sched,
            ..
        } = self;
        let mut read = LaneRead {
            w,
            returned,
            backlog,
            epoch: *epoch,
            stats,
            sched,
        };
        let lane = &mut lanes[w];
        // Control-ring slots read by a poll that a panic (the user's `tag`, the order
        // check) cut short are released here at the latest (see the end of this function).
        lane.rx.release_pending();
        // Processed packets visible now. Read first: every control entry the worker posted
        // before the last of them is visible to the reads of the control ring below.
        let mut avail = lane.done_rx.refresh() as u64;
        let mut left = false;
        loop {
            let next_at = lane.rx.peek().map(Ret::at);
            let gap = next_at.map_or(avail, |a| (a - lane.cursor).min(avail));
            if gap > 0 {
                avail -= read.burst(lane, gap);
            }
            match next_at {
                Some(a) if a == lane.cursor => {}
                _ => break,
            }
            let entry = lane.rx.pop().expect("peeked");
            if read.control(lane, entry) {
                left = true;
                break;
            }
        }
        // Single pops release control-ring slots lazily; the worker sizes that ring for the
        // entries the distributor has not read, so give back every slot read here now.
        lane.rx.release_pending();
        if left {
            self.take_leave(w);
        }
    }

    /// Worker `w` left, having handed back `lane.leaving`: take its parked ring ends, recover
    /// what it never received, and put all of it at the front of the backlog, oldest first.
    fn take_leave(&mut self, w: usize) {
        let lane = &mut self.lanes[w];
        let mut unprocessed = std::mem::take(&mut lane.leaving);
        // The worker parks its ends right after posting the leave marker.
        let backoff = Backoff::new();
        let parked = loop {
            if let Some(p) = lane
                .control
                .parked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
            {
                break p;
            }
            backoff.snooze();
        };
        let mut parked = parked;
        parked.rx.pop_burst_into(&mut unprocessed, usize::MAX);
        // Packets routed to this worker but not yet pushed (a `tag` panic ended the call
        // that routed them) are the newest of its stream: they follow the ring's.
        unprocessed.append(&mut lane.staged);
        // The schedule's notes of them. Those never received (the ring's and the staged
        // ones) are the last positions of the stream.
        let mut notes = std::mem::take(&mut lane.leaving_notes);
        // Each packet handed back unprocessed got its note as it was read.
        assert!(notes.len() <= unprocessed.len(), "a note per packet read");
        let never = (unprocessed.len() - notes.len()) as u64;
        for pos in lane.sent - never..lane.sent {
            notes.push(S::never_received(lane, pos));
        }
        debug_assert_eq!(notes.len(), unprocessed.len());
        lane.staged_call = NOT_STAGED;
        // Everything sent to the worker is now accounted for: handed back before it left,
        // handed back unprocessed, or recovered from its ring. The next worker on this lane
        // starts its stream at `sent`.
        lane.completed = lane.sent;
        lane.published = lane.sent;
        // The positions it never received.
        lane.passed_on += lane.sent - lane.cursor;
        lane.cursor = lane.sent;
        lane.clear_marks();
        lane.frozen = false;
        lane.active = false;
        lane.parked = Some(parked);
        self.active -= 1;
        self.leaves += 1;
        for (p, note) in unprocessed.into_iter().zip(notes).rev() {
            self.backlog.push_front(p, note);
        }
        self.publish_roster();
    }

    /// Moves the packets workers handed back as processed onto `out`; returns how many.
    /// Reads the workers' return rings only if nothing is waiting from an earlier read (a
    /// `distribute` call reads them too), so a `distribute` + `collect` loop reads each
    /// return ring at most once per round. With batching on (the default: see
    /// [`set_batching`](Self::set_batching)), right after a `distribute` that brought a
    /// batch of input or more it reads only the rings of workers that hold a batch's
    /// worth of packets, so a lane's last few hand-backs come back with a later call
    /// (within as many calls as there are workers); after one with less (or a
    /// [`flush`](Self::flush)) it reads them all, and a `collect` that follows another
    /// with no `distribute` between (a caller draining) also publishes everything staged
    /// first: a loop of `collect` alone brings everything back.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// d.distribute(&mut vec![1, 2]).unwrap();
    /// let mut b = Vec::new();
    /// ws[0].recv_burst(&mut b, 8).unwrap();
    /// ws[0].done_burst(&mut b).unwrap();
    /// let mut out = Vec::new();
    /// assert_eq!(d.collect(&mut out), 2);
    /// assert_eq!(out, [1, 2]);
    /// ```
    pub fn collect(&mut self, out: &mut Vec<T>) -> usize {
        self.serve_rejoins();
        if self.returned.is_empty() {
            if self.publish_all {
                self.poll_returns();
            } else if self.collected {
                // A second `collect` with no `distribute` between: the caller drains (its
                // input stopped). Everything staged goes out and every ring is read, so
                // a loop of `collect` alone brings everything back.
                self.push_staged(false, true);
                self.poll_returns();
            } else {
                self.poll_batches();
            }
        }
        self.collected = true;
        let n = self.returned.len();
        out.append(&mut self.returned);
        n
    }

    /// Drives everything in flight to completion: routes the backlog, collects returns
    /// onto `out`, until no packet is held by a worker or waiting, or `timeout` passes.
    ///
    /// Spins with backoff first, and again after every round that made progress (a packet
    /// came back, was routed or was handed back); once the backoff is spent without
    /// progress it sleeps until any worker hands something back (every worker notifies the
    /// flush after each completion, drop, reschedule or leave, including the implicit leave
    /// of a dropped handle) or a nap ends: 1 ms, doubling while nothing happens, at most
    /// 8 ms (the nap's end only makes it look again). So a flush that waits for a slow
    /// worker costs little CPU (`docs/performance-notes.md`, section 12), and a hand-back while the workers are otherwise
    /// idle is routed after about one wake-up (measured: `wait_flush_handback` in the
    /// report). Each nap that really sleeps runs the heavy barrier of [`crate::wait`] (on
    /// Linux a membarrier call, which interrupts every CPU running a thread of this
    /// process, busy workers included): about 1000 times a second at most while nothing
    /// comes back, fewer as the naps grow, and once per wake-up while hand-backs trickle
    /// in slower than the backoff spins.
    ///
    /// A `timeout` too large to add to the current time (such as `Duration::MAX`) means no
    /// deadline: the flush then returns only when
    /// everything is back or no worker is left. Packets held by a worker whose handle was
    /// dropped without `leave` count as lost (the `"lost"` statistic), not in flight, so
    /// a worker whose thread panicked and unwound never makes a flush wait forever. A
    /// handle that is never dropped (forgotten, leaked, or held by a thread blocked for
    /// good) is a worker that never leaves: the flush waits for its packets until the
    /// timeout, and [`FlushError::Timeout`] names it.
    ///
    /// # Panics
    ///
    /// As [`distribute`](Self::distribute): a worker that handed packets back out of order.
    ///
    /// # Errors
    ///
    /// [`FlushError::Timeout`] if the timeout passed first; [`FlushError::NoWorkers`]
    /// (with the undelivered packets) if no worker is active.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::distributor::{self, Config, FlushError};
    /// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// d.distribute(&mut vec![1]).unwrap();
    /// // Nobody runs the worker here, so the flush times out; the packet is not lost.
    /// let mut out = Vec::new();
    /// let e = d.flush(&mut out, Duration::from_millis(1));
    /// assert_eq!(e, Err(FlushError::Timeout { in_flight: 1, workers: vec![0] }));
    /// ```
    pub fn flush(&mut self, out: &mut Vec<T>, timeout: Duration) -> Result<(), FlushError<T>> {
        // The first and the longest nap between two looks at all workers (1 ms and 8 ms,
        // unless a test set them).
        let (first_slice, max_slice) = self.naps;
        let mut slice = first_slice;
        // Whether any unread hand-back ends the next nap (else only new ones do: see below).
        let mut eager = true;
        // What a round changes when it makes progress: packets in flight, packets sent,
        // hand-backs read (completions, drops, reschedules, leave markers).
        let mut last = (usize::MAX, 0u64, 0u64);
        let deadline = Instant::now().checked_add(timeout);
        let mut backoff = Backoff::new();
        loop {
            let mut none = Vec::new();
            if self.distribute(&mut none).is_err() {
                self.collect(out);
                return Err(FlushError::NoWorkers(none));
            }
            self.collect(out);
            let in_flight = self.in_flight();
            if in_flight == 0 {
                return Ok(());
            }
            let now_seen = (
                in_flight,
                self.lanes.iter().map(|l| l.sent).sum::<u64>(),
                self.lanes.iter().map(|l| l.cursor).sum::<u64>(),
            );
            if now_seen != last {
                // Progress (a reschedule chain makes progress without changing
                // `in_flight`): spin again before any nap, and nap briefly.
                last = now_seen;
                slice = first_slice;
                backoff = Backoff::new();
                eager = true;
            }
            // The deadline, every round: rounds that keep making progress (a worker that
            // reschedules for ever) do not hold it off.
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(FlushError::Timeout {
                    in_flight,
                    workers: self.holding_workers(),
                });
            }
            if !backoff.is_completed() {
                backoff.snooze();
                continue;
            }
            let nap = deadline.map_or(slice, |d| (d - now).min(slice));
            slice = (slice.saturating_mul(2)).min(max_slice);
            if self.lanes.iter().any(|l| l.outstanding() > 0) {
                // Woken by any worker's next hand-back (a completion, a drop, a
                // reschedule, a leave, also the implicit one of a dropped handle): every
                // worker notifies `wake` after each. A hand-back still unread now was
                // published after this round read the rings (a round reads everything
                // visible: a control entry is posted after the completions before it), so
                // it ends the nap at once and the next round takes it. Should a round
                // after a nap that such an entry ended make no progress, the next nap
                // waits for news instead (a change of the unread count), so a flush cannot
                // spin on entries it cannot use. A nap that ran to its end leaves the next
                // one eager. The nap's end only ends the nap: the loop decides.
                let lanes = &self.lanes;
                let unread =
                    || -> usize { lanes.iter().map(|l| l.done_rx.len() + l.rx.len()).sum() };
                let base = if eager { 0 } else { unread() };
                eager = !self.wake.sleep_until(|| unread() != base, Some(now + nap));
            } else {
                // Nothing is held, only the backlog is left: the next round routes it.
                std::thread::yield_now();
            }
        }
    }

    /// The ids of the workers holding packets not handed back yet.
    pub(crate) fn holding_workers(&self) -> Vec<usize> {
        let held = self.lanes.iter().enumerate();
        held.filter(|(_, l)| l.outstanding() > 0)
            .map(|(id, _)| id)
            .collect()
    }

    /// Packets held by workers or waiting in the backlog (not counting processed packets
    /// waiting for `collect`).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// d.distribute(&mut vec![1, 2, 3]).unwrap();
    /// assert_eq!(d.in_flight(), 3);
    /// ```
    pub fn in_flight(&self) -> usize {
        let held: u64 = self.lanes.iter().map(|l| l.outstanding() - l.ooo).sum();
        held as usize + self.backlog.len()
    }
}
