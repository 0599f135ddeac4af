//! Lanes and routing: each worker's lane (its rings, credit and staged packets) and the
//! routing of a packet by its flow tag, through the flow table, to the lane that holds its
//! flow or, for a new flow, to the least-loaded lane (DPDK's `rte_distributor` assigns
//! flows the same way: affinity first, then the least-loaded worker).

use std::sync::Arc;

use crate::counter::CounterGroup;
use crate::fifo::{spsc, Wait};

use super::flows::{Flow, FlowTable};
use super::protocol::{bit_of, Control, Parked, Ret};
use super::registry::Entry;
use super::schedule::Schedule;
use super::worker::WORKER_FIELDS;
use super::Distributor;

/// No packet staged on a lane (its `staged_call`).
pub(super) const NOT_STAGED: u64 = u64::MAX;

/// What the last scan of a routing pass found ([`Router::least_loaded`]): the
/// least loaded active lane, and the load below which it stays the pick: the least
/// outstanding count among the other active lanes then (`u64::MAX` if there is none),
/// plus the slack. Other lanes' loads only grow within a pass, so the pick stays within
/// the slack of the least loaded lane.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pick {
    pub(super) lane: usize,
    pub(super) bound: u64,
    /// The pick lane's `sent` count below which it is still the pick and under its
    /// credit: `completed + min(bound, credit)` at the scan (`completed` does not move
    /// within a pass), so the common check is one load and one compare.
    pub(super) until: u64,
}

impl Pick {
    /// No pick: `bound` 0 fails every check (no load is below it), so the next
    /// [`Router::least_loaded`] scans.
    pub(super) const NONE: Pick = Pick {
        lane: 0,
        bound: 0,
        until: 0,
    };
}

/// What routing a packet uses, borrowed apart from the rest of the distributor for one
/// pass: the compiler then keeps these in registers across the pass (a `&mut self` method
/// reloads them after every store into a lane's buffers, which it cannot tell apart from
/// the distributor's own fields).
pub(super) struct Router<'a, T> {
    pub(super) lanes: &'a mut [Lane<T>],
    pub(super) flows: &'a mut FlowTable,
    /// The pass's pick (copied in and out, so it stays in registers).
    pub(super) pick: Pick,
    pub(super) credit: u64,
    /// How far above the least loaded lane the pick may be (a lane batch less one).
    pub(super) slack: u64,
}

