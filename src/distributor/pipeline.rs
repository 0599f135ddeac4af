//! Pipeline scheduling: several stages in one distributor, each atomic (a flow on one
//! worker at a time, in order) or parallel (any worker with credit), and packets that
//! move from stage to stage when a worker forwards them (the queues of one DPDK event
//! device, of schedule type `ATOMIC` or `PARALLEL`, with workers that forward events from
//! queue to queue). The worker-reschedule path carries a forward: a worker sets the
//! packet's next stage (and, if it likes, a new flow), hands it back with
//! [`Worker::forward`](super::Worker::forward), and the distributor routes it again by the
//! stage and flow that `route` now gives.
//!
//! One flow table serves every atomic stage: its key is the stage in the top bits and the
//! flow tag's low bits below, so a flow of one stage is not the same flow at the next
//! (two tags that differ only in the top bits share a key: their packets are then kept in
//! order together, which is stricter, never wrong; the table hashes keys itself). The lanes stamp each position with that key,
//! so a hand-back tells which stage its packet was at.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use core::fmt;

use super::backlog::Backlog;
use super::config::{Config, ConfigError};
use super::distribute::PutBack;
use super::flows::{FlowTable, TagHasher, FLOW_TABLE_SOFT_LIMIT};
use super::lanes::{probe_offset, Lane, Pick, Router, PROBE_STEP};
use super::schedule::sealed::Scheduling;
use super::stats::{ACCEPTED, BACKPRESSURED};
use super::worker::Worker;
use super::Distributor;

/// The most stages one pipeline has.
///
/// ```
/// assert_eq!(flowline::distributor::MAX_STAGES, 64);
/// ```
pub const MAX_STAGES: usize = 64;

/// Bits of a key below the stage (six stage bits above them; the top bit marks a backlog
/// note still to be routed).
const STAGE_SHIFT: u32 = 57;

/// A backlog note with this bit set holds the stage its packet left (a reschedule, whose
/// route is asked for when it is routed); without it, the key to route the packet by.
const NEEDS_ROUTE: u64 = 1 << 63;

/// How a pipeline stage schedules its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StageType {
    /// One flow on one worker at a time, its packets processed in the order they entered
    /// the stage (they enter it in the order the previous stage forwarded them).
    Atomic,
    /// Any worker with credit takes any packet: nothing promised about order or place.
    Parallel,
}

/// The pipeline schedule of a [`Distributor`] (made by [`new_pipeline`], which says what
/// it promises): stages of [`StageType`], each packet routed by the stage and flow its
/// `route` gives.
pub struct Pipeline<R> {
    route: R,
    stages: Box<[Stage]>,
    flows: FlowTable,
    /// Keys refused in the current routing pass: later packets of those flows wait too.
    blocked: HashSet<u64, BuildHasherDefault<TagHasher>>,
    /// Scratch for the keys of a burst handed back.
    keys: Vec<u64>,
    check_order: bool,
    /// New packets are admitted while fewer than this many are inside.
    limit: usize,
}

/// A stage: its type, and the packets that entered it, ever (together: one bounds check
/// per packet routed).
#[derive(Clone, Copy, Debug)]
struct Stage {
    kind: StageType,
    entered: u64,
}

impl<R> fmt::Debug for Pipeline<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("stages", &self.stages)
            .field("flows", &self.flows.len())
            .field("admission_limit", &self.limit)
            .finish_non_exhaustive()
    }
}

/// The tag bits of a key.
const TAG_BITS: u64 = (1 << STAGE_SHIFT) - 1;

impl<R> Pipeline<R> {
    /// Whether the stage a stamp names is atomic.
    #[inline(always)]
    fn atomic(&self, stamp: u64) -> bool {
        self.stages[stage_of(stamp)].kind == StageType::Atomic
    }
}

/// The flow-table key and stamp of a packet at `stage` of flow `tag`.
#[inline(always)]
fn key(stage: usize, tag: u64) -> u64 {
    ((stage as u64) << STAGE_SHIFT) | (tag & TAG_BITS)
}

