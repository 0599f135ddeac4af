//! Pipeline scheduling: several stages in one distributor, each atomic (a flow on one
//! worker at a time, in order), ordered (any worker, the order restored as packets leave
//! the stage) or parallel (any worker with credit), and packets that move from stage to
//! stage when a worker forwards them: the queues of one DPDK event device, of schedule
//! type `ATOMIC`, `ORDERED` or `PARALLEL`, with workers that forward events from queue to
//! queue. A forward is a hand-back like a completion: the worker sets the packet's next
//! stage (and, if it likes, a new flow) and hands it back, and the distributor tells the
//! two apart by the stage `route` now gives.
//!
//! One flow table serves every atomic stage: its key is the stage in the top bits and the
//! flow tag's low bits below (`keys`), so a flow of one stage is not the same flow at the
//! next (two tags that differ only in the top bits share a key: their packets are then
//! kept in order together, which is stricter, never wrong). The lanes stamp each position
//! with that key, or with the stage and its sequence number at an ordered stage, so a
//! hand-back tells which stage its packet was at. Routing is in `routing`, what hand-backs
//! mean in `handbacks`, a stage and its reorder window in `stage`.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use core::fmt;

use super::config::{Config, ConfigError};
use super::flows::{FlowTable, TagHasher};
use super::reorder::MAX_WINDOW;
use super::worker::Worker;
use super::Distributor;

mod handbacks;
mod keys;
mod links;
mod routing;
mod stage;

use handbacks::Fate;
use links::Links;
pub use links::PipelineError;
use stage::{Leaving, Shape, Stage};

/// The most stages one pipeline has.
///
/// ```
/// assert_eq!(flowline::distributor::MAX_STAGES, 64);
/// ```
pub const MAX_STAGES: usize = 64;

/// How a pipeline stage schedules its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StageType {
    /// One flow on one worker at a time, its packets processed in the order they entered
    /// the stage (they enter it in the order the previous stage let them go).
    Atomic,
    /// Any worker with credit takes any packet (bursts kept together), and the packets
    /// leave the stage (forwarded or completed) in the order they entered it, through a
    /// reorder window of four times the workers' credit.
    Ordered,
    /// Any worker with credit takes any packet: nothing promised about order or place.
    Parallel,
}

/// The pipeline schedule of a [`Distributor`] (made by [`new_pipeline`], which says what
/// it promises): stages of [`StageType`], each packet routed by the stage and flow its
/// `route` gives.
pub struct Pipeline<T, R> {
    route: R,
    stages: Box<[Stage<T>]>,
    flows: FlowTable,
    /// Keys refused in the current routing pass: later packets of those flows wait too.
    blocked: HashSet<u64, BuildHasherDefault<TagHasher>>,
    /// Scratch: the fates of a burst handed back.
    fates: Vec<Fate>,
    /// Scratch: the keys of a burst handed back whose packets all go on.
    keys: Vec<u64>,
    /// Which stages are ordered, and how many.
    shape: Shape,
    /// Whether the backlog may hold reschedules whose route is still to be asked.
    unrouted: bool,
    /// Scratch: a burst handed back whose packets go different ways.
    mixed: Vec<T>,
    /// Scratch: what an ordered stage's window released.
    released: Vec<Leaving<T>>,
    check_order: bool,
    /// New packets are admitted while fewer than this many are inside.
    limit: usize,
    /// Which stages each worker serves.
    links: Links,
    /// Whether stages have different priorities.
    prioritized: bool,
}

impl<T, R> fmt::Debug for Pipeline<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<StageType> = self.stages.iter().map(|s| s.kind).collect();
        f.debug_struct("Pipeline")
            .field("stages", &kinds)
            .field("flows", &self.flows.len())
            .field("admission_limit", &self.limit)
            .finish_non_exhaustive()
    }
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
/// hand-backs are read, the packets of that burst leave through `collect` as handed back,
/// none lost, and give up their places in ordered stages (the packets behind them go on).
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
) -> Result<(Distributor<T, Pipeline<T, R>>, Vec<Worker<T>>), ConfigError>
where
    R: FnMut(&T) -> (usize, u64),
{
    if stages.is_empty() || stages.len() > MAX_STAGES {
        return Err(ConfigError::BadStages(stages.len()));
    }
    let window = config
        .workers
        .saturating_mul(config.credit)
        .saturating_mul(4)
        .clamp(1, MAX_WINDOW);
    let sched = Pipeline {
        route,
        stages: stages
            .iter()
            .map(|&kind| Stage::new(kind, window))
            .collect::<Result<_, _>>()?,
        flows: FlowTable::default(),
        blocked: HashSet::default(),
        fates: Vec::new(),
        keys: Vec::new(),
        shape: Shape::new(stages),
        unrouted: false,
        mixed: Vec::new(),
        released: Vec::new(),
        check_order: true,
        limit: config.workers.saturating_mul(config.credit),
        links: Links::default(),
        prioritized: false,
    };
    Distributor::build(config, sched)
}