impl<T> Router<'_, T> {
    /// The active worker with the least outstanding work (the first such lane), or one
    /// within `slack` packets of it, if it still has credit.
    ///
    /// Scans the lanes only when `pick` cannot answer: within one routing pass a lane's
    /// outstanding count only grows (packets are sent; completions are read between
    /// passes), so a lane whose load is still below the bound `pick.bound` (the lowest
    /// load of every other active lane at the scan, plus `slack`) is still within `slack`
    /// of the least loaded lane. With `slack` 0 it is the strict minimum, the lane a scan
    /// would find; with a slack of a lane batch less one, new flows fill one lane's batch
    /// in a row and a scan of every lane happens about once per batch instead of once per
    /// packet.
    #[inline]
    fn least_loaded(lanes: &[Lane<T>], credit: u64, slack: u64, pick: &mut Pick) -> Option<usize> {
        let p = *pick;
        debug_assert!(p.lane < lanes.len());
        // SAFETY: `pick.lane` is 0 (`Pick::NONE`; `new` makes at least one lane) or an
        // index of `lanes` a scan found, and `lanes` never shrinks. Unchecked because the
        // bounds check costs instructions on every packet (`docs/performance-notes.md`,
        // section 12).
        let lane = unsafe { lanes.get_unchecked(p.lane) };
        if lane.sent < p.until {
            return Some(p.lane);
        }
        let load = lane.outstanding();
        if load < p.bound {
            if load < credit {
                return Some(p.lane);
            }
            if load < p.bound.saturating_sub(slack) {
                // Every other active lane had more than this one at the scan, which is at
                // its credit: all are.
                return None;
            }
        }
        let (mut best, mut best_load, mut others) = (None, u64::MAX, u64::MAX);
        for (i, lane) in lanes.iter().enumerate() {
            if !lane.active {
                continue;
            }
            let load = lane.outstanding();
            if load < best_load {
                others = best_load;
                best = Some(i);
                best_load = load;
            } else if load < others {
                others = load;
            }
        }
        *pick = best.map_or(Pick::NONE, |lane| {
            let bound = others.saturating_add(slack);
            Pick {
                lane,
                bound,
                until: lanes[lane].completed + bound.min(credit),
            }
        });
        best.filter(|_| best_load < credit)
    }

    /// The least loaded worker (or one within the slack of it), if any has credit.
    #[inline(always)]
    pub(super) fn any_lane(&mut self) -> Option<usize> {
        Self::least_loaded(self.lanes, self.credit, self.slack, &mut self.pick)
    }

    /// Sends `pkt` (stamped `t`) to the least loaded worker (or one within the slack of
    /// it), with no flow affinity; gives it back if no worker has credit.
    #[inline(always)]
    pub(super) fn route_any(&mut self, pkt: T, t: u64) -> Result<(), T> {
        match self.any_lane() {
            Some(w) => {
                self.lanes[w].send(pkt, t);
                Ok(())
            }
            None => Err(pkt),
        }
    }

    /// Routes `pkt` (tag `t`) to a worker's staging buffer, or gives it back. One flow-table
    /// lookup per packet.
    #[inline(always)]
    pub(super) fn route(&mut self, pkt: T, t: u64) -> Result<(), T> {
        self.route_with(pkt, t, Self::least_loaded)
    }

    /// [`route`](Self::route) with the worker for an idle or new flow chosen by `choose`
    /// (given the lanes, the credit, the slack and the pass's pick, read where it is
    /// called so they stay out of registers on the flow's path), which must return an
    /// index of the lanes: a flow in flight stays with its worker whatever `choose` says.
    #[inline(always)]
    pub(super) fn route_with(
        &mut self,
        pkt: T,
        t: u64,
        mut choose: impl FnMut(&[Lane<T>], u64, u64, &mut Pick) -> Option<usize>,
    ) -> Result<(), T> {
        let w = match self.flows.get_mut(t) {
            Some(f) => {
                debug_assert!(f.worker < self.lanes.len());
                // Every worker index in the flow table is an index of `lanes` (set from
                // `choose`, a scan of `lanes`), and `lanes` never shrinks (`remove_worker`
                // marks a lane removed and keeps it): the bounds checks here never fail,
                // and cost little (`docs/performance-notes.md`, section 12).
                let lane = &self.lanes[f.worker];
                if lane.completed < f.last {
                    // In flight: stays with its worker, whatever the load.
                    if lane.outstanding() >= self.credit {
                        return Err(pkt);
                    }
                } else {
                    // Idle: may move to the least loaded worker.
                    match choose(self.lanes, self.credit, self.slack, &mut self.pick) {
                        Some(w) => f.worker = w,
                        None => return Err(pkt),
                    }
                }
                debug_assert!(f.worker < self.lanes.len());
                let lane = &mut self.lanes[f.worker];
                f.last = lane.send(pkt, t);
                return Ok(());
            }
            None => match choose(self.lanes, self.credit, self.slack, &mut self.pick) {
                Some(w) => w,
                None => return Err(pkt),
            },
        };
        let lane = &mut self.lanes[w];
        lane.send(pkt, t);
        self.flows.set(
            t,
            Flow {
                worker: w,
                last: lane.sent,
            },
        );
        Ok(())
    }
}