/// The stage a stamp names.
#[inline(always)]
fn stage_of(stamp: u64) -> usize {
    ((stamp & !NEEDS_ROUTE) >> STAGE_SHIFT) as usize
}

/// Makes a **pipeline** distributor of `stages` (in order: a packet moves only to its
/// stage or a later one) and its `config.workers` workers. `route` gives a packet's stage
/// and flow tag: the stage a new packet enters (stage 0, usually), and, for a packet a
/// worker forwards, the stage it goes to next (so the packet carries its stage: the
/// worker that receives it reads it there).
///
/// Packets leave the pipeline when a worker hands them back processed
/// ([`Worker::done`] and the other completing calls), and come out of
/// [`collect`](Distributor::collect); a worker moves a packet on with
/// [`Worker::forward`] (or [`forward_at`](Worker::forward_at)). Exactly once across the
/// whole pipeline, as with one stage: leaving, re-joining, added and removed workers, and
/// dropped handles (their packets counted as lost), work as they do for any
/// distributor. At an atomic stage a flow is on at most one worker at a time and its
/// packets are processed in the order they entered the stage; a worker that forwards them
/// in order (the in-order calls, or `forward_at` without overtaking its own flow, which
/// the order check enforces) keeps that order into the next stage.
///
/// New packets are admitted while fewer than an admission limit are inside (at workers,
/// staged, or forwarded and waiting to be routed; see
/// [`set_admission_limit`](Distributor::set_admission_limit)); a forward is always taken,
/// so a full pipeline drains. Forwarded packets are routed before new ones. Every worker
/// serves every stage, and stages have no priorities.
///
/// # Errors
///
/// As [`new`](crate::distributor::new), and [`ConfigError::BadStages`] for no stage or
/// more than [`MAX_STAGES`].
///
/// # Panics
///
/// The calls that route ([`distribute`](Distributor::distribute) and those that read
/// hand-backs) panic if `route` panics, gives a stage past the last, or sends a packet
/// back to an earlier stage (a bug in the worker's code). A packet at the last stage can
/// only complete: the order check (see [`set_order_check`](Distributor::set_order_check))
/// compares its route with the stage and flow it was sent with. If `route` panics while
/// hand-backs are read, the packets of that burst leave through `collect` as handed back:
/// none is lost.
///
/// ```
/// use flowline::distributor::{self, Config, StageType};
/// #[derive(Debug, PartialEq)]
/// struct Pkt { stage: usize, flow: u64, hops: u32 }
/// let stages = [StageType::Atomic, StageType::Parallel];
/// let (mut d, mut ws) = distributor::new_pipeline(
///     Config::default().workers(1).credit(8),
///     &stages,
///     |p: &Pkt| (p.stage, p.flow),
/// ).unwrap();
/// d.distribute(&mut vec![Pkt { stage: 0, flow: 7, hops: 0 }]).unwrap();
/// let (mut b, mut out) = (Vec::new(), Vec::new());
/// while out.is_empty() {
///     ws[0].recv_burst(&mut b, 8).unwrap();
///     for mut p in b.drain(..) {
///         p.hops += 1;
///         if p.stage == 0 {
///             p.stage = 1;
///             ws[0].forward(p).unwrap(); // on to the parallel stage
///         } else {
///             ws[0].done(p).unwrap(); // out of the pipeline
///         }
///     }
///     d.distribute(&mut Vec::new()).unwrap();
///     d.collect(&mut out);
/// }
/// assert_eq!(out, [Pkt { stage: 1, flow: 7, hops: 2 }]);
/// assert_eq!(d.stage_entries(), [1, 1]);
/// ```
#[allow(clippy::type_complexity)]
pub fn new_pipeline<T, R>(
    config: Config,
    stages: &[StageType],
    route: R,
) -> Result<(Distributor<T, Pipeline<R>>, Vec<Worker<T>>), ConfigError>
where
    R: FnMut(&T) -> (usize, u64),
{
    if stages.is_empty() || stages.len() > MAX_STAGES {
        return Err(ConfigError::BadStages(stages.len()));
    }
    let sched = Pipeline {
        route,
        stages: stages
            .iter()
            .map(|&kind| Stage { kind, entered: 0 })
            .collect(),
        flows: FlowTable::default(),
        blocked: HashSet::default(),
        keys: Vec::new(),
        check_order: true,
        limit: config.workers.saturating_mul(config.credit),
    };
    Distributor::build(config, sched)
}

