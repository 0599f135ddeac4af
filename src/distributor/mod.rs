//! The reference distributor: flow-affinity packet distribution built only from flowline's
//! primitives, in the role of DPDK's `rte_distributor`.
//!
//! # Example
//!
//! Every thread here waits when it cannot go on (spins briefly, yields, then sleeps: see
//! [`set_wait_strategy`](Distributor::set_wait_strategy)), so the program is as fast with
//! more threads than cores as with fewer; [`distribute`](Distributor::distribute),
//! [`collect`](Distributor::collect) and [`Worker::recv_burst`] are the forms that never
//! wait, for a thread that polls other work too.
//!
//! ```
//! use std::time::Duration;
//! use flowline::distributor::{self, Config};
//!
//! // Packets are (flow, sequence) pairs; the flow is the tag.
//! let (mut dist, workers) =
//!     distributor::new(Config::default().workers(2).credit(64), |p: &(u64, u64)| p.0).unwrap();
//! let threads: Vec<_> = workers
//!     .into_iter()
//!     .map(|mut w| {
//!         std::thread::spawn(move || {
//!             let mut burst = Vec::new();
//!             // Ends with `Disconnected` once the distributor is dropped.
//!             while w.recv_burst_wait(&mut burst, 32, Duration::MAX).is_ok() {
//!                 for p in burst.drain(..) {
//!                     w.done(p).unwrap();
//!                 }
//!             }
//!         })
//!     })
//!     .collect();
//! let mut input: Vec<(u64, u64)> = (0..1000).map(|i| (i % 7, i)).collect();
//! let mut out = Vec::new();
//! let timeout = Duration::from_secs(10);
//! while !input.is_empty() {
//!     // Waits while every worker that input needs is out of credit.
//!     dist.distribute_wait(&mut input, timeout).unwrap();
//!     dist.collect(&mut out);
//! }
//! while dist.in_flight() > 0 {
//!     dist.collect_wait(&mut out, timeout).unwrap();
//! }
//! assert_eq!(out.len(), 1000);
//! drop(dist); // workers see Disconnected and exit
//! for t in threads {
//!     t.join().unwrap();
//! }
//! ```
//!
//! One [`Distributor`] (used by one thread) routes packets to N [`Worker`]s (one per worker
//! thread). Every packet has a flow tag (a full `u64`, from a closure you give), and:
//!
//! 1. packets of one tag are never processed by two workers at once, and are processed in
//!    the order the distributor received them;
//! 2. a tag with nothing in flight may move to another worker (the least loaded, or one
//!    within a batch of it); a tag with packets in flight (staged ones included) never
//!    does;
//! 3. every packet handed in comes back exactly once (returned, or counted as dropped by
//!    an explicit worker decision, or as lost when a worker's handle was dropped without
//!    leaving while it held packets), across flush, reschedule, workers leaving and
//!    re-joining, and when the last worker leaves (the distributor then gives the packets
//!    back to the caller with [`NoWorkers`]);
//! 4. a worker can **reschedule** a packet under a new tag: it is routed as the next packet
//!    of the new tag's flow, before any packet of that flow the distributor receives
//!    afterwards;
//! 5. a stalled worker delays only the flows it holds: its credit runs out, packets of its
//!    flows are left with the caller (backpressure), everything else keeps moving.
//!
//! Workers hand packets of one flow back in the order they received them; packets of
//! different flows may come back in any order ([`Worker::done_at`] and the other `_at`
//! calls name a packet by its [`Ticket`]), and a packet dropped or rescheduled leaves its
//! flow, so it may pass the flow's older packets. The distributor checks both: a packet
//! handed back must be the one it sent at that position (its tag), and one handed back
//! processed out of order must not overtake a packet of its own flow: every hand-back in
//! debug builds; in release builds one per burst of in-order hand-backs and one in 16 out
//! of order. It panics with a message naming the worker otherwise (see
//! [`Distributor::distribute`]). A [`Worker`] dropped without
//! [`leave`](Worker::leave) (its thread panicked) leaves implicitly: what it never received
//! is redistributed in order, what it held is counted as lost.
//!
//! That is **atomic** scheduling: one flow on one worker at a time, so one heavy flow is
//! capped at one core. [`new_ordered`] makes an **ordered** distributor instead (DPDK's
//! ORDERED event queue): any worker with credit takes any packet, bursts kept together,
//! and [`collect`](Distributor::collect) releases packets in the order they were accepted,
//! through a bounded reorder window that holds input back when it is full. Points 3 to 5
//! hold as above (drops, reschedules, lost packets and packets given back with
//! [`NoWorkers`] give their place in the order up; a leaving worker's packets keep it);
//! affinity does not, by design.
//!
//! [`new_pipeline`] makes a **pipeline**: several stages in one distributor, each atomic
//! or parallel ([`StageType`]), as the queues of one event device; a worker moves a packet
//! on to a later stage with [`Worker::forward`], and each atomic stage keeps its flows on
//! one worker at a time and in the order the previous stage forwarded them. A pipeline
//! that needs an ordered stage chains an ordered distributor into it.
//!
//! # How it works
//!
//! Per worker there is an [SPSC](crate::fifo::spsc) ring distributor -> worker for packets,
//! and two SPSC rings worker -> distributor: one of bare packets for the processed ones
//! (the common case: as dense as the packets that went out) and one for everything else
//! (drops, rescheduled packets, packets handed back unprocessed or out of order, and the
//! leave message, in the order they happen). Control travels on that ring, in order with
//! what it concerns, so no separate signalling line is needed per burst. Each worker may
//! hold at most `credit` packets, counted from the oldest it holds (sent and not handed
//! back, or handed back past it out of order); the rings are sized to the credit, so a
//! push never fails and never spins.
//!
//! The flow table (tag -> worker, and the position of the flow's last packet in that
//! worker's stream) is owned by the distributor thread and never shared. A per-worker
//! `completed` position (the oldest packet not handed back) says which flows are still in
//! flight: no per-packet completion state while hand-backs come in order, no scan of
//! shared memory. Packets handed back out of order mark their position in a bitmap of
//! the credit window until `completed` reaches them.
//!
//! Under load (calls that bring a batch of input or more), packets routed to a worker are
//! staged in its lane and published as a batch (see [`Distributor::set_batching`]: 32
//! packets, or after 16 calls at the latest), and a lane's return rings are read when its
//! worker holds a batch's worth (or the lane nears its credit, or a control entry waits,
//! or its turn comes: one lane per call). A call with less input publishes and reads
//! everything at once, so a light load pays no latency for it. A burst of input spread
//! over many workers so still moves a worker burst per line transfer: the distributor's index stores and reads of moved lines per packet, and its
//! instructions per packet, do not grow with the number of workers (`dist_lines` in the
//! report; the design DPDK's burst distributor uses, a backlog per worker).
//!
//! Shared cache lines written per batch (packets of 8 bytes; 8 per 64-byte line):
//! * distributor, per batch published: the packet lines of the worker's ring and **one**
//!   index line (the ring's tail); per read of a worker's hand-backs: **one** index line
//!   (the done ring's head), plus one for the control ring when it had entries;
//! * worker, per burst received: **one** index line (its ring's head); per burst handed
//!   back: the packets' lines and **one** index line (the done ring's tail).
//!
//! Remote index lines are read only when the cached copy says full or empty, and a control
//! ring's tail (read every call) moves only when its worker posts an entry.