/// The distributor's view of one worker.
pub(super) struct Lane<T> {
    pub(super) tx: spsc::Producer<T, Wait>,
    /// Processed packets from the worker.
    pub(super) done_rx: spsc::Consumer<T>,
    /// Drops, reschedules and the leave message from the worker.
    pub(super) rx: spsc::Consumer<Ret<T>>,
    /// The worker's ring ends while it is away.
    pub(super) parked: Option<Parked<T>>,
    pub(super) active: bool,
    /// Packets sent to this worker (staged ones included), ever.
    pub(super) sent: u64,
    /// Packets published to this worker's ring (`sent` less the staged ones), ever.
    pub(super) published: u64,
    /// Stream position of the oldest packet sent to this worker and not handed back
    /// (every earlier one is back: processed, dropped, rescheduled or returned
    /// unprocessed): `sent` less the packets in flight at this worker, counting those
    /// handed back out of order past the oldest one (the worker's credit is counted from
    /// it). A flow whose last position is below it has nothing in flight here.
    pub(super) completed: u64,
    /// Packets routed to this worker and not yet published: pushed as one burst once
    /// there is a batch of them, or they waited the hold, or a call brings less than a
    /// batch of input (see [`Distributor::set_batching`]).
    pub(super) staged: Vec<T>,
    /// The call at whose end the oldest staged packet was first left staged
    /// ([`NOT_STAGED`] when none is).
    pub(super) staged_call: u64,
    /// Packets a leaving worker handed back unprocessed, held until its leave marker.
    pub(super) leaving: Vec<T>,
    /// The schedule's notes of `leaving` (backlog notes: see [`schedule`](super::schedule)),
    /// in step with it.
    pub(super) leaving_notes: Vec<u64>,
    /// The schedule's stamp of the packet sent at each position of this worker's stream
    /// (position `p` at `p & stamp_mask`): an atomic schedule's flow tag, for its hand-back
    /// order check; an ordered one's sequence number. Distributor-local, never shared.
    pub(super) stamps: Box<[u64]>,
    pub(super) stamp_mask: usize,
    /// Position of the next hand-back to process in the worker's hand-back stream
    /// (merging the done and control rings).
    pub(super) cursor: u64,
    /// Stream positions at or above `completed` that the worker handed back out of order
    /// (bit `pos & (bits - 1)`); `completed` is the oldest position not handed back.
    pub(super) handed_bits: Box<[u64]>,
    /// How many bits of `handed_bits` are set.
    pub(super) ooo: u64,
    /// Hand-backs out of order read so far (which of them the release build checks).
    pub(super) ooo_seen: u32,
    /// Set by the first packet handed back unprocessed: `completed` then stays put until
    /// the leave marker, so the leaving worker's flows stay in flight until then.
    pub(super) frozen: bool,
    /// Rotating offset of the packet checked in each burst read (release builds).
    pub(super) probe: u32,
    pub(super) control: Arc<Control<T>>,
    /// The worker's counters (its handle is in the worker's ring ends).
    pub(super) stats: Arc<CounterGroup<WORKER_FIELDS>>,
    /// Removed for good ([`Distributor::remove_worker`]): not listed, cannot re-join; a
    /// later [`Distributor::add_worker`] may reuse the lane (and its id).
    pub(super) removed: bool,
    /// Positions of `cursor` that were not this worker's own hand-back (processed, dropped
    /// or rescheduled): packets handed back unprocessed, lost with a dropped handle, or
    /// never received (skipped at its leave), and the positions of the removed worker
    /// whose lane `add_worker` reused. `cursor - passed_on` is
    /// [`Distributor::worker_completed`].
    pub(super) passed_on: u64,
}

impl<T> Lane<T> {
    #[inline(always)]
    pub(super) fn outstanding(&self) -> u64 {
        self.sent - self.completed
    }

    /// Whether the distributor reads this lane's return rings in a call that reads only
    /// the lanes due ([`Distributor::poll_due`]): the worker holds at least `batch`
    /// published packets not read back, or this lane has more than `near` (its credit
    /// less `batch`) outstanding.
    #[inline(always)]
    pub(super) fn due(&self, batch: u64, near: u64) -> bool {
        let c = self.completed;
        self.published >= c + batch || self.sent > c + near
    }

    /// Stages `pkt` (tag `t`) for this worker at the next position of its stream.
    #[inline(always)]
    pub(super) fn send(&mut self, pkt: T, t: u64) -> u64 {
        let sent = self.sent;
        let i = sent as usize & self.stamp_mask;
        debug_assert!(i < self.stamps.len());
        // SAFETY: `stamp_mask` is `stamps.len() - 1` (a power of two), so `i` is in bounds.
        // Unchecked because the bounds check costs instructions on every packet
        // (`docs/performance-notes.md`, section 12).
        unsafe { *self.stamps.get_unchecked_mut(i) = t };
        self.sent = sent + 1;
        self.staged.push(pkt);
        sent + 1
    }