impl<T, R> Distributor<T, Pipeline<R>>
where
    R: FnMut(&T) -> (usize, u64),
{
    /// Sets how many packets may be inside the pipeline (at workers, staged, or forwarded
    /// and waiting) for a call to admit new ones (default: `workers * credit` of the
    /// configuration). Forwards are taken whatever the count, so a pipeline that is full
    /// drains; new packets wait with the caller, as when credit runs out.
    ///
    /// ```
    /// use flowline::distributor::{self, Config, StageType};
    /// let (mut d, _ws) = distributor::new_pipeline(
    ///     Config::default().workers(1).credit(8), &[StageType::Atomic], |p: &u64| (0, *p),
    /// ).unwrap();
    /// assert_eq!(d.admission_limit(), 8);
    /// d.set_admission_limit(2);
    /// let mut burst = vec![1, 2, 3];
    /// assert_eq!(d.distribute(&mut burst), Ok(2));
    /// assert_eq!(burst, [3]);
    /// ```
    pub fn set_admission_limit(&mut self, packets: usize) {
        self.sched.limit = packets;
    }

    /// How many packets may be inside for new ones to be admitted.
    pub fn admission_limit(&self) -> usize {
        self.sched.limit
    }

    /// Packets that entered each stage so far (new ones at their first stage, forwarded
    /// ones at the next), by stage.
    pub fn stage_entries(&self) -> Vec<u64> {
        self.sched.stages.iter().map(|s| s.entered).collect()
    }

    /// The stages, as made.
    pub fn stages(&self) -> Vec<StageType> {
        self.sched.stages.iter().map(|s| s.kind).collect()
    }

    /// Turns the hand-back order check on or off, as for an atomic distributor
    /// ([`Distributor::set_order_check`]): it compares a packet handed back with the stage
    /// and flow of the packet sent at that position, and a forward or completion out of
    /// order with the older packets of its flow at an atomic stage.
    pub fn set_order_check(&mut self, on: bool) {
        self.sched.check_order = on;
    }

    /// A call's routing pass (a worker is active): the forwarded packets, then new input
    /// while the admission limit allows.
    fn route_pipeline(&mut self, pkts: &mut Vec<T>) -> usize {
        if !self.sched.blocked.is_empty() {
            self.sched.blocked.clear();
        }
        self.route_forwards();
        let room = self.sched.limit.saturating_sub(self.in_flight());
        let mut input = std::mem::take(&mut self.scratch);
        std::mem::swap(&mut input, pkts);
        let len = input.len();
        let g = PutBack {
            rest: input.drain(..),
            next: 0,
            pkts,
            stats: &mut self.stats,
            finished: false,
        };
        let slack = if self.publish_all { 0 } else { self.batch - 1 };
        let Pipeline {
            route,
            stages,
            flows,
            blocked,
            ..
        } = &mut self.sched;
        let mut pass = Pass {
            router: Router {
                lanes: &mut self.lanes,
                flows,
                pick: self.pick,
                credit: self.credit,
                slack,
            },
            stages,
            blocked,
        };
        input_pass(g, &mut pass, route, room);
        self.pick = pass.router.pick;
        let accepted = (len - pkts.len()) as u64;
        self.scratch = input;
        let mut delta = [0u64; 5];
        delta[ACCEPTED] = accepted;
        delta[BACKPRESSURED] = pkts.len() as u64;
        // Counted before the publication, whose waker may panic (as for one stage).
        self.stats.add_all(delta);
        let lanes = &self.lanes;
        self.sched
            .flows
            .prune_idle(|w| lanes[w].completed, FLOW_TABLE_SOFT_LIMIT);
        self.push_staged(true, self.publish_all);
        accepted as usize
    }

    /// Routes the forwarded packets (the backlog), oldest first, to their next stage;
    /// those that find no credit wait, and so do later ones of their flow.
    fn route_forwards(&mut self) {
        // A new pass: completions read since the last one may have lowered any load.
        self.pick = Pick::NONE;
        if self.backlog.is_empty() {
            return;
        }
        // The reschedules' routes first, before any packet moves: a panic (the user's
        // `route`, or a stage it gives that is out of range or behind) leaves the backlog
        // as it was, with the notes already routed.
        let n = self.sched.stages.len();
        for (p, note) in self.backlog.iter_mut() {
            if *note & NEEDS_ROUTE != 0 {
                let (stage, tag) = (self.sched.route)(p);
                check_move(stage_of(*note), stage, n);
                *note = key(stage, tag);
            }
        }
        let slack = self.slack();
        let Pipeline {
            stages,
            flows,
            blocked,
            ..
        } = &mut self.sched;
        let mut pass = Pass {
            router: Router {
                lanes: &mut self.lanes,
                flows,
                pick: self.pick,
                credit: self.credit,
                slack,
            },
            stages,
            blocked,
        };
        for _ in 0..self.backlog.len() {
            let (p, k) = self.backlog.pop_front().expect("counted");
            let stage = stage_of(k);
            let kind = pass.kind(stage);
            if let Err(p) = pass.place_key(p, stage, kind, k, true) {
                self.backlog.push_back(p, k);
            }
        }
        self.pick = pass.router.pick;
    }
}