mod admission;
mod atomic;
mod backlog;
mod config;
mod distribute;
mod flows;
mod handbacks;
mod inputs;
mod lanes;
mod membership;
mod node_view;
pub mod nodes;
mod ordered;
mod ownership;
mod pipeline;
mod protocol;
mod registry;
mod rejoin;
mod reorder;
mod returns;
mod schedule;
mod stats;
mod waits;
mod worker;

use core::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::counter::{CounterGroup, GroupHandle, GroupSnapshot};
use crate::wait::{Sleepers, WaitStrategy};
use crossbeam_utils::CachePadded;

use protocol::lane_pair;
pub use registry::{WorkerInfo, WorkerRegistry};
use rejoin::RejoinDesk;
use worker::WORKER_FIELDS;
pub use worker::{Disconnected, NotHeld, Ticket, Worker, WORKER_STATS};

pub use admission::AdmitAll;
pub use atomic::Atomic;
use backlog::Backlog;
pub use config::{
    default_wait_strategy, Config, ConfigError, FlushError, JoinError, NoWorkers,
    DEFAULT_LANE_BATCH, DEFAULT_LANE_HOLD, MAX_CREDIT, MAX_WORKERS,
};
use lanes::{roster_of, Lane, Pick};
pub use ordered::{new_ordered, Ordered};
pub use pipeline::{new_pipeline, Pipeline, PipelineError, StageType, MAX_STAGES};
pub use rejoin::{RejoinError, RejoinToken};
pub use reorder::MAX_WINDOW;
pub use schedule::Schedule;
pub use stats::DISTRIBUTOR_STATS;