    /// The schedule's stamp of the packet sent at stream position `pos`.
    #[inline(always)]
    pub(super) fn stamp(&self, pos: u64) -> u64 {
        let i = pos as usize & self.stamp_mask;
        debug_assert!(i < self.stamps.len());
        // SAFETY: `stamp_mask` is `stamps.len() - 1` (a power of two), so `i` is in bounds.
        // Unchecked as in `send` (`docs/performance-notes.md`, section 12).
        unsafe { *self.stamps.get_unchecked(i) }
    }

    /// The stamps of the `n` positions from `at` on (at most the stamps' length), as the
    /// one or two runs of the stamp array that hold them.
    #[inline(always)]
    pub(super) fn stamp_runs(&self, at: u64, n: usize) -> (&[u64], &[u64]) {
        debug_assert!(n <= self.stamps.len());
        let i = at as usize & self.stamp_mask;
        let first = n.min(self.stamps.len() - i);
        (&self.stamps[i..i + first], &self.stamps[..n - first])
    }

    /// The order check: the packet handed back at position `at` has tag `t`.
    #[inline(always)]
    pub(super) fn check(&self, w: usize, at: u64, t: u64) {
        let expected = self.stamps[at as usize & self.stamp_mask];
        if t != expected {
            misordered(w, at, expected, t);
        }
    }

    /// The order check of a burst handed back by worker `w` (at the positions from `at`
    /// on, or at `spread` past positions handed back out of order), each packet's stamp
    /// given by `stamp`: every packet in debug builds and at `spread`; one per burst, at
    /// a rotating offset, otherwise (one call of the user's code per burst).
    #[inline(always)]
    pub(super) fn check_burst(
        &mut self,
        w: usize,
        burst: &[T],
        at: u64,
        spread: Option<&[u64]>,
        mut stamp: impl FnMut(&T) -> u64,
    ) {
        if let Some(positions) = spread {
            for (p, &pos) in burst.iter().zip(positions) {
                self.check(w, pos, stamp(p));
            }
        } else if cfg!(debug_assertions) {
            for (k, p) in burst.iter().enumerate() {
                self.check(w, at + k as u64, stamp(p));
            }
        } else {
            self.probe = self.probe.wrapping_add(PROBE_STEP);
            let k = probe_offset(self.probe, burst.len());
            self.check(w, at + k as u64, stamp(&burst[k]));
        }
    }

    /// `n` more hand-backs processed, each of the oldest packet not handed back; they
    /// complete packets unless a leave is under way.
    #[inline(always)]
    pub(super) fn advance(&mut self, n: u64) {
        self.cursor += n;
        if !self.frozen {
            if self.ooo == 0 {
                self.completed += n;
            } else {
                self.advance_past_later(n);
            }
        }
    }

    /// [`advance`](Self::advance) while positions past `completed` were handed back out of
    /// order: each hand-back completes the oldest position, and `completed` then moves past
    /// the marked positions it uncovers.
    #[cold]
    #[inline(never)]
    fn advance_past_later(&mut self, n: u64) {
        for _ in 0..n {
            self.completed += 1;
            self.skip_marked();
        }
    }

    /// Moves `completed` past the positions handed back out of order that it has reached,
    /// clearing their marks.
    fn skip_marked(&mut self) {
        while self.ooo > 0 {
            let (word, bit) = bit_of(self.completed, self.handed_bits.len());
            if self.handed_bits[word] & bit == 0 {
                break;
            }
            self.handed_bits[word] &= !bit;
            self.ooo -= 1;
            self.completed += 1;
        }
    }

    /// Whether stream position `pos` (at or above `completed`) was handed back out of
    /// order.
    pub(super) fn marked(&self, pos: u64) -> bool {
        let (word, bit) = bit_of(pos, self.handed_bits.len());
        self.handed_bits[word] & bit != 0
    }