/// What a routing pass of a pipeline uses, borrowed apart from the distributor.
struct Pass<'p, T> {
    router: Router<'p, T>,
    stages: &'p mut [Stage],
    blocked: &'p mut HashSet<u64, BuildHasherDefault<TagHasher>>,
}

impl<T> Pass<'_, T> {
    /// The type of `stage`; a clear panic if there is no such stage.
    #[inline(always)]
    fn kind(&self, stage: usize) -> StageType {
        match self.stages.get(stage) {
            Some(s) => s.kind,
            None => bad_stage(stage, self.stages.len()),
        }
    }

    /// Places `p` at `stage` (of type `kind`) as a packet of flow `tag`, or gives it back:
    /// no credit, or (with `blocking`) an older packet of its flow was refused in this
    /// pass.
    #[inline(always)]
    fn place(
        &mut self,
        p: T,
        stage: usize,
        kind: StageType,
        tag: u64,
        blocking: bool,
    ) -> Result<(), T> {
        self.place_key(p, stage, kind, key(stage, tag), blocking)
    }

    /// [`place`](Self::place) by the flow's key `k`.
    #[inline(always)]
    fn place_key(
        &mut self,
        p: T,
        stage: usize,
        kind: StageType,
        k: u64,
        blocking: bool,
    ) -> Result<(), T> {
        let placed = match kind {
            StageType::Atomic => {
                if blocking && !self.blocked.is_empty() && self.blocked.contains(&k) {
                    return Err(p);
                }
                self.router.route(p, k).map_err(|p| {
                    self.blocked.insert(k);
                    p
                })
            }
            StageType::Parallel => self.router.route_any(p, k),
        };
        if placed.is_ok() {
            if let Some(s) = self.stages.get_mut(stage) {
                s.entered += 1;
            }
        }
        placed
    }
}