/// The distributor's end; see the [module documentation](self).
///
/// ```
/// // See the module documentation for a complete pipeline.
/// let (d, _ws) = flowline::distributor::new(Default::default(), |p: &u64| *p).unwrap();
/// assert!(d.active_workers() >= 1);
/// ```
pub struct Distributor<T, S = Atomic<BoxTag<T>>> {
    lanes: Vec<Lane<T>>,
    /// The least loaded worker of the current routing pass (see [`Pick`]); reset by
    /// [`route_backlog`](Self::route_backlog), which starts every pass.
    pick: Pick,
    /// Packets to route before new input: rescheduled ones, and those a leaving worker
    /// handed back (at the front, oldest first).
    backlog: Backlog<T>,
    /// Polls of the return rings so far (the first is 1).
    epoch: u64,
    /// Leave markers read so far: with the lanes' `cursor`s, the hand-back sequence a wait
    /// compares with `wait_mark` ([`waits`]).
    leaves: u64,
    /// The hand-back sequence when a waiting call last decided that it has to wait.
    wait_mark: u64,
    /// Processed packets waiting for `collect`.
    returned: Vec<T>,
    credit: u64,
    active: usize,
    scratch: Vec<T>,
    stats: GroupHandle<5>,
    stats_group: Arc<CounterGroup<5>>,
    /// What stats and control threads read: the workers and their counters.
    registry: WorkerRegistry,
    /// The final counters of the removed workers, summed (published with every roster).
    removed_totals: [u64; WORKER_FIELDS],
    /// Where a sleeping [`flush`](Distributor::flush) waits: every worker notifies it after
    /// each hand-back (done, drop, reschedule, leave).
    wake: Arc<CachePadded<Sleepers>>,
    /// Where the workers' re-join tokens post their requests.
    desk: Arc<RejoinDesk>,
    /// The flush's first and longest nap.
    naps: (Duration, Duration),
    /// How [`distribute_wait`](Distributor::distribute_wait) and
    /// [`collect_wait`](Distributor::collect_wait) wait.
    strategy: WaitStrategy,
    /// Packets a lane publishes at once (at most half the credit, at least 1).
    batch: u64,
    /// Calls a staged packet may wait for its batch.
    hold: u64,
    /// Calls of `distribute` so far (the clock of `hold`).
    calls: u64,
    /// This call publishes every staged packet and reads every return ring: it got less
    /// than a batch of new input (none in every round of a flush), or batching is off.
    publish_all: bool,
    /// The lanes due at the end of the last `distribute` (see [`Lane::due`]), which
    /// `collect` reads.
    due_lanes: Vec<usize>,
    /// A `collect` ran since the last `distribute`: the next one is a caller draining.
    collected: bool,
    /// The lane whose return rings the next call reads whatever their load (one per call
    /// in turn, so that a leave or the last few hand-backs of an idle lane are seen).
    rotor: usize,
    /// How packets are scheduled: where they go, what a hand-back means.
    sched: S,
}

/// A flow-tag function in a box: the tag type of a distributor made by [`new_boxed`], so
/// that its type, `Distributor<T>`, can be named in a struct or a signature without naming
/// the closure (as tower's `BoxService` names a service). It costs one indirect call per
/// packet over a distributor made by [`new`] with the closure itself, as a `fn` pointer
/// does (the instruction benchmark `dist_2workers_boxed`).
pub type BoxTag<T> = Box<dyn FnMut(&T) -> u64 + Send>;

