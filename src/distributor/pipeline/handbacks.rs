//! What a pipeline makes of a worker's hand-backs: each packet's route says whether it
//! completes (its own stage) or goes on (a later one); a packet leaving an ordered stage,
//! either way, waits in the stage's window for the older ones; drops, reschedules, lost
//! packets and packets given back give their places in that window up.

use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use crate::distributor::backlog::Backlog;
use crate::distributor::handbacks::unmarked_from;
use crate::distributor::lanes::{probe_offset, Lane, PROBE_STEP};
use crate::distributor::schedule::sealed::Scheduling;
use crate::distributor::Distributor;

use super::keys::{
    check_move, full_seq, key, next_low, next_stamp, seq_of, stage_of, NEEDS_ROUTE, TAG_BITS,
};
use super::stage::{dispatch, held_seqs, Leaving, Shape};
use super::{Pipeline, StageType};

/// Where a packet handed back goes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// Completed at an atomic or parallel stage: it stays for `collect`.
    Stays,
    /// Forwarded from an atomic or parallel stage: to the backlog, routed by this key.
    On(u64),
    /// Left ordered `stage` (its stamp's sequence bits `seq`): through its window, then completed
    /// (`None`) or forwarded by the key.
    Window {
        stage: usize,
        seq: u64,
        on: Option<u64>,
    },
}

/// How `classify` found a burst handed back.
#[derive(Clone, Copy)]
pub(super) enum Sorted {
    /// Every packet completes: nothing moves.
    Stay,
    /// Every packet is forwarded from an atomic or parallel stage, by the keys in `keys`.
    On,
    /// Every packet is forwarded from ordered `stage`, by the keys in `keys`, at the
    /// sequence numbers (stamp bits) from `first` on, one after another.
    OrderedRun { stage: usize, first: u64 },
    /// Some move and some may not: by the fates in `fates`.
    Mixed,
}