    /// Whether this out-of-order hand-back is checked: every one in debug builds, one in
    /// [`OOO_CHECK_EVERY`] in release builds (a check of a later packet scans the
    /// positions back to `completed`), so a worker that keeps overtaking within a flow is
    /// caught within a few dozen hand-backs.
    #[inline]
    pub(super) fn sample_ooo(&mut self) -> bool {
        self.ooo_seen = self.ooo_seen.wrapping_add(1);
        cfg!(debug_assertions) || self.ooo_seen % OOO_CHECK_EVERY == 0
    }

    /// One hand-back from the control ring, of the packet at stream position `pos`: the
    /// oldest not handed back (in-order calls), or a later one (the `_at` calls), which is
    /// marked. With `check` (the caller's [`sample_ooo`](Self::sample_ooo), for a packet
    /// handed back processed), a later one must not overtake a packet of its own flow:
    /// worker `w` that did is a bug that would let a flow run on two workers at once. A
    /// dropped or rescheduled packet leaves its flow and is not checked.
    pub(super) fn complete_at(&mut self, w: usize, pos: u64, check: bool) {
        self.cursor += 1;
        if self.frozen {
            return;
        }
        debug_assert!(pos >= self.completed && pos < self.sent, "held position");
        if pos == self.completed {
            self.completed += 1;
            self.skip_marked();
            return;
        }
        // Accounting first (as for every hand-back), then the check.
        let (word, bit) = bit_of(pos, self.handed_bits.len());
        self.handed_bits[word] |= bit;
        self.ooo += 1;
        if check {
            self.check_overtake(w, pos);
        }
    }

    /// Panics if the packet at stream position `pos` (handed back out of order, at or
    /// above `completed`) overtakes an older packet of its own flow (one with the same
    /// stamp, not handed back yet).
    pub(super) fn check_overtake(&self, w: usize, pos: u64) {
        let t = self.stamps[pos as usize & self.stamp_mask];
        for q in self.completed..pos {
            if !self.marked(q) && self.stamps[q as usize & self.stamp_mask] == t {
                overtook(w, pos, q, t);
            }
        }
    }

    /// Forgets the marks (the worker left: everything sent is accounted for).
    pub(super) fn clear_marks(&mut self) {
        if self.ooo > 0 {
            self.handed_bits.fill(0);
            self.ooo = 0;
        }
    }
}

/// Panics for a worker that handed back, out of order, a packet of a flow while it still
/// held an earlier packet of the same flow.
#[cold]
#[inline(never)]
fn overtook(worker: usize, pos: u64, earlier: u64, tag: u64) -> ! {
    panic!(
        "distributor: worker {worker} handed back the packet at position {pos} of its stream \
         before the one at position {earlier}, both of flow {tag:#x}. Packets of one flow must \
         be handed back in the order received (packets of different flows may come back in \
         any order, with the `_at` calls; a packet dropped or rescheduled leaves its flow and \
         may pass it); otherwise a flow could run on two workers at once"
    )
}

/// One out-of-order hand-back in this many is checked in release builds
/// ([`Lane::sample_ooo`]).
pub(super) const OOO_CHECK_EVERY: u32 = 16;

/// Step of the rotating offset of the checked packet: 2^32 divided by the golden ratio, so
/// successive probes spread evenly over every burst length (see [`probe_offset`]).
pub(super) const PROBE_STEP: u32 = 0x9e37_79b9;

/// The offset in a burst of `len` packets that probe `probe` checks: `probe`'s fraction of
/// 2^32 scaled to `len` (a multiplication and a shift; a `%` cost a division per burst).
/// Always below `len`; successive probes cover every offset of a burst of up to 1024
/// packets within `2 * len` bursts (the unit test below).
#[inline(always)]
pub(super) fn probe_offset(probe: u32, len: usize) -> usize {
    // In 128 bits: `len` may exceed 32 bits.
    ((u128::from(probe) * len as u128) >> 32) as usize
}