/// [`new`] with the tag function boxed ([`BoxTag`]): the distributor's type is
/// `Distributor<T>`, which a struct can hold as it is.
///
/// # Errors
///
/// As [`new`].
///
/// ```
/// use flowline::distributor::{self, Config, Distributor, Worker};
/// type Pkt = (u32, u64); // (flow, sequence)
/// struct Rx {
///     dist: Distributor<Pkt>,
///     workers: Vec<Worker<Pkt>>,
/// }
/// let (dist, workers) = distributor::new_boxed(Config::default(), |p: &Pkt| u64::from(p.0)).unwrap();
/// let mut rx = Rx { dist, workers };
/// let mut burst = vec![(7, 0), (7, 1)];
/// assert_eq!(rx.dist.distribute(&mut burst), Ok(2));
/// # let _ = &mut rx.workers;
/// ```
#[allow(clippy::type_complexity)]
pub fn new_boxed<T>(
    config: Config,
    tag: impl FnMut(&T) -> u64 + Send + 'static,
) -> Result<(Distributor<T>, Vec<Worker<T>>), ConfigError> {
    new(config, Box::new(tag) as BoxTag<T>)
}

/// Makes a distributor and its `config.workers` workers. `tag` gives a packet's flow tag.
///
/// # Errors
///
/// [`ConfigError`] for zero workers, more than [`MAX_WORKERS`], a credit out of range, or
/// rings the allocator refuses ([`ConfigError::AllocFailed`], never an abort).
///
/// ```
/// use flowline::distributor::{self, Config, ConfigError};
/// let r = distributor::new(Config::default().workers(0).credit(8), |p: &u64| *p);
/// assert_eq!(r.err(), Some(ConfigError::ZeroWorkers));
/// ```
#[allow(clippy::type_complexity)]
pub fn new<T, F>(
    config: Config,
    tag: F,
) -> Result<(Distributor<T, Atomic<F>>, Vec<Worker<T>>), ConfigError>
where
    F: FnMut(&T) -> u64,
{
    Distributor::build(config, Atomic::new(tag))
}

impl<T, S: Schedule<T>> Distributor<T, S> {
    /// A distributor with schedule `sched`, and its `config.workers` workers.
    pub(crate) fn build(config: Config, sched: S) -> Result<(Self, Vec<Worker<T>>), ConfigError> {
        if config.workers == 0 {
            return Err(ConfigError::ZeroWorkers);
        }
        if config.workers > MAX_WORKERS {
            return Err(ConfigError::TooManyWorkers(config.workers));
        }
        if config.credit == 0 || config.credit > MAX_CREDIT {
            return Err(ConfigError::BadCredit(config.credit));
        }
        // The flush's sleeper protocol needs the barriers set up before its sleepers are made
        // (the waitable packet rings below would do it too; this does not rely on them).
        crate::wait::register();
        let wake = Arc::new(CachePadded::new(Sleepers::new()));
        let desk = Arc::new(RejoinDesk::new(&wake));
        let stats_group = Arc::new(CounterGroup::new(DISTRIBUTOR_STATS, 1));
        let mut lanes = Vec::with_capacity(config.workers);
        let mut workers = Vec::with_capacity(config.workers);
        for id in 0..config.workers {
            let (lane, mut worker) = lane_pair(id, config.credit, &wake, &desk)?;
            worker.set_wait_strategy(default_wait_strategy(config.workers));
            lanes.push(lane);
            workers.push(worker);
        }
        let registry = WorkerRegistry::new(roster_of(&lanes));
        let dist = Distributor {
            lanes,
            backlog: Backlog::new(),
            epoch: 0,
            leaves: 0,
            wait_mark: 0,
            returned: Vec::new(),
            credit: config.credit as u64,
            active: config.workers,
            pick: Pick::NONE,
            scratch: Vec::new(),
            stats: stats_group.handle(),
            stats_group,
            registry,
            removed_totals: [0; WORKER_FIELDS],
            wake,
            desk,
            naps: (Duration::from_millis(1), Duration::from_millis(8)),
            strategy: default_wait_strategy(config.workers),
            batch: 1,
            hold: 0,
            calls: 0,
            publish_all: true,
            due_lanes: Vec::new(),
            collected: false,
            rotor: 0,
            sched,
        };
        let mut dist = dist;
        dist.set_batching(DEFAULT_LANE_BATCH, DEFAULT_LANE_HOLD);
        Ok((dist, workers))
    }
}