/// The pass over new input: takes packets from `g` in order while fewer than `room` were
/// taken, and places them or puts them back. The guard `g` ends here (what is left goes
/// back onto the caller's input).
fn input_pass<T, R>(mut g: PutBack<'_, '_, T>, pass: &mut Pass<'_, T>, route: &mut R, room: usize)
where
    R: FnMut(&T) -> (usize, u64),
{
    let mut placed = 0;
    // Until a packet is refused, no flow is blocked: no look at the blocked set.
    let mut blocking = false;
    while placed < room {
        let Some(first) = g.rest.as_slice().first() else {
            break;
        };
        // Routed in place: if `route` panics (or names no stage), the packet is still in
        // the drain and goes back.
        let (stage, tag) = route(first);
        let kind = pass.kind(stage);
        let Some(p) = g.rest.next() else { break };
        g.next += 1;
        match pass.place(p, stage, kind, tag, blocking) {
            Ok(()) => placed += 1,
            Err(p) => {
                g.pkts.push(p);
                blocking = true;
            }
        }
    }
    g.finished = true;
}

/// Panics unless a packet at stage `from` may go to `to`, one of `n` stages: its own
/// stage or a later one.
#[inline(always)]
fn check_move(from: usize, to: usize, n: usize) {
    if to >= n {
        bad_stage(to, n);
    }
    if to < from {
        moved_back(from, to);
    }
}

#[cold]
#[inline(never)]
fn bad_stage(stage: usize, n: usize) -> ! {
    panic!(
        "pipeline: `route` gave stage {stage}, but the pipeline has {n} stages (0 to {})",
        n - 1
    )
}

#[cold]
#[inline(never)]
fn moved_back(from: usize, to: usize) -> ! {
    panic!(
        "pipeline: a packet at stage {from} was forwarded back to stage {to}; a forward goes to \
         the packet's own stage or a later one"
    )
}

impl<R> Pipeline<R> {
    /// Asks the route of each packet of `burst` (handed back by worker `w`, the `k`-th at
    /// position `pos_of(k)`) that is not at the last stage, and notes its key in `keys`
    /// (`NEEDS_ROUTE` for one that completes); returns how many go on. Moves nothing.
    fn classify<T>(
        &mut self,
        w: usize,
        lane: &Lane<T>,
        burst: &[T],
        pos_of: impl Fn(usize) -> u64,
    ) -> usize
    where
        R: FnMut(&T) -> (usize, u64),
    {
        let last = self.stages.len() - 1;
        self.keys.clear();
        let mut forwards = 0;
        for (k, p) in burst.iter().enumerate() {
            let pos = pos_of(k);
            let stamp = lane.stamp(pos);
            let from = stage_of(stamp);
            if from == last {
                self.keys.push(NEEDS_ROUTE);
                continue;
            }
            let (to, tag) = (self.route)(p);
            check_move(from, to, self.stages.len());
            let key = key(to, tag);
            if to == from {
                if self.check_order {
                    lane.check(w, pos, key);
                }
                self.keys.push(NEEDS_ROUTE);
            } else {
                forwards += 1;
                self.keys.push(key);
            }
        }
        forwards
    }

    /// Moves the `forwards` packets of `returned[start..]` that `keys` names to the
    /// backlog, in order; the completions keep theirs.
    fn move_forwards<T>(
        &self,
        returned: &mut Vec<T>,
        backlog: &mut Backlog<T>,
        start: usize,
        forwards: usize,
    ) {
        if forwards == self.keys.len() {
            for (p, &k) in returned.drain(start..).zip(&self.keys) {
                backlog.push_back(p, k);
            }
            return;
        }
        let burst: Vec<T> = returned.drain(start..).collect();
        for (p, &k) in burst.into_iter().zip(&self.keys) {
            if k == NEEDS_ROUTE {
                returned.push(p);
            } else {
                backlog.push_back(p, k);
            }
        }
    }
}

#[allow(private_interfaces)] // sealed: nameable only inside the crate
impl<T, R> Scheduling<T> for Pipeline<R>
where
    R: FnMut(&T) -> (usize, u64),
{
    #[inline(always)]
    fn is_ordered(&self) -> bool {
        false
    }

    fn route_call(d: &mut Distributor<T, Self>, pkts: &mut Vec<T>) -> usize {
        d.route_pipeline(pkts)
    }

    #[inline(always)]
    fn give_up(&mut self, _notes: std::collections::VecDeque<u64>, _returned: &mut Vec<T>) {}

    /// Every hand-back's stage is read from its position.
    #[inline(always)]
    fn wants_positions(&self) -> bool {
        true
    }

    /// Each packet before the last stage is asked its route: a later stage (a forward,
    /// moved to the backlog with its key) or its own (completed, checked against the stamp
    /// of its position). Every route is asked for before any packet moves: if `route`
    /// panics, the burst stays where it is. Packets at the last stage can only complete:
    /// checked as an atomic distributor checks (all in debug builds and past positions
    /// handed back out of order, one per burst otherwise).
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
        let n = returned.len() - start;
        let pos_of = |k: usize| spread.map_or(at + k as u64, |s| s[k]);
        let last = self.stages.len() - 1;
        let forwards = if last > 0 {
            self.classify(w, lane, &returned[start..], pos_of)
        } else {
            0
        };
        if self.check_order && n > 0 {
            let each = spread.is_some() || cfg!(debug_assertions);
            lane.probe = lane.probe.wrapping_add(PROBE_STEP);
            let probe = probe_offset(lane.probe, n);
            for k in (0..n).filter(|&k| each || k == probe) {
                let pos = pos_of(k);
                if stage_of(lane.stamp(pos)) == last {
                    let (to, tag) = (self.route)(&returned[start + k]);
                    lane.check(w, pos, key(to, tag));
                }
            }
        }
        if forwards > 0 {
            self.move_forwards(returned, backlog, start, forwards);
        }
    }

    #[inline(always)]
    fn dropped(&mut self, _lane: &Lane<T>, _pos: u64, _returned: &mut Vec<T>) {}

    /// A reschedule (its stage again, or a later one): checked against the older packets
    /// of its flow at an atomic stage (one that overtook them would break the flow's
    /// order); its note is the stage it leaves, its route asked for when it is routed.
    fn rescheduled(
        &mut self,
        w: usize,
        lane: &Lane<T>,
        pos: u64,
        _epoch: u64,
        _returned: &mut Vec<T>,
    ) -> u64 {
        let stamp = lane.stamp(pos);
        if self.check_order && !lane.frozen && pos > lane.completed && self.atomic(stamp) {
            lane.check_overtake(w, pos);
        }
        NEEDS_ROUTE | (stamp & !TAG_BITS)
    }

    /// Kept and accounted first; then its route says whether it goes on (to the backlog,
    /// checked at an atomic stage against the older packets of its flow, which it must not
    /// overtake) or is completed (sampled in release builds, as for an atomic
    /// distributor).
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
        let (to, tag) = (self.route)(returned.last().expect("just pushed"));
        let from = stage_of(stamp);
        check_move(from, to, self.stages.len());
        let atomic = self.atomic(stamp);
        if to > from {
            if self.check_order && atomic && overtaking {
                lane.check_overtake(w, pos);
            }
            let p = returned.pop().expect("just pushed");
            backlog.push_back(p, key(to, tag));
        } else if self.check_order && atomic && lane.sample_ooo() {
            if overtaking {
                lane.check_overtake(w, pos);
            }
            lane.check(w, pos, key(to, tag));
        }
    }

    /// Noted with the key it was sent by (it goes back to the same stage and flow), then
    /// checked.
    fn unprocessed(&mut self, w: usize, lane: &mut Lane<T>, pos: u64) {
        lane.leaving_notes.push(lane.stamp(pos));
        if self.check_order {
            let (s, t) = (self.route)(lane.leaving.last().expect("just pushed"));
            lane.check(w, pos, key(s, t));
        }
    }

    fn never_received(lane: &Lane<T>, pos: u64) -> u64 {
        lane.stamp(pos)
    }

    #[inline(always)]
    fn lost(&mut self, _lane: &Lane<T>, _n: u64, _returned: &mut Vec<T>) {}

    fn window(&self) -> Option<u64> {
        None
    }
}