impl<T, R> Distributor<T, Pipeline<T, R>>
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

    /// Makes worker `worker` serve `stages` (and no other), as an event device's port is
    /// linked to queues; every worker serves every stage until linked, and one added at
    /// run time does too. Packets a worker holds are not moved: an atomic stage's flow in
    /// flight at a worker that no longer serves it stays there until it is idle. A stage
    /// that no active worker serves holds its packets (nothing is lost, nothing waits
    /// elsewhere because of them) until one is linked to it.
    ///
    /// # Errors
    ///
    /// [`PipelineError::NoSuchWorker`] or [`PipelineError::NoSuchStage`]; nothing changes.
    ///
    /// ```
    /// use flowline::distributor::{self, Config, StageType};
    /// let (mut d, mut ws) = distributor::new_pipeline(
    ///     Config::default().workers(2).credit(8),
    ///     &[StageType::Parallel, StageType::Parallel],
    ///     |p: &(usize, u64)| *p,
    /// ).unwrap();
    /// d.link(0, &[0]).unwrap(); // worker 0: stage 0 only
    /// d.link(1, &[1]).unwrap(); // worker 1: stage 1 only
    /// assert_eq!(d.links(1), Some(vec![1]));
    /// d.distribute(&mut vec![(0, 1), (0, 2)]).unwrap();
    /// let mut b = Vec::new();
    /// assert_eq!(ws[1].recv_burst(&mut b, 8), Ok(0));
    /// assert_eq!(ws[0].recv_burst(&mut b, 8), Ok(2));
    /// ```
    pub fn link(&mut self, worker: usize, stages: &[usize]) -> Result<(), PipelineError> {
        if worker >= self.lanes.len() || self.lanes[worker].removed {
            return Err(PipelineError::NoSuchWorker(worker));
        }
        let n = self.sched.stages.len();
        let mut mask = 0u64;
        for &s in stages {
            if s >= n {
                return Err(PipelineError::NoSuchStage(s));
            }
            mask |= 1 << s;
        }
        let every = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        self.sched.links.set(worker, mask, every);
        // A pick kept under the old links does not hold under these.
        self.pick = crate::distributor::lanes::Pick::NONE;
        Ok(())
    }

    /// The stages worker `worker` serves (`None` if there is no such worker).
    pub fn links(&self, worker: usize) -> Option<Vec<usize>> {
        let there = worker < self.lanes.len() && !self.lanes[worker].removed;
        there.then(|| self.sched.links.of(worker, self.sched.stages.len()))
    }

    /// Sets `stage`'s priority (0 for every stage at first): in each routing pass the
    /// packets forwarded to stages of a higher priority are placed first, so they take
    /// the workers' credit first; new input comes after every forward. Strict: while
    /// packets of higher-priority stages keep every worker's credit taken, those of lower
    /// ones wait (nothing bounds the wait but the admission limit, which stops new input
    /// while the pipeline is full, so a pipeline fed only through its first stage drains).
    ///
    /// # Errors
    ///
    /// [`PipelineError::NoSuchStage`].
    ///
    /// ```
    /// use flowline::distributor::{self, Config, StageType};
    /// let (mut d, _ws) = distributor::new_pipeline(
    ///     Config::default().workers(1).credit(8),
    ///     &[StageType::Atomic, StageType::Atomic],
    ///     |p: &(usize, u64)| *p,
    /// ).unwrap();
    /// d.set_priority(1, 7).unwrap(); // drain the later stage first
    /// assert_eq!(d.priority(1), Some(7));
    /// ```
    pub fn set_priority(&mut self, stage: usize, priority: u8) -> Result<(), PipelineError> {
        let st = self
            .sched
            .stages
            .get_mut(stage)
            .ok_or(PipelineError::NoSuchStage(stage))?;
        st.priority = priority;
        let first = self.sched.stages[0].priority;
        self.sched.prioritized = self.sched.stages.iter().any(|s| s.priority != first);
        Ok(())
    }

    /// `stage`'s priority (`None` if there is no such stage).
    pub fn priority(&self, stage: usize) -> Option<u8> {
        self.sched.stages.get(stage).map(|s| s.priority)
    }

    /// Turns the hand-back order check on or off, as for an atomic distributor
    /// ([`Distributor::set_order_check`]): it compares a packet handed back with the stage
    /// and flow of the packet sent at that position, and a forward or completion out of
    /// order with the older packets of its flow at an atomic stage.
    pub fn set_order_check(&mut self, on: bool) {
        self.sched.check_order = on;
    }

    /// Starts every ordered stage's sequence numbers at `seq`, as if `seq` packets had
    /// passed each, before any packet entered (a test hook: sequence numbers that wrap in
    /// a packet's stamp). Panics if a stage's window holds packets.
    #[doc(hidden)]
    #[cfg(feature = "__test_hooks")]
    pub fn start_sequences_at(&mut self, seq: u64) {
        for stage in &mut self.sched.stages {
            if let Some(win) = stage.window.as_mut() {
                win.start_at(seq);
            }
        }
    }
}