#[cfg(all(test, not(loom)))]
mod probe_tests {
    use super::{probe_offset, PROBE_STEP};

    #[test]
    fn probes_stay_in_the_burst_and_cover_it() {
        // Fewer lengths under Miri: a million interpreted steps cost about a minute.
        let lens = if cfg!(miri) { 64 } else { 1024 };
        for len in 1..=lens {
            let (mut probe, mut seen) = (0u32, vec![false; len]);
            for _ in 0..2 * len {
                probe = probe.wrapping_add(PROBE_STEP);
                let k = probe_offset(probe, len);
                assert!(k < len);
                seen[k] = true;
            }
            assert!(seen.iter().all(|&s| s), "a burst of {len} not covered");
        }
        assert!(probe_offset(u32::MAX, usize::MAX) < usize::MAX);
        assert_eq!(probe_offset(u32::MAX, 1), 0);
    }
}

#[cfg(all(test, not(loom)))]
mod pick_tests {
    use std::sync::Arc;

    use crossbeam_utils::CachePadded;

    use super::super::protocol::lane_pair;
    use super::super::rejoin::RejoinDesk;
    use super::{Lane, Pick, Router};
    use crate::wait::Sleepers;

    /// The kept pick (`until`, `bound`) answers every `least_loaded` as a fresh scan
    /// would (slack 0), or with a lane within the slack of the fresh scan's (slack 3), and
    /// never names a lane at its credit: random sends to the picked lane, sends to other
    /// lanes (flows in flight elsewhere), completions (each followed by a pick reset, as
    /// `poll_returns` does) and lanes going inactive and back.
    #[test]
    fn a_kept_pick_answers_as_a_fresh_scan() {
        kept_pick_against_fresh_scans(0);
        kept_pick_against_fresh_scans(3);
    }

    fn kept_pick_against_fresh_scans(slack: u64) {
        const CREDIT: u64 = 16;
        let wake = Arc::new(CachePadded::new(Sleepers::new()));
        let desk = Arc::new(RejoinDesk::new(&wake));
        let mut lanes: Vec<Lane<u64>> = (0..4)
            .map(|id| lane_pair(id, CREDIT as usize, &wake, &desk).unwrap().0)
            .collect();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut pick = Pick::NONE;
        let (mut picked, mut refused) = (0, 0);
        // Fewer steps under Miri (each is a few scans of 4 lanes).
        let steps = if cfg!(miri) { 5_000 } else { 200_000 };
        for _ in 0..steps {
            let mut fresh = Pick::NONE;
            let want = Router::least_loaded(&lanes, CREDIT, 0, &mut fresh);
            let got = Router::least_loaded(&lanes, CREDIT, slack, &mut pick);
            if slack == 0 {
                assert_eq!(got, want);
            } else {
                assert_eq!(got.is_some(), want.is_some());
                if let (Some(g), Some(w)) = (got, want) {
                    assert!(lanes[g].active);
                    assert!(lanes[g].outstanding() <= lanes[w].outstanding() + slack);
                }
            }
            match rand() % 8 {
                0..=3 => match got {
                    Some(w) => {
                        assert!(lanes[w].outstanding() < CREDIT);
                        lanes[w].sent += 1;
                        picked += 1;
                    }
                    None => refused += 1,
                },
                4 => {
                    // A packet of a flow in flight at some lane with credit left.
                    let w = rand() as usize % lanes.len();
                    if lanes[w].active && lanes[w].outstanding() < CREDIT {
                        lanes[w].sent += 1;
                    }
                }
                5 | 6 => {
                    let w = rand() as usize % lanes.len();
                    let l = &mut lanes[w];
                    l.completed += rand() % (l.outstanding() + 1);
                    pick = Pick::NONE;
                }
                _ => {
                    // A lane leaves (everything accounted for) or comes back.
                    let w = rand() as usize % lanes.len();
                    let l = &mut lanes[w];
                    if l.active && lanes.iter().filter(|l| l.active).count() > 1 {
                        let l = &mut lanes[w];
                        l.completed = l.sent;
                        l.active = false;
                    } else {
                        lanes[w].active = true;
                    }
                    pick = Pick::NONE;
                }
            }
        }
        // Both answers were exercised: picks, and refusals of lanes at their credit.
        assert!(
            picked > steps / 4 && refused > steps / 200,
            "{picked} picked, {refused} refused"
        );
    }
}