impl<T, R> Pipeline<T, R>
where
    R: FnMut(&T) -> (usize, u64),
{
    /// The fate of packet `p`, handed back by worker `w` at position `pos` (stamped
    /// `stamp`): its route asked for, checked (it may not go back; a completion at an
    /// atomic or parallel stage must be the packet sent at `pos`).
    ///
    /// `ORDERED` is false only where no stage is.
    #[inline(always)]
    fn fate<const ORDERED: bool>(
        &mut self,
        shape: Shape,
        w: usize,
        lane: &Lane<T>,
        pos: u64,
        stamp: u64,
        p: &T,
    ) -> Fate {
        let from = stage_of(stamp);
        let (to, tag) = (self.route)(p);
        check_move(from, to, shape.len);
        let on = (to != from).then(|| {
            if ORDERED {
                shape.entry_key(to, tag)
            } else {
                key(to, tag)
            }
        });
        if ORDERED && shape.is_ordered(from) {
            return Fate::Window {
                stage: from,
                seq: seq_of(stamp),
                on,
            };
        }
        match on {
            Some(k) => Fate::On(k),
            None => {
                if self.check_order {
                    lane.check(w, pos, key(to, tag));
                }
                Fate::Stays
            }
        }
    }

    /// The fates of the packets of `burst` (the `k`-th handed back at `pos_of(k)`), every
    /// route asked for before any packet moves; a packet at the last stage, if that stage
    /// is not ordered, can only complete and is not asked. While every packet is forwarded
    /// from an atomic or parallel stage, or from one ordered stage at sequence numbers one
    /// after another, only the keys they go on by are kept (`keys`); from the first that
    /// is not, every fate (`fates`).
    #[inline(never)]
    fn classify(
        &mut self,
        w: usize,
        lane: &Lane<T>,
        burst: &[T],
        pos_of: impl Fn(usize) -> u64,
        from: Option<u64>,
    ) -> Sorted {
        // The positions one after another (the common case) in a loop of their own, and
        // one without a look at the stages' types where none is ordered.
        match from {
            Some(at) if !self.shape.any_ordered() => {
                self.classify_at::<false>(w, lane, burst, |k| at + k as u64, from)
            }
            Some(at) => self.classify_at::<true>(w, lane, burst, |k| at + k as u64, from),
            None => self.classify_at::<true>(w, lane, burst, pos_of, from),
        }
    }

    /// [`classify`](Self::classify) with the positions given by `pos_of`.
    #[inline(always)]
    fn classify_at<const ORDERED: bool>(
        &mut self,
        w: usize,
        lane: &Lane<T>,
        burst: &[T],
        pos_of: impl Fn(usize) -> u64,
        from: Option<u64>,
    ) -> Sorted {
        let shape = self.shape;
        let last = shape.len - 1;
        let last_stays = !ORDERED || !shape.is_ordered(last);
        if last_stays && all_at(lane, burst.len(), &pos_of, from, last) {
            // Every packet completes at the last stage: no route to ask.
            return Sorted::Stay;
        }
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        keys.reserve(burst.len());
        let mut other = None;
        // From an ordered stage, the fates of the packets before a run ends (none if it
        // is the whole burst) are in `fates`.
        let mut prefix = false;
        if ORDERED {
            self.fates.clear();
            if let Some(run) = self.ordered_prefix(lane, burst, &pos_of, &mut keys) {
                self.keys = keys;
                return run;
            }
            prefix = !self.fates.is_empty();
        }
        if !prefix {
            for (k, p) in burst.iter().enumerate() {
                let pos = pos_of(k);
                let stamp = lane.stamp(pos);
                if last_stays && stage_of(stamp) == last {
                    break;
                }
                match self.fate::<ORDERED>(shape, w, lane, pos, stamp, p) {
                    Fate::On(key) => keys.push(key),
                    fate => {
                        other = Some(fate);
                        break;
                    }
                }
            }
            if keys.len() == burst.len() {
                self.keys = keys;
                return Sorted::On;
            }
        }
        let mut fates = std::mem::take(&mut self.fates);
        if !ORDERED {
            fates.clear();
        }
        fates.extend(keys.iter().map(|&k| Fate::On(k)));
        self.keys = keys;
        let mut moves = !fates.is_empty();
        if let Some(fate) = other {
            moves |= fate != Fate::Stays;
            fates.push(fate);
        }
        for (k, p) in burst.iter().enumerate().skip(fates.len()) {
            let pos = pos_of(k);
            let stamp = lane.stamp(pos);
            let fate = if last_stays && stage_of(stamp) == last {
                Fate::Stays
            } else {
                self.fate::<ORDERED>(shape, w, lane, pos, stamp, p)
            };
            moves |= fate != Fate::Stays;
            fates.push(fate);
        }
        self.fates = fates;
        if moves {
            Sorted::Mixed
        } else {
            Sorted::Stay
        }
    }

    /// The forwards at the front of `burst` out of the ordered stage of its first packet,
    /// at sequence numbers one after another: the whole burst, as a run (its keys in
    /// `keys`); or none, or a part, whose fates it puts in `fates` (with the fate of the
    /// packet that ended the part, if its route was asked), `keys` left empty.
    #[inline(always)]
    fn ordered_prefix(
        &mut self,
        lane: &Lane<T>,
        burst: &[T],
        pos_of: &impl Fn(usize) -> u64,
        keys: &mut Vec<u64>,
    ) -> Option<Sorted> {
        let shape = self.shape;
        if burst.is_empty() {
            return None;
        }
        let first = lane.stamp(pos_of(0));
        let stage = stage_of(first);
        if !shape.is_ordered(stage) {
            return None;
        }
        // The stamp each packet must have to be the next of the run, and the keys written
        // in place (no capacity check per packet), the vector cut to the run after.
        let mut want = first;
        let mut completed = false;
        keys.resize(burst.len(), 0);
        let mut n = 0;
        for (k, p) in burst.iter().enumerate() {
            if lane.stamp(pos_of(k)) != want {
                break;
            }
            let (to, tag) = (self.route)(p);
            check_move(stage, to, shape.len);
            if to == stage {
                completed = true;
                break;
            }
            keys[k] = shape.entry_key(to, tag);
            n = k + 1;
            want = next_stamp(want);
        }
        keys.truncate(n);
        if n == burst.len() {
            return Some(Sorted::OrderedRun {
                stage,
                first: seq_of(first),
            });
        }
        self.fates
            .extend(run_fates(stage, seq_of(first), keys.drain(..)));
        if completed {
            // The packet that ended the run completes at the stage, through its window.
            self.fates.push(Fate::Window {
                stage,
                seq: seq_of(want),
                on: None,
            });
        }
        None
    }

    /// Moves the packets of `returned[start..]` as `classify` sorted them; completions
    /// keep their order, and what windows release goes where it goes.
    fn move_sorted(
        &mut self,
        sorted: Sorted,
        returned: &mut Vec<T>,
        backlog: &mut Backlog<T>,
        start: usize,
    ) {
        match sorted {
            Sorted::Stay => {}
            Sorted::On => {
                // Every packet forwarded from an atomic or parallel stage: straight on.
                backlog.extend(returned.drain(start..).zip(self.keys.drain(..)));
            }
            Sorted::OrderedRun { stage, first } => {
                let win = self.stages[stage].window.as_mut().expect("ordered");
                if full_seq(win.oldest(), first) == win.oldest() {
                    // At the window's head: the run goes on whole, without a stop in the
                    // window, and the head moves past it (as `Reorder::take_burst` does
                    // for an ordered distributor).
                    let n = self.keys.len() as u64;
                    backlog.extend(returned.drain(start..).zip(self.keys.drain(..)));
                    win.advance(n, &mut self.released);
                    dispatch(&mut self.released, returned, backlog);
                } else {
                    let fates = run_fates(stage, first, self.keys.drain(..));
                    self.fates.clear();
                    self.fates.extend(fates);
                    self.move_mixed(returned, backlog, start);
                }
            }
            Sorted::Mixed => self.move_mixed(returned, backlog, start),
        }
    }

    /// Moves the packets of `returned[start..]` by their fates in `fates`.
    fn move_mixed(&mut self, returned: &mut Vec<T>, backlog: &mut Backlog<T>, start: usize) {
        // Moved out first (into a buffer kept between bursts): a packet that stays goes
        // back onto `returned`, behind the others. What windows release waits in
        // `released` while the fates that follow are windows' too, so it goes where it
        // goes in one move, in the order released (the order taking each packet by itself
        // would give).
        let fates = std::mem::take(&mut self.fates);
        let mut burst = std::mem::take(&mut self.mixed);
        burst.extend(returned.drain(start..));
        for (p, &fate) in burst.drain(..).zip(&fates) {
            if let Fate::Window { stage, seq, on } = fate {
                self.leave_window(p, stage, seq, on);
            } else {
                dispatch(&mut self.released, returned, backlog);
                self.take(p, fate, returned, backlog);
            }
        }
        dispatch(&mut self.released, returned, backlog);
        self.mixed = burst;
        self.fates = fates;
    }

    /// Takes one packet by its fate.
    fn take(&mut self, p: T, fate: Fate, returned: &mut Vec<T>, backlog: &mut Backlog<T>) {
        match fate {
            Fate::Stays => returned.push(p),
            Fate::On(k) => backlog.push_back(p, k),
            Fate::Window { stage, seq, on } => {
                self.leave_window(p, stage, seq, on);
                dispatch(&mut self.released, returned, backlog);
            }
        }
    }

    /// The fate of the packet last in `returned`, handed back at ordered stage's position
    /// `pos` (stamped `stamp`) by worker `w`: as for a burst, a panicking `route` leaves
    /// it for `collect` with its place in the window given up.
    #[inline(never)]
    fn ordered_fate(
        &mut self,
        w: usize,
        lane: &Lane<T>,
        pos: u64,
        stamp: u64,
        returned: &mut Vec<T>,
        backlog: &mut Backlog<T>,
    ) -> Fate {
        let (shape, p) = (self.shape, returned.last().expect("just pushed"));
        match catch_unwind(AssertUnwindSafe(|| {
            self.fate::<true>(shape, w, lane, pos, stamp, p)
        })) {
            Ok(fate) => fate,
            Err(panic) => {
                self.give_place_up(stamp, returned, backlog);
                resume_unwind(panic);
            }
        }
    }

    /// `p` leaves ordered `stage` (its stamp's sequence bits `seq`), completed (`on` is
    /// `None`) or forwarded by the key: into the stage's window, which releases what it
    /// can onto `released`.
    #[inline(always)]
    fn leave_window(&mut self, p: T, stage: usize, seq: u64, on: Option<u64>) {
        let leaving = match on {
            Some(k) => Leaving::On(p, k),
            None => Leaving::Done(p),
        };
        let win = self.stages[stage].window.as_mut().expect("ordered");
        win.put(full_seq(win.oldest(), seq), leaving, &mut self.released);
    }

    /// The packet at `stamp`'s position leaves unprocessed or is lost: at an ordered stage
    /// its place is given up.
    fn give_place_up(&mut self, stamp: u64, returned: &mut Vec<T>, backlog: &mut Backlog<T>) {
        if let Some(win) = self.stages[stage_of(stamp)].window.as_mut() {
            let seq = full_seq(win.oldest(), seq_of(stamp));
            win.skip(seq, &mut self.released);
            dispatch(&mut self.released, returned, backlog);
        }
    }

    /// [`took_burst`](Scheduling::took_burst) where packets may move: the order check of
    /// those at the last stage, then each other packet's fate.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn took_staged(
        &mut self,
        w: usize,
        lane: &mut Lane<T>,
        returned: &mut Vec<T>,
        backlog: &mut Backlog<T>,
        start: usize,
        at: u64,
        spread: Option<&[u64]>,
    ) {
        let pos_of = |k: usize| spread.map_or(at + k as u64, |s| s[k]);
        let each = spread.is_some() || cfg!(debug_assertions);
        let from = spread.is_none().then_some(at);
        let burst = &returned[start..];
        let sort = || {
            self.check_last(w, lane, burst, pos_of, each);
            self.classify(w, lane, burst, pos_of, from)
        };
        // If `route` panics, the burst leaves through `collect` as handed back, and gives
        // its places in ordered stages' windows up: none holds a later packet.
        match catch_unwind(AssertUnwindSafe(sort)) {
            Ok(sorted) => self.move_sorted(sorted, returned, backlog, start),
            Err(panic) => {
                for k in 0..returned.len() - start {
                    self.give_place_up(lane.stamp(pos_of(k)), returned, backlog);
                }
                resume_unwind(panic);
            }
        }
    }

    /// The order check of the packets a burst read that `classify` did not ask (those at a
    /// last stage that is not ordered), as an atomic distributor checks: every one in debug
    /// builds and past positions handed back out of order, one per burst otherwise.
    fn check_last(
        &mut self,
        w: usize,
        lane: &mut Lane<T>,
        burst: &[T],
        pos_of: impl Fn(usize) -> u64,
        each: bool,
    ) {
        let last = self.shape.len - 1;
        if !self.check_order || burst.is_empty() || self.shape.is_ordered(last) {
            return;
        }
        lane.probe = lane.probe.wrapping_add(PROBE_STEP);
        let probe = probe_offset(lane.probe, burst.len());
        let mut check = |k: usize| {
            let pos = pos_of(k);
            if stage_of(lane.stamp(pos)) == last {
                let (to, tag) = (self.route)(&burst[k]);
                lane.check(w, pos, key(to, tag));
            }
        };
        if each {
            (0..burst.len()).for_each(&mut check);
        } else {
            check(probe);
        }
    }
}