impl<T, S: Schedule<T>> Distributor<T, S> {
    /// The distributor's shared-line traffic so far, for the line-count benchmark: index
    /// stores it published (its packet rings' `tail`, its return rings' `head`), and
    /// loads it made of the workers' indices that found them moved (each a transfer of
    /// that line). `None` unless the crate was built with `--cfg flowline_lines` (the
    /// counting is not compiled in otherwise).
    #[doc(hidden)]
    #[cfg(feature = "__test_hooks")]
    pub fn line_counts(&self) -> Option<(u64, u64)> {
        if !cfg!(flowline_lines) {
            return None;
        }
        let (mut stores, mut loads) = (0, 0);
        for lane in &self.lanes {
            for end in [
                lane.tx.line_counts(),
                lane.done_rx.line_counts(),
                lane.rx.line_counts(),
            ] {
                let (s, l) = end?;
                stores += s as u64;
                loads += l as u64;
            }
        }
        Some((stores, loads))
    }

    /// Number of active workers.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new(Config::default().workers(3).credit(8), |p: &u64| *p).unwrap();
    /// assert_eq!(d.active_workers(), 3);
    /// ```
    pub fn active_workers(&self) -> usize {
        self.active
    }

    /// Packets worker `id` has handed back processed, dropped or rescheduled since it was
    /// created or added, as far as the distributor has read its hand-backs (`None` for an
    /// unknown or removed id). Drops include the packets a worker held and did not pass to
    /// [`Worker::leave`]. Not counted: packets it handed back unprocessed when it left, and
    /// those sent to it that it never received (the worker that takes them over counts
    /// them), and those lost with its dropped handle (the `"lost"` statistic).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// assert_eq!(d.worker_completed(0), Some(0));
    /// assert_eq!(d.worker_completed(1), None);
    /// ```
    pub fn worker_completed(&self, id: usize) -> Option<u64> {
        self.lanes
            .get(id)
            .filter(|l| !l.removed)
            .map(|l| l.cursor - l.passed_on)
    }

    /// Whether this distributor schedules ordered ([`new_ordered`]).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new_ordered::<u64>(Config::default().workers(1).credit(8), 16).unwrap();
    /// assert!(d.is_ordered());
    /// ```
    pub fn is_ordered(&self) -> bool {
        self.sched.is_ordered()
    }

    /// The distributor's counters ([`DISTRIBUTOR_STATS`]), readable from any thread.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// d.distribute(&mut vec![1, 2]).unwrap();
    /// assert_eq!(d.stats().snapshot().get("accepted"), Some(2));
    /// ```
    pub fn stats(&self) -> Arc<CounterGroup<5>> {
        Arc::clone(&self.stats_group)
    }

    /// A snapshot of the workers' counters ([`WORKER_STATS`]), summed over every worker
    /// ever created or added, removed ones included ([`WorkerRegistry::totals`]).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// assert_eq!(d.worker_totals().get("returned"), Some(0));
    /// ```
    pub fn worker_totals(&self) -> GroupSnapshot<6> {
        self.registry.totals()
    }
}

impl<T, F, A> Distributor<T, Atomic<F, A>> {
    /// Number of flows in the flow table.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// d.distribute(&mut vec![1, 2, 1]).unwrap();
    /// assert_eq!(d.flows(), 2);
    /// ```
    pub fn flows(&self) -> usize {
        self.sched.flows.len()
    }

    /// The schedule's admission (a node's, in the multi-node layout).
    pub(crate) fn admission(&self) -> &A {
        &self.sched.admit
    }

    /// The schedule's admission, to change (a node's, in the multi-node layout).
    pub(crate) fn admission_mut(&mut self) -> &mut A {
        &mut self.sched.admit
    }
}

/// Publishes what is staged, as the call that routed it would have: what was sent reaches
/// its worker also when the distributor goes (the workers see
/// [`Disconnected`] once they took it).
impl<T, S> Drop for Distributor<T, S> {
    fn drop(&mut self) {
        // Tokens waiting for a re-join stop waiting.
        self.desk
            .close(self.lanes.iter().map(|l| Arc::clone(&l.control)));
        for lane in &mut self.lanes {
            if !lane.staged.is_empty() {
                // Fits: the ring holds `credit` slots, and staged packets are within the
                // credit. A waker panicking in the publication is contained there.
                lane.tx.push_burst_from(&mut lane.staged);
            }
        }
    }
}

impl<T, S: Schedule<T>> fmt::Debug for Distributor<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Distributor")
            .field("workers", &self.lanes.iter().filter(|l| !l.removed).count())
            .field("active", &self.active)
            .field("backlog", &self.backlog.len())
            .field("window", &self.sched.window())
            .finish()
    }
}