/// The order check failed: a worker handed back, at position `at` of its stream, a packet
/// whose tag is not the tag of the packet it received at that position.
#[cold]
#[inline(never)]
fn misordered(worker: usize, at: u64, expected: u64, got: u64) -> ! {
    panic!(
        "distributor: worker {worker} handed back a packet out of order (position {at} of its \
         stream: expected a packet of tag {expected:#x}, got tag {got:#x}). Workers must hand \
         packets back (done, drop_packet, reschedule, leave) in the order they received them; \
         otherwise a flow could run on two workers at once"
    )
}

impl<T, S: Schedule<T>> Distributor<T, S> {
    /// Publishes, as one burst per lane, the staged packets of every lane that has a batch
    /// of them, or whose oldest waited the hold, or that has no credit left to gather
    /// more; every lane's when the call publishes all. The others stay staged (their
    /// flows are in flight, their credit taken), and the age of their oldest is noted.
    ///
    /// With `prefetch`, the end of a `distribute`: the lanes the next read takes (those
    /// due, see [`Lane::due`]) are listed in `due_lanes` for [`collect`](Self::collect),
    /// and the lines of their hand-backs published by now are asked for, so that they
    /// travel from the workers' cores while the caller works between calls, and the next
    /// read finds them near instead of waiting for each line in turn
    /// (`docs/performance-notes.md`, section 8). That is one more read of each such
    /// done ring's index per call; it moves the index line only if the worker published
    /// since the last read, which the next read would have paid for instead.
    pub(super) fn push_staged(&mut self, prefetch: bool, all: bool) {
        let (all, batch, hold, calls, credit) =
            (all, self.batch, self.hold, self.calls, self.credit);
        let near = credit - batch;
        self.due_lanes.clear();
        for (w, lane) in self.lanes.iter_mut().enumerate() {
            let n = lane.staged.len();
            if n != 0 {
                let age = if lane.staged_call == NOT_STAGED {
                    0
                } else {
                    calls.wrapping_sub(lane.staged_call)
                };
                if all || n as u64 >= batch || lane.outstanding() >= credit || age >= hold {
                    lane.staged_call = NOT_STAGED;
                    lane.published = lane.sent;
                    let pushed = lane.tx.push_burst_from(&mut lane.staged);
                    // The ring holds `credit` slots and a worker never has more than
                    // `credit` packets outstanding, so the staged packets always fit.
                    assert_eq!(pushed, n, "worker ring sized to the credit overflowed");
                } else if lane.staged_call == NOT_STAGED {
                    lane.staged_call = calls;
                }
            }
            if prefetch && lane.active && (all || lane.due(batch, near)) {
                self.due_lanes.push(w);
                lane.done_rx.refresh_and_prefetch(64);
            }
        }
    }

    /// Starts a call of `distribute` (of the distributor or of a node) that brings
    /// `new_input` packets: its clock ticks, and it publishes and reads everything unless
    /// the input is a batch or more (a lighter load is served at once: latency first).
    pub(crate) fn begin_call(&mut self, new_input: usize) {
        self.serve_rejoins();
        self.calls = self.calls.wrapping_add(1);
        self.publish_all = (new_input as u64) < self.batch;
        self.collected = false;
    }

    /// How far above the least loaded lane a new flow's lane may be: a lane batch less
    /// one under load (new flows fill one lane's batch in a row), none otherwise.
    pub(super) fn slack(&self) -> u64 {
        if self.publish_all {
            0
        } else {
            self.batch - 1
        }
    }
}

/// The registry's view of `lanes`: every lane not removed, by id.
pub(super) fn roster_of<T>(lanes: &[Lane<T>]) -> Vec<Entry> {
    lanes
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.removed)
        .map(|(id, l)| Entry {
            id,
            active: l.active,
            stats: Arc::clone(&l.stats),
        })
        .collect()
}