/// The fates of packets forwarded from ordered `stage` by `keys`, at the sequence numbers
/// (stamp bits) from `first` on, one after another.
fn run_fates(
    stage: usize,
    first: u64,
    keys: impl Iterator<Item = u64>,
) -> impl Iterator<Item = Fate> {
    keys.scan(first, move |seq, k| {
        let fate = Fate::Window {
            stage,
            seq: *seq,
            on: Some(k),
        };
        *seq = next_low(*seq);
        Some(fate)
    })
}

/// Whether the `n` packets of a burst handed back (the `k`-th at `pos_of(k)`, or at
/// `from + k` when `from` is given) were all sent to stage `last`. Without a branch per
/// packet when the positions follow each other.
#[inline(always)]
fn all_at<T>(
    lane: &Lane<T>,
    n: usize,
    pos_of: impl Fn(usize) -> u64,
    from: Option<u64>,
    last: usize,
) -> bool {
    match from {
        // The first packet first: a burst of forwards is told by it.
        Some(at) if n <= lane.stamps.len() && stage_of(lane.stamp(at)) == last => {
            let (a, b) = lane.stamp_runs(at, n);
            let off = |run: &[u64]| run.iter().fold(0, |acc, &t| acc | (stage_of(t) ^ last));
            off(a) | off(b) == 0
        }
        Some(_) if n > 0 => false,
        _ => (0..n).all(|k| stage_of(lane.stamp(pos_of(k))) == last),
    }
}

#[allow(private_interfaces)] // sealed: nameable only inside the crate
impl<T, R> Scheduling<T> for Pipeline<T, R>
where
    R: FnMut(&T) -> (usize, u64),
{
    #[inline(always)]
    fn is_ordered(&self) -> bool {
        false
    }

    #[inline(always)]
    fn route_call(d: &mut Distributor<T, Self>, pkts: &mut Vec<T>) -> usize {
        d.route_pipeline(pkts)
    }

    /// Packets given back with `NoWorkers` give up the places they held in ordered
    /// stages' windows.
    fn give_up(&mut self, notes: VecDeque<u64>, returned: &mut Vec<T>, backlog: &mut Backlog<T>) {
        let held: Vec<(usize, u64)> = held_seqs(&notes, &self.stages).collect();
        for (stage, seq) in held {
            self.give_place_up(key(stage, seq), returned, backlog);
        }
    }

    /// Every hand-back's stage is read from its position.
    #[inline(always)]
    fn wants_positions(&self) -> bool {
        true
    }

    /// Each packet's fate (see [`classify`](Pipeline::classify)), every route asked for
    /// before any packet moves: if `route` panics, the burst stays for `collect`. In a
    /// pipeline of one stage that is not ordered every packet completes where it is: the
    /// order check of an atomic distributor, inline.
    #[inline(always)]
    fn took_burst(
        &mut self,
        w: usize,
        lane: &mut Lane<T>,
        returned: &mut Vec<T>,
        backlog: &mut Backlog<T>,
        start: usize,
        at: u64,
        spread: Option<&[u64]>,
    ) {
        if self.shape.len > 1 || self.shape.is_ordered(0) {
            self.took_staged(w, lane, returned, backlog, start, at, spread);
        } else if self.check_order {
            let route = &mut self.route;
            lane.check_burst(w, &returned[start..], at, spread, |p| {
                let (to, tag) = route(p);
                key(to, tag)
            });
        }
    }

    fn dropped(
        &mut self,
        lane: &Lane<T>,
        pos: u64,
        returned: &mut Vec<T>,
        backlog: &mut Backlog<T>,
    ) {
        self.give_place_up(lane.stamp(pos), returned, backlog);
    }

    /// A reschedule (its stage again, or a later one): checked against the older packets
    /// of its flow at an atomic stage (one that overtook them would break the flow's
    /// order), its place at an ordered stage given up (it enters again as new); its note
    /// is the stage it leaves, its route asked for when it is routed.
    fn rescheduled(
        &mut self,
        w: usize,
        lane: &Lane<T>,
        pos: u64,
        _epoch: u64,
        returned: &mut Vec<T>,
        backlog: &mut Backlog<T>,
    ) -> u64 {
        let stamp = lane.stamp(pos);
        let kind = self.stages[stage_of(stamp)].kind;
        if self.check_order && kind == StageType::Atomic && !lane.frozen && pos > lane.completed {
            lane.check_overtake(w, pos);
        }
        self.give_place_up(stamp, returned, backlog);
        self.unrouted = true;
        NEEDS_ROUTE | (stamp & !TAG_BITS)
    }

    /// Kept and accounted first; then its fate: a forward at an atomic stage is checked
    /// against the older packets of its flow, which it must not overtake (every one); a
    /// completion there one in 16 in release builds, as for an atomic distributor.
    fn done_at(
        &mut self,
        w: usize,
        lane: &mut Lane<T>,
        pos: u64,
        pkt: T,
        returned: &mut Vec<T>,
        backlog: &mut Backlog<T>,
    ) {
        returned.push(pkt);
        let stamp = lane.stamp(pos);
        let overtaking = !lane.frozen && pos > lane.completed;
        lane.complete_at(w, pos, false);
        let p = returned.last().expect("just pushed");
        let fate = if self.shape.is_ordered(stage_of(stamp)) {
            self.ordered_fate(w, lane, pos, stamp, returned, backlog)
        } else {
            self.fate::<true>(self.shape, w, lane, pos, stamp, p)
        };
        let atomic = self.stages[stage_of(stamp)].kind == StageType::Atomic;
        let check = self.check_order && atomic && overtaking;
        if check && (fate != Fate::Stays || lane.sample_ooo()) {
            lane.check_overtake(w, pos);
        }
        if fate != Fate::Stays {
            let p = returned.pop().expect("just pushed");
            self.take(p, fate, returned, backlog);
        }
    }

    /// Noted with its stamp (it goes back to the same stage and flow, or keeps its place
    /// at an ordered stage), then checked at an atomic or parallel stage.
    fn unprocessed(&mut self, w: usize, lane: &mut Lane<T>, pos: u64) {
        let stamp = lane.stamp(pos);
        lane.leaving_notes.push(stamp);
        if self.check_order && self.stages[stage_of(stamp)].kind != StageType::Ordered {
            let (s, t) = (self.route)(lane.leaving.last().expect("just pushed"));
            lane.check(w, pos, key(s, t));
        }
    }

    fn never_received(lane: &Lane<T>, pos: u64) -> u64 {
        lane.stamp(pos)
    }

    /// The packets held (the `n` oldest positions not handed back) give their places at
    /// ordered stages up.
    fn lost(&mut self, lane: &Lane<T>, n: u64, returned: &mut Vec<T>, backlog: &mut Backlog<T>) {
        for pos in unmarked_from(lane, n) {
            self.give_place_up(lane.stamp(pos), returned, backlog);
        }
    }

    fn window(&self) -> Option<u64> {
        None
    }
}
