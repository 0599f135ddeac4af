//! The reference distributor: flow-affinity packet distribution built only from flowline's
//! primitives, in the role of DPDK's `rte_distributor`.
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
//! Workers must hand packets back in the order they received them; the distributor checks
//! that by comparing the tags of packets handed back with the tags it sent at those
//! positions (every packet in debug builds, one per burst in release builds) and panics
//! with a message naming the worker otherwise (see [`Distributor::distribute`]). A [`Worker`] dropped without
//! [`leave`](Worker::leave) (its thread panicked) leaves implicitly: what it never received
//! is redistributed in order, what it held is counted as lost.
//!
//! # How it works
//!
//! Per worker there is an [SPSC](crate::fifo::spsc) ring distributor -> worker for packets,
//! and two SPSC rings worker -> distributor: one of bare packets for the processed ones
//! (the common case: as dense as the packets that went out) and one for everything else
//! (drops, rescheduled packets, packets handed back unprocessed, and the leave message, in
//! the order they happen). Control travels on that ring, in order with what it concerns, so
//! no separate signalling line is needed per burst. Each worker may hold at most `credit`
//! packets (sent and not yet handed back); the rings are sized to the credit, so a push
//! never fails and never spins.
//!
//! The flow table (tag -> worker, and the position of the flow's last packet in that
//! worker's stream) is owned by the distributor thread and never shared. Workers hand
//! packets back in the order they received them, so a per-worker `completed` count says
//! which flows are still in flight: no per-packet completion state, no scan of shared
//! memory.
//!
//! Under load (calls that bring a batch of input or more), packets routed to a worker are
//! staged in its lane and published as a batch (see [`Distributor::set_batching`]: 32
//! packets, or after 16 calls at the latest), and a lane's return rings are read when its
//! worker holds a batch's worth (or the lane nears its credit, or a control entry waits,
//! or its turn comes: one lane per call). A call with less input publishes and reads
//! everything at once, so a light load pays no latency for it. A burst of input spread over many workers so still moves a worker burst per line
//! transfer: the distributor's index stores and reads of moved lines per packet, and its
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
//!
//! # Example
//!
//! ```
//! use flowline::distributor::{self, Config};
//!
//! // Packets are (flow, sequence) pairs; the flow is the tag.
//! let (mut dist, workers) =
//!     distributor::new(Config { workers: 2, credit: 64 }, |p: &(u64, u64)| p.0).unwrap();
//! let threads: Vec<_> = workers
//!     .into_iter()
//!     .map(|mut w| {
//!         std::thread::spawn(move || {
//!             let mut burst = Vec::new();
//!             while w.recv_burst(&mut burst, 32).is_ok() {
//!                 for p in burst.drain(..) {
//!                     w.done(p).unwrap();
//!                 }
//!             }
//!         })
//!     })
//!     .collect();
//! let mut input: Vec<(u64, u64)> = (0..1000).map(|i| (i % 7, i)).collect();
//! let mut out = Vec::new();
//! while !input.is_empty() {
//!     dist.distribute(&mut input).unwrap();
//!     dist.collect(&mut out);
//! }
//! dist.flush(&mut out, std::time::Duration::from_secs(10)).unwrap();
//! assert_eq!(out.len(), 1000);
//! drop(dist); // workers see Disconnected and exit
//! for t in threads {
//!     t.join().unwrap();
//! }
//! ```

mod balance;
mod flows;
pub mod nodes;
mod ownership;
mod registry;
mod worker;

use core::fmt;
use core::mem::ManuallyDrop;
use core::ptr;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::counter::{CounterGroup, GroupHandle, GroupSnapshot};
use crate::fifo::{spsc, CapacityError, Wait};
use crate::sync::Backoff;
use crate::wait::Sleepers;
use crossbeam_utils::CachePadded;

use flows::{Flow, FlowTable, TagHasher};
pub use registry::{WorkerInfo, WorkerRegistry};
use worker::{Control, Parked, Ret};
pub use worker::{Disconnected, NotHeld, Worker, WORKER_STATS};

/// The most workers one distributor serves.
///
/// ```
/// assert_eq!(flowline::distributor::MAX_WORKERS, 1024);
/// ```
pub const MAX_WORKERS: usize = 1024;

/// The largest per-worker credit (packets a worker may hold).
///
/// ```
/// assert_eq!(flowline::distributor::MAX_CREDIT, 1 << 20);
/// ```
pub const MAX_CREDIT: usize = 1 << 20;

/// Names of the distributor's statistics, in the order of [`Distributor::stats`].
///
/// ```
/// assert_eq!(flowline::distributor::DISTRIBUTOR_STATS[0], "accepted");
/// ```
pub const DISTRIBUTOR_STATS: [&str; 5] = [
    "accepted",
    "backpressured",
    "rescheduled",
    "dropped",
    "lost",
];

const ACCEPTED: usize = 0;
const BACKPRESSURED: usize = 1;
const RESCHEDULED: usize = 2;
const DROPPED: usize = 3;
/// Packets a worker held when its handle was dropped without `leave`.
const LOST: usize = 4;

/// Packets a worker's lane gathers before it publishes them with one index store, by
/// default (see [`Distributor::set_batching`]): a worker burst.
///
/// ```
/// assert_eq!(flowline::distributor::DEFAULT_LANE_BATCH, 32);
/// ```
pub const DEFAULT_LANE_BATCH: usize = 32;

/// Calls of [`Distributor::distribute`] a staged packet may wait for its lane's batch to
/// fill, by default (see [`Distributor::set_batching`]).
///
/// ```
/// assert_eq!(flowline::distributor::DEFAULT_LANE_HOLD, 16);
/// ```
pub const DEFAULT_LANE_HOLD: u32 = 16;

/// No packet staged on a lane (its `staged_call`).
const NOT_STAGED: u64 = u64::MAX;

/// Flow-table size past which idle flows are forgotten (bounded memory under churning
/// tags).
const FLOW_TABLE_SOFT_LIMIT: usize = 1 << 16;

/// Distributor configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
///
/// ```
/// let c = flowline::distributor::Config { workers: 4, credit: 128 };
/// assert!(flowline::distributor::new(c, |p: &u64| *p).is_ok());
/// ```
pub struct Config {
    /// Number of workers, 1 to [`MAX_WORKERS`].
    pub workers: usize,
    /// Packets one worker may hold at once (sent and not yet handed back), 1 to
    /// [`MAX_CREDIT`]: the depth of its rings. Larger absorbs jitter; smaller bounds the
    /// work a stalled worker sits on.
    pub credit: usize,
}

impl Default for Config {
    /// One worker per CPU beyond the distributor's own (at least one); credit 256.
    ///
    /// ```
    /// let c = flowline::distributor::Config::default();
    /// assert!(c.workers >= 1 && c.credit == 256);
    /// ```
    fn default() -> Self {
        Config {
            workers: crate::topology::available_cpus().saturating_sub(1).max(1),
            credit: 256,
        }
    }
}

/// A configuration that cannot be honoured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
///
/// ```
/// use flowline::distributor::{self, Config, ConfigError};
/// let e = distributor::new(Config { workers: 1, credit: 0 }, |p: &u64| *p).unwrap_err();
/// assert_eq!(e, ConfigError::BadCredit(0));
/// ```
pub enum ConfigError {
    /// `workers` is 0.
    NoWorkers,
    /// `workers` is above [`MAX_WORKERS`].
    TooManyWorkers(usize),
    /// `credit` is 0 or above [`MAX_CREDIT`].
    BadCredit(usize),
    /// A worker's rings could not be allocated (the allocator refused).
    AllocFailed(CapacityError),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoWorkers => write!(f, "a distributor needs at least one worker"),
            ConfigError::TooManyWorkers(n) => {
                write!(
                    f,
                    "{n} workers asked for; a distributor serves at most {MAX_WORKERS}"
                )
            }
            ConfigError::BadCredit(c) => {
                write!(
                    f,
                    "credit {c} is out of range: use 1 to {MAX_CREDIT} packets per worker"
                )
            }
            ConfigError::AllocFailed(e) => write!(
                f,
                "could not allocate a worker's rings ({e}): use fewer workers or a smaller credit"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// No worker is active: the packets were given back to the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
///
/// ```
/// use flowline::distributor::{self, Config, NoWorkers};
/// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
/// ws.pop().unwrap().leave(Vec::new()).unwrap();
/// let mut burst = vec![5];
/// assert_eq!(d.distribute(&mut burst), Err(NoWorkers));
/// assert_eq!(burst, [5]); // given back
/// ```
pub struct NoWorkers;

impl fmt::Display for NoWorkers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no worker is active (all left): the packets were given back; rejoin a worker")
    }
}

impl std::error::Error for NoWorkers {}

/// Why [`Distributor::flush`] stopped before everything came back.
#[derive(PartialEq, Eq)]
///
/// ```
/// use std::time::Duration;
/// use flowline::distributor::{self, Config, FlushError};
/// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
/// d.distribute(&mut vec![9]).unwrap();
/// ws.pop().unwrap().leave(Vec::new()).unwrap(); // never received it
/// assert_eq!(d.flush(&mut Vec::new(), Duration::from_secs(1)), Err(FlushError::NoWorkers(vec![9])));
/// ```
pub enum FlushError<T> {
    /// The timeout passed with packets still in flight (they are not lost: later calls
    /// collect them).
    Timeout {
        /// Packets still held by workers or waiting to be routed.
        in_flight: usize,
        /// The ids of the workers that hold packets not handed back yet, the ones the
        /// flush waited for. A worker whose handle was forgotten (`mem::forget`, or a
        /// thread blocked for good) never leaves and stays here: drop its handle, or have
        /// it [`leave`](Worker::leave), to end the wait.
        workers: Vec<usize>,
    },
    /// No worker is active; the packets waiting to be routed are given back here.
    NoWorkers(Vec<T>),
}

impl<T> fmt::Debug for FlushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlushError::Timeout { in_flight, workers } => f
                .debug_struct("Timeout")
                .field("in_flight", in_flight)
                .field("workers", workers)
                .finish(),
            FlushError::NoWorkers(v) => write!(f, "NoWorkers({} packets)", v.len()),
        }
    }
}

impl<T> fmt::Display for FlushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlushError::Timeout { in_flight, workers } => write!(
                f,
                "flush timed out with {in_flight} packets in flight, held by workers \
                 {workers:?} (are they running?)"
            ),
            FlushError::NoWorkers(v) => write!(
                f,
                "no worker is active; {} undelivered packets were given back",
                v.len()
            ),
        }
    }
}

impl<T> std::error::Error for FlushError<T> {}

/// Why a worker could not re-join ([`Distributor::rejoin`]) or be removed
/// ([`Distributor::remove_worker`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
///
/// ```
/// use flowline::distributor::{self, Config, JoinError};
/// let (mut d, _ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
/// assert_eq!(d.rejoin(0).unwrap_err(), JoinError::Active(0));
/// assert_eq!(d.rejoin(3).unwrap_err(), JoinError::NoSuchWorker(3));
/// ```
pub enum JoinError {
    /// No worker with this id exists: it was never created or added, or it was removed.
    NoSuchWorker(usize),
    /// The worker with this id is active (its handle is alive): only a worker that left
    /// can re-join or be removed.
    Active(usize),
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::NoSuchWorker(id) => write!(f, "there is no worker {id}"),
            JoinError::Active(id) => {
                write!(
                    f,
                    "worker {id} is active; only a worker that left can re-join or be removed \
                     (call Worker::leave, or drop its handle, first)"
                )
            }
        }
    }
}

impl std::error::Error for JoinError {}

/// What the last scan of a routing pass found ([`Router::least_loaded`]): the
/// least loaded active lane, and the load below which it stays the pick: the least
/// outstanding count among the other active lanes then (`u64::MAX` if there is none),
/// plus the slack. Other lanes' loads only grow within a pass, so the pick stays within
/// the slack of the least loaded lane.
#[derive(Clone, Copy, Debug)]
struct Pick {
    lane: usize,
    bound: u64,
    /// The pick lane's `sent` count below which it is still the pick and under its
    /// credit: `completed + min(bound, credit)` at the scan (`completed` does not move
    /// within a pass), so the common check is one load and one compare.
    until: u64,
}

impl Pick {
    /// No pick: `bound` 0 fails every check (no load is below it), so the next
    /// [`Router::least_loaded`] scans.
    const NONE: Pick = Pick {
        lane: 0,
        bound: 0,
        until: 0,
    };
}

/// What routing a packet uses, borrowed apart from the rest of the distributor for one
/// pass: the compiler then keeps these in registers across the pass (a `&mut self` method
/// reloads them after every store into a lane's buffers, which it cannot tell apart from
/// the distributor's own fields).
struct Router<'a, T> {
    lanes: &'a mut [Lane<T>],
    flows: &'a mut FlowTable,
    /// The pass's pick (copied in and out, so it stays in registers).
    pick: Pick,
    credit: u64,
    /// How far above the least loaded lane the pick may be (a lane batch less one).
    slack: u64,
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
        // index of `lanes` a scan found, and `lanes` never shrinks.
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

    /// Routes `pkt` (tag `t`) to a worker's staging buffer, or gives it back. One flow-table
    /// lookup per packet.
    #[inline(always)]
    fn route(&mut self, pkt: T, t: u64) -> Result<(), T> {
        let w = match self.flows.get_mut(t) {
            Some(f) => {
                debug_assert!(f.worker < self.lanes.len());
                // SAFETY: every worker index in the flow table is an index of `lanes` (set
                // from `least_loaded`, a scan of `lanes`), and `lanes` never shrinks
                // (`remove_worker` marks a lane removed and keeps it).
                let lane = unsafe { self.lanes.get_unchecked(f.worker) };
                if lane.completed < f.last {
                    // In flight: stays with its worker, whatever the load.
                    if lane.outstanding() >= self.credit {
                        return Err(pkt);
                    }
                } else {
                    // Idle: may move to the least loaded worker.
                    match Self::least_loaded(self.lanes, self.credit, self.slack, &mut self.pick) {
                        Some(w) => f.worker = w,
                        None => return Err(pkt),
                    }
                }
                debug_assert!(f.worker < self.lanes.len());
                // SAFETY: as above (`least_loaded` returns an index of `lanes`).
                let lane = unsafe { self.lanes.get_unchecked_mut(f.worker) };
                f.last = lane.send(pkt, t);
                return Ok(());
            }
            None => match Self::least_loaded(self.lanes, self.credit, self.slack, &mut self.pick) {
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
struct Lane<T> {
    tx: spsc::Producer<T, Wait>,
    /// Processed packets from the worker.
    done_rx: spsc::Consumer<T>,
    /// Drops, reschedules and the leave message from the worker.
    rx: spsc::Consumer<Ret<T>>,
    /// The worker's ring ends while it is away.
    parked: Option<Parked<T>>,
    active: bool,
    /// Packets sent to this worker (staged ones included), ever.
    sent: u64,
    /// Packets published to this worker's ring (`sent` less the staged ones), ever.
    published: u64,
    /// Packets this worker completed (handed back or returned unprocessed), ever.
    completed: u64,
    /// Packets routed to this worker and not yet published: pushed as one burst once
    /// there is a batch of them, or they waited the hold, or a call brings less than a
    /// batch of input (see [`Distributor::set_batching`]).
    staged: Vec<T>,
    /// The call at whose end the oldest staged packet was first left staged
    /// ([`NOT_STAGED`] when none is).
    staged_call: u64,
    /// Packets a leaving worker handed back unprocessed, held until its leave marker.
    leaving: Vec<T>,
    /// Tag of the packet sent at each position of this worker's stream (position `p` at
    /// `p & tag_mask`), for the hand-back order check. Distributor-local, never shared.
    tags: Box<[u64]>,
    tag_mask: usize,
    /// Position of the next hand-back to process (merging the done and control rings).
    cursor: u64,
    /// Set by the first packet handed back unprocessed: `completed` then stays put until
    /// the leave marker, so the leaving worker's flows stay in flight until then.
    frozen: bool,
    /// Rotating offset of the packet checked in each burst read (release builds).
    probe: u32,
    control: Arc<Control<T>>,
    /// The worker's counters (its handle is in the worker's ring ends).
    stats: Arc<CounterGroup<5>>,
    /// Removed for good ([`Distributor::remove_worker`]): not listed, cannot re-join; a
    /// later [`Distributor::add_worker`] may reuse the lane (and its id).
    removed: bool,
    /// `completed` when the lane's current worker was added (0, or the count when
    /// `add_worker` reused the lane of a removed worker).
    completed_base: u64,
}

impl<T> Lane<T> {
    #[inline(always)]
    fn outstanding(&self) -> u64 {
        self.sent - self.completed
    }

    /// Whether the distributor reads this lane's return rings in a call that reads only
    /// the lanes due ([`Distributor::poll_due`]): the worker holds at least `batch`
    /// published packets not read back, or this lane has more than `near` (its credit
    /// less `batch`) outstanding.
    #[inline(always)]
    fn due(&self, batch: u64, near: u64) -> bool {
        let c = self.completed;
        self.published >= c + batch || self.sent > c + near
    }

    /// Stages `pkt` (tag `t`) for this worker at the next position of its stream.
    #[inline(always)]
    fn send(&mut self, pkt: T, t: u64) -> u64 {
        let sent = self.sent;
        let i = sent as usize & self.tag_mask;
        debug_assert!(i < self.tags.len());
        // SAFETY: `tag_mask` is `tags.len() - 1` (a power of two), so `i` is in bounds.
        unsafe { *self.tags.get_unchecked_mut(i) = t };
        self.sent = sent + 1;
        self.staged.push(pkt);
        sent + 1
    }

    /// The order check: the packet handed back at position `at` has tag `t`.
    #[inline(always)]
    fn check(&self, w: usize, at: u64, t: u64) {
        let expected = self.tags[at as usize & self.tag_mask];
        if t != expected {
            misordered(w, at, expected, t);
        }
    }

    /// `n` more hand-backs processed; they complete packets unless a leave is under way.
    #[inline(always)]
    fn advance(&mut self, n: u64) {
        self.cursor += n;
        if !self.frozen {
            self.completed += n;
        }
    }
}

/// Step of the rotating offset of the checked packet: 2^32 divided by the golden ratio, so
/// successive probes spread evenly over every burst length (see [`probe_offset`]).
const PROBE_STEP: u32 = 0x9e37_79b9;

/// The offset in a burst of `len` packets that probe `probe` checks: `probe`'s fraction of
/// 2^32 scaled to `len` (a multiplication and a shift; a `%` cost a division per burst).
/// Always below `len`; successive probes cover every offset of a burst of up to 1024
/// packets within `2 * len` bursts (the unit test below).
#[inline(always)]
fn probe_offset(probe: u32, len: usize) -> usize {
    // In 128 bits: `len` may exceed 32 bits.
    ((u128::from(probe) * len as u128) >> 32) as usize
}

#[cfg(all(test, not(loom)))]
mod probe_tests {
    use super::*;

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
    use super::*;

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
        let mut lanes: Vec<Lane<u64>> = (0..4)
            .map(|id| make_lane(id, CREDIT as usize, &wake).unwrap().0)
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

/// The distributor's end; see the [module documentation](self).
///
/// ```
/// // See the module documentation for a complete pipeline.
/// let (d, _ws) = flowline::distributor::new(Default::default(), |p: &u64| *p).unwrap();
/// assert!(d.active_workers() >= 1);
/// ```
pub struct Distributor<T, F> {
    tag: F,
    lanes: Vec<Lane<T>>,
    /// The least loaded worker of the current routing pass (see [`Pick`]); reset by
    /// [`route_backlog`](Self::route_backlog), which starts every pass.
    pick: Pick,
    flows: FlowTable,
    /// Packets to route before new input: rescheduled ones, and those a leaving worker
    /// handed back (at the front, oldest first).
    backlog: VecDeque<T>,
    /// Per backlog packet, in step with it: the poll (`epoch`) that read it, for a
    /// reschedule; 0 for a packet a leaving worker handed back (older than anything of
    /// its flow not yet placed).
    backlog_at: VecDeque<u64>,
    /// Polls of the return rings so far (the first is 1).
    epoch: u64,
    /// Processed packets waiting for `collect`.
    returned: Vec<T>,
    credit: u64,
    active: usize,
    blocked: HashSet<u64, BuildHasherDefault<TagHasher>>,
    /// Multi-node layout only: packets waiting at the node to be placed (a bridge's
    /// packets waiting for credit, packets a handover released), as tag -> the earliest
    /// `epoch` at which one of them arrived (0: before any reschedule). A backlog packet
    /// read by a later poll waits behind them (invariant 4: a reschedule goes before what
    /// arrives after it, and after what arrived before it). Set by the node before each
    /// routing step while its backlog is not empty; empty otherwise.
    behind: HashMap<u64, u64, BuildHasherDefault<TagHasher>>,
    /// Tags of backlog packets kept behind `behind` in this routing step, with the
    /// earliest poll that read one: input of such a tag that arrived at or after that poll
    /// waits too (it is newer); input that arrived before does not.
    held_back: HashMap<u64, u64, BuildHasherDefault<TagHasher>>,
    scratch: Vec<T>,
    stats: GroupHandle<5>,
    stats_group: Arc<CounterGroup<5>>,
    /// What stats and control threads read: the workers and their counters.
    registry: WorkerRegistry,
    /// The final counters of the removed workers, summed (published with every roster).
    removed_totals: [u64; 5],
    /// Whether hand-backs are checked against the tag sent at their position.
    check_order: bool,
    /// Where a sleeping [`flush`](Distributor::flush) waits: every worker notifies it after
    /// each hand-back (done, drop, reschedule, leave).
    wake: Arc<CachePadded<Sleepers>>,
    /// The flush's first and longest nap.
    naps: (Duration, Duration),
    /// Set when this distributor is one node of a multi-node layout ([`nodes`]): which
    /// tags it owns. Rescheduled packets of tags owned by another node are not routed here
    /// but moved to `exported`, in order, for the node to send over its bridge.
    ownership: Option<ownership::Ownership>,
    exported: Vec<T>,
    /// In step with `exported`: the poll that read each of them (its `backlog_at`).
    exported_at: Vec<u64>,
    /// Scratch for the backlog's tags ([`tag_backlog`](Self::tag_backlog)).
    backlog_tags: Vec<u64>,
    /// Multi-node layout only: tags whose packets wait in the node's queue of released
    /// packets (set by the node before it places another queue, empty otherwise). Input
    /// of such a tag waits behind them: it is newer.
    wait_first: HashSet<u64, BuildHasherDefault<TagHasher>>,
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
/// let r = distributor::new(Config { workers: 0, credit: 8 }, |p: &u64| *p);
/// assert_eq!(r.err(), Some(ConfigError::NoWorkers));
/// ```
#[allow(clippy::type_complexity)]
pub fn new<T, F>(config: Config, tag: F) -> Result<(Distributor<T, F>, Vec<Worker<T>>), ConfigError>
where
    F: FnMut(&T) -> u64,
{
    if config.workers == 0 {
        return Err(ConfigError::NoWorkers);
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
    let stats_group = Arc::new(CounterGroup::new(DISTRIBUTOR_STATS, 1));
    let mut lanes = Vec::with_capacity(config.workers);
    let mut workers = Vec::with_capacity(config.workers);
    for id in 0..config.workers {
        let (lane, worker) = make_lane(id, config.credit, &wake)?;
        lanes.push(lane);
        workers.push(worker);
    }
    let registry = WorkerRegistry::new(roster_of(&lanes));
    let dist = Distributor {
        tag,
        lanes,
        flows: FlowTable::default(),
        backlog: VecDeque::new(),
        backlog_at: VecDeque::new(),
        epoch: 0,
        returned: Vec::new(),
        credit: config.credit as u64,
        active: config.workers,
        pick: Pick::NONE,
        blocked: HashSet::default(),
        behind: HashMap::default(),
        held_back: HashMap::default(),
        scratch: Vec::new(),
        stats: stats_group.handle(),
        stats_group,
        registry,
        removed_totals: [0; 5],
        check_order: true,
        wake,
        naps: (Duration::from_millis(1), Duration::from_millis(8)),
        ownership: None,
        exported: Vec::new(),
        exported_at: Vec::new(),
        backlog_tags: Vec::new(),
        wait_first: HashSet::default(),
        batch: 1,
        hold: 0,
        calls: 0,
        publish_all: true,
        due_lanes: Vec::new(),
        collected: false,
        rotor: 0,
    };
    let mut dist = dist;
    dist.set_batching(DEFAULT_LANE_BATCH, DEFAULT_LANE_HOLD);
    Ok((dist, workers))
}

/// A worker's rings, order-check tags and counters: the distributor's lane and the
/// worker's handle, for worker `id` with room for `credit` packets.
fn make_lane<T>(
    id: usize,
    credit: usize,
    wake: &Arc<CachePadded<Sleepers>>,
) -> Result<(Lane<T>, Worker<T>), ConfigError> {
    let (tx, mut wrx) = spsc::waitable(credit).map_err(ConfigError::AllocFailed)?;
    wrx.set_polite_polling(false);
    let (wdone, mut done_rx) = spsc::channel(credit).map_err(ConfigError::AllocFailed)?;
    done_rx.set_polite_polling(false);
    // One more slot than the credit for the leave marker.
    let (wret, mut rx) = spsc::channel(credit + 1).map_err(ConfigError::AllocFailed)?;
    // The distributor polls every lane in turn: a polite pause on one would hold up all.
    rx.set_polite_polling(false);
    let tag_slots = credit.next_power_of_two();
    let mut tags = Vec::new();
    tags.try_reserve_exact(tag_slots).map_err(|_| {
        ConfigError::AllocFailed(CapacityError::AllocFailed {
            slots: tag_slots,
            bytes: tag_slots * 8,
        })
    })?;
    tags.resize(tag_slots, 0u64);
    let control = Arc::new(Control {
        parked: Mutex::new(None),
    });
    let stats = Arc::new(CounterGroup::new(WORKER_STATS, 1));
    let worker = Worker {
        id,
        ends: ManuallyDrop::new(Parked {
            rx: wrx,
            done: wdone,
            ret: wret,
            wake: Arc::clone(wake),
            stats: stats.handle(),
        }),
        held: 0,
        handed: 0,
        control: Arc::clone(&control),
    };
    let lane = Lane {
        tx,
        done_rx,
        rx,
        parked: None,
        active: true,
        sent: 0,
        published: 0,
        completed: 0,
        staged: Vec::with_capacity(credit.min(1024)),
        staged_call: NOT_STAGED,
        leaving: Vec::new(),
        tags: tags.into_boxed_slice(),
        tag_mask: tag_slots - 1,
        cursor: 0,
        frozen: false,
        probe: 0,
        control,
        stats,
        removed: false,
        completed_base: 0,
    };
    Ok((lane, worker))
}

/// The registry's view of `lanes`: every lane not removed, by id.
fn roster_of<T>(lanes: &[Lane<T>]) -> Vec<registry::Entry> {
    lanes
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.removed)
        .map(|(id, l)| registry::Entry {
            id,
            active: l.active,
            stats: Arc::clone(&l.stats),
        })
        .collect()
}

impl<T, F> Distributor<T, F>
where
    F: FnMut(&T) -> u64,
{
    /// Routes `pkt` (tag `t`) to a worker's staging buffer, or gives it back. One flow-table
    /// lookup per packet.
    #[inline(always)]
    fn route(&mut self, pkt: T, t: u64) -> Result<(), T> {
        let slack = self.slack();
        let mut router = Router {
            lanes: &mut self.lanes,
            flows: &mut self.flows,
            pick: self.pick,
            credit: self.credit,
            slack,
        };
        let r = router.route(pkt, t);
        self.pick = router.pick;
        r
    }

    /// Publishes, as one burst per lane, the staged packets of every lane that has a batch
    /// of them, or whose oldest waited the hold, or that has no credit left to gather
    /// more; every lane's when the call publishes all. The others stay staged (their
    /// flows are in flight, their credit taken), and the age of their oldest is noted.
    ///
    /// With `prefetch`, the end of a `distribute`: the lanes the next read takes (those
    /// due, see [`Lane::due`]) are listed in `due_lanes` for [`collect`](Self::collect),
    /// and the lines of their hand-backs published by now are asked for, so that they
    /// travel from the workers' cores while the caller works between calls, and the next
    /// read finds them near instead of waiting for each line in turn (`dist_1worker` on
    /// the 2-core test guest: +10-13% near, +30% far). That is one more read of each such
    /// done ring's index per call; it moves the index line only if the worker published
    /// since the last read, which the next read would have paid for instead.
    fn push_staged(&mut self, prefetch: bool, all: bool) {
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
        self.calls = self.calls.wrapping_add(1);
        self.publish_all = (new_input as u64) < self.batch;
        self.collected = false;
    }

    /// How far above the least loaded lane a new flow's lane may be: a lane batch less
    /// one under load (new flows fill one lane's batch in a row), none otherwise.
    fn slack(&self) -> u64 {
        if self.publish_all {
            0
        } else {
            self.batch - 1
        }
    }

    /// Routes as much of the backlog as possible; returns whether it is now empty. Tags of
    /// backlog packets left behind are added to `blocked`.
    fn route_backlog(&mut self) {
        // A new pass: completions read since the last one may have lowered any load.
        self.pick = Pick::NONE;
        if self.backlog.is_empty() {
            return;
        }
        let tags = self.tag_backlog();
        // The packets left behind keep their order.
        for &t in &tags {
            let p = self.backlog.pop_front().expect("counted");
            let at = self
                .backlog_at
                .pop_front()
                .expect("in step with the backlog");
            if self.ownership.as_ref().is_some_and(|o| !o.routes_here(t)) {
                // A reschedule to a tag another node owns: that node routes it.
                self.exported.push(p);
                self.exported_at.push(at);
                continue;
            }
            let keep = if !self.blocked.is_empty() && self.blocked.contains(&t) {
                Some(p)
            } else if self.behind.get(&t).is_some_and(|&arrived| arrived < at) {
                // Read after older packets of its flow reached the node, and they still
                // wait there: it goes after them.
                let h = self.held_back.entry(t).or_insert(at);
                *h = (*h).min(at);
                Some(p)
            } else {
                match self.route(p, t) {
                    Ok(()) => None,
                    Err(p) => {
                        self.blocked.insert(t);
                        Some(p)
                    }
                }
            };
            if let Some(p) = keep {
                self.backlog.push_back(p);
                self.backlog_at.push_back(at);
            }
        }
        self.backlog_tags = tags;
    }

    /// The backlog's tags, in order, with the backlog untouched: the user's `tag` runs
    /// here, before any packet moves, so a panic leaves the backlog as it was (a panic
    /// half-way through a pass that rotates it would leave it out of order). The caller
    /// gives the `Vec` back to `backlog_tags` (its allocation; lost on a panic).
    fn tag_backlog(&mut self) -> Vec<u64> {
        let mut tags = core::mem::take(&mut self.backlog_tags);
        tags.clear();
        for p in &self.backlog {
            tags.push((self.tag)(p));
        }
        tags
    }

    /// Reads the workers' return rings and routes the backlog now, so that a reschedule
    /// read here goes out before input the caller splits up next (the multi-node layout
    /// sends reschedules to other nodes' tags over a bridge, ahead of later input).
    /// The node polls first ([`poll_returns`](Self::poll_returns)) and sets `behind`.
    pub(crate) fn route_polled(&mut self) {
        if self.active > 0 {
            self.blocked.clear();
            self.held_back.clear();
            self.route_backlog();
            self.push_staged(false, self.publish_all);
        } else if self.ownership.is_some() {
            // No worker to route to, but reschedules to other nodes' tags still go there
            // first (the rest of the backlog goes back with `NoWorkers`).
            let tags = self.tag_backlog();
            let o = self.ownership.as_ref().expect("matched above");
            for &t in &tags {
                let p = self.backlog.pop_front().expect("counted");
                let at = self
                    .backlog_at
                    .pop_front()
                    .expect("in step with the backlog");
                if o.routes_here(t) {
                    self.backlog.push_back(p);
                    self.backlog_at.push_back(at);
                } else {
                    self.exported.push(p);
                    self.exported_at.push(at);
                }
            }
            self.backlog_tags = tags;
        }
    }

    /// Whether a flow of ownership bucket `bucket` has a packet at a worker (sent, staged
    /// or held by a leaving worker, and not handed back): a scan of the flow table.
    pub(crate) fn bucket_in_flight(&self, bucket: usize) -> bool {
        self.flows.iter().any(|(tag, f)| {
            ownership::bucket_of(tag) == bucket && self.lanes[f.worker].completed < f.last
        })
    }

    /// The share of the active workers' credit in use, in per-mille (`None` without an
    /// active worker): the load signal of [`nodes`]' balancing.
    pub(crate) fn fill_permille(&self) -> Option<u32> {
        if self.active == 0 {
            return None;
        }
        let cap = self.active as u64 * self.credit;
        let used: u64 = self
            .lanes
            .iter()
            .filter(|l| l.active)
            .map(Lane::outstanding)
            .sum();
        Some((used.min(cap) * 1000 / cap) as u32)
    }

    /// Packets at the workers (sent, not handed back) per ownership bucket, as
    /// `(bucket, packets)`: read from the tags the order check keeps for every position
    /// in flight, so it costs nothing on the hot path (and O(packets in flight) here).
    pub(crate) fn in_flight_by_bucket(&self) -> Vec<(usize, u64)> {
        let mut by: std::collections::HashMap<usize, u64> = std::collections::HashMap::new();
        for lane in self.lanes.iter().filter(|l| l.active) {
            for pos in lane.completed..lane.sent {
                let t = lane.tags[pos as usize & lane.tag_mask];
                *by.entry(ownership::bucket_of(t)).or_default() += 1;
            }
        }
        let mut v: Vec<(usize, u64)> = by.into_iter().collect();
        v.sort_unstable();
        v
    }

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
    fn poll_due(&mut self) {
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
    /// Each processed (and unprocessed) packet's tag is checked against the tag sent at its
    /// position.
    fn poll_lane(&mut self, w: usize) {
        let Self {
            lanes,
            returned,
            backlog,
            backlog_at,
            epoch,
            stats,
            tag,
            check_order,
            ..
        } = self;
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
                let start = returned.len();
                let got = lane.done_rx.pop_burst_into(returned, gap as usize) as u64;
                debug_assert_eq!(got, gap, "visible packets vanished");
                let at = lane.cursor;
                // Accounting first, then the user's `tag` (which may panic) for the check.
                lane.advance(got);
                avail -= got;
                let burst = &returned[start..];
                if !*check_order {
                } else if cfg!(debug_assertions) {
                    for (k, p) in burst.iter().enumerate() {
                        lane.check(w, at + k as u64, tag(p));
                    }
                } else {
                    // One packet per burst read, at a rotating offset: one `tag` call per
                    // burst instead of one per packet.
                    lane.probe = lane.probe.wrapping_add(PROBE_STEP);
                    let k = probe_offset(lane.probe, burst.len());
                    lane.check(w, at + k as u64, tag(&burst[k]));
                }
            }
            match next_at {
                Some(a) if a == lane.cursor => {}
                _ => break,
            }
            match lane.rx.pop().expect("peeked") {
                Ret::Dropped { .. } => {
                    lane.advance(1);
                    stats.add(DROPPED, 1);
                }
                Ret::Resched { pkt, .. } => {
                    lane.advance(1);
                    stats.add(RESCHEDULED, 1);
                    backlog.push_back(pkt);
                    backlog_at.push_back(*epoch);
                }
                // Kept, still counted as outstanding (so their flows stay in flight at this
                // worker), until the leave marker that follows them arrives: a poll may see
                // only part of a leaving worker's hand-back.
                Ret::Unprocessed { at, pkt } => {
                    lane.frozen = true;
                    lane.cursor += 1;
                    // Kept before the user's `tag` runs: if it panics, the packet is not lost.
                    lane.leaving.push(pkt);
                    if *check_order {
                        let t = tag(lane.leaving.last().expect("just pushed"));
                        lane.check(w, at, t);
                    }
                }
                Ret::Lost { n, .. } => {
                    lane.advance(n);
                    stats.add(LOST, n);
                }
                Ret::Leave { .. } => {
                    left = true;
                    break;
                }
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
        lane.staged_call = NOT_STAGED;
        // Everything sent to the worker is now accounted for: handed back before it left,
        // handed back unprocessed, or recovered from its ring. The next worker on this lane
        // starts its stream at `sent`.
        lane.completed = lane.sent;
        lane.published = lane.sent;
        lane.cursor = lane.sent;
        lane.frozen = false;
        lane.active = false;
        lane.parked = Some(parked);
        self.active -= 1;
        for p in unprocessed.into_iter().rev() {
            self.backlog.push_front(p);
            self.backlog_at.push_front(0);
        }
        self.publish_roster();
    }

    /// Publishes the lanes' current state to the registry (cold path: a worker was added,
    /// left, re-joined or was removed).
    fn publish_roster(&self) {
        self.registry
            .publish(roster_of(&self.lanes), self.removed_totals);
    }

    /// Routes a burst: takes the packets it accepts out of `pkts` and returns how many.
    /// Packets it cannot place now stay in `pkts`, in order: a packet whose flow's worker
    /// has no credit left, and every later packet of the same flow in the burst (so a retry
    /// keeps each flow's order). Packets waiting in the backlog (rescheduled, or handed back
    /// by a leaving worker) go first. Under load, accepted packets reach their worker with
    /// its lane's batch ([`set_batching`](Self::set_batching)); a call with less than a
    /// batch of input (an empty `pkts` too) publishes everything staged, so a caller whose
    /// input stops calls it so (or `flush`es).
    ///
    /// # Errors
    ///
    /// [`NoWorkers`] if no worker is active: nothing is routed, and the backlog is given
    /// back at the front of `pkts` (it is older than they are).
    ///
    /// If the `tag` closure panics, the packets it had not yet tagged (that one included)
    /// stay in `pkts`, in order, and the packets already routed stay staged for their
    /// workers (they go out with a later call, as batching allows): none is lost.
    ///
    /// # Panics
    ///
    /// If a worker handed packets back in a different order than it received them (a bug
    /// in the worker's code that would let a flow run on two workers at once). Reading the
    /// return rings (here, in [`collect`](Self::collect), [`flush`](Self::flush) and
    /// [`rejoin`](Self::rejoin)) checks packets handed back against the tag of the packet
    /// sent at that position of the worker's stream, so a hand-back of another flow's
    /// packet is caught. Debug builds check every processed and unprocessed packet; release
    /// builds check every unprocessed one and one processed packet per burst read, at an
    /// offset that rotates from burst to burst, so the check costs one `tag` call per burst
    /// (a worker that reorders repeatedly is caught within a few bursts; one that reorders
    /// once may pass unnoticed in release). Drops and reschedules carry no packet with the
    /// original tag and are counted, not checked. The check needs a packet's tag to be the
    /// same when it comes back as when it was sent: a worker that rewrites the fields the
    /// tag reads trips it, so such pipelines turn it off with
    /// [`set_order_check`](Self::set_order_check). Also panics if `tag` panics.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config { workers: 1, credit: 2 }, |p: &u64| *p).unwrap();
    /// let mut burst = vec![7, 7, 7, 8];
    /// // Credit 2: two packets of flow 7 go out; the third stays, and so does flow 8 (no credit).
    /// assert_eq!(d.distribute(&mut burst), Ok(2));
    /// assert_eq!(burst, [7, 8]);
    /// ```
    pub fn distribute(&mut self, pkts: &mut Vec<T>) -> Result<usize, NoWorkers> {
        self.begin_call(pkts.len());
        if self.publish_all {
            self.poll_returns();
        } else {
            self.poll_due();
        }
        if !self.behind.is_empty() {
            self.behind.clear();
        }
        self.distribute_polled(pkts, &mut 0, u64::MAX)
    }

    /// `distribute` for the multi-node layout, after the node polled the return rings and
    /// set `behind`: the first `*old` packets of `pkts` arrived before any reschedule (0),
    /// the others after poll `arrived` (`u64::MAX`: new input); those of a tag whose
    /// backlog packets wait behind `behind`, read at or before their arrival, wait too.
    /// On return `*old` counts the old packets still in `pkts` (at its front); if `tag`
    /// panics it is left as it was.
    pub(crate) fn distribute_polled(
        &mut self,
        pkts: &mut Vec<T>,
        old: &mut usize,
        arrived: u64,
    ) -> Result<usize, NoWorkers> {
        if self.active == 0 {
            let mut all: Vec<T> = self.backlog.drain(..).collect();
            self.backlog_at.clear();
            all.append(pkts);
            *pkts = all;
            return Err(NoWorkers);
        }
        // (`clear` rewrites a set's control bytes even when it is empty.)
        if !self.blocked.is_empty() {
            self.blocked.clear();
        }
        if !self.held_back.is_empty() {
            self.held_back.clear();
        }
        self.route_backlog();
        let mut input = std::mem::take(&mut self.scratch);
        std::mem::swap(&mut input, pkts);
        // `scratch` is only ever an emptied input (or new after a panic): `accepted` below
        // counts on `pkts` starting empty.
        debug_assert!(pkts.is_empty());
        let accepted: u64;
        {
            /// Owns the input packets not yet taken, `[next, len)` of `base`; puts them back
            /// at the end of the caller's `Vec`, in order, if the user's `tag` panics (the
            /// packets already routed stay staged for a later call, and are counted as
            /// accepted here: the call's own count below never runs then).
            struct PutBack<'a, T> {
                base: *const T,
                next: usize,
                len: usize,
                pkts: &'a mut Vec<T>,
                stats: &'a mut GroupHandle<5>,
                /// Set once the pass ran to its end (the call then counts for itself).
                finished: bool,
            }
            impl<T> Drop for PutBack<'_, T> {
                fn drop(&mut self) {
                    if !self.finished {
                        // Cut short by a panic: of the `next` packets taken, those not
                        // back on `pkts` (which held none at the start) were routed.
                        let routed = self.next - self.pkts.len();
                        self.stats.add(ACCEPTED, routed as u64);
                    }
                    while self.next < self.len {
                        // SAFETY: `[next, len)` are initialised packets this guard owns
                        // (the input `Vec`'s length was set to 0); each is moved out once.
                        let p = unsafe { ptr::read(self.base.add(self.next)) };
                        self.next += 1;
                        self.pkts.push(p);
                    }
                }
            }
            let len = input.len();
            // SAFETY: the guard takes over the `len` packets (moved out one by one below, or
            // back to the caller by its `Drop`); the `Vec` keeps only its allocation.
            unsafe { input.set_len(0) };
            let mut g = PutBack {
                base: input.as_ptr(),
                next: 0,
                len,
                pkts,
                stats: &mut self.stats,
                finished: false,
            };
            let mut kept_old = 0;
            // Whether any packet may have to wait (checked once here). An unfiltered pass
            // runs the fast loop until the first packet refused for credit (whose tag then
            // joins `blocked`), then the filtering loop for the rest.
            let Self {
                tag,
                lanes,
                flows,
                pick,
                credit,
                batch,
                publish_all,
                blocked,
                wait_first,
                held_back,
                ..
            } = self;
            let filtering = !blocked.is_empty() || !wait_first.is_empty() || !held_back.is_empty();
            let mut router = Router {
                lanes,
                flows,
                pick: *pick,
                credit: *credit,
                slack: if *publish_all { 0 } else { *batch - 1 },
            };
            if !filtering {
                // The common case, in a loop of its own that keeps fewer values live: no
                // packet has to wait until one finds no credit.
                while g.next < g.len {
                    // SAFETY: as in the loop below.
                    let t = tag(unsafe { &*g.base.add(g.next) });
                    // SAFETY: as in the loop below.
                    let p = unsafe { ptr::read(g.base.add(g.next)) };
                    g.next += 1;
                    if let Err(p) = router.route(p, t) {
                        blocked.insert(t);
                        g.pkts.push(p);
                        kept_old += usize::from(g.next <= *old);
                        break;
                    }
                }
            }
            while g.next < g.len {
                // SAFETY: `next < len`: an initialised packet the guard owns. It is tagged in
                // place, so if `tag` panics it is still owned by the guard and goes back.
                let t = tag(unsafe { &*g.base.add(g.next) });
                // SAFETY: as above; `next` moves past it, so it is moved out exactly once.
                let p = unsafe { ptr::read(g.base.add(g.next)) };
                let is_old = g.next < *old;
                g.next += 1;
                let came = if is_old { 0 } else { arrived };
                if blocked.contains(&t)
                    || wait_first.contains(&t)
                    || held_back.get(&t).is_some_and(|&read| read <= came)
                {
                    g.pkts.push(p);
                    kept_old += usize::from(is_old);
                    continue;
                }
                if let Err(p) = router.route(p, t) {
                    blocked.insert(t);
                    g.pkts.push(p);
                    kept_old += usize::from(is_old);
                }
            }
            *pick = router.pick;
            g.finished = true;
            // Every packet taken was routed or went back onto `pkts` (empty at the start).
            accepted = (len - g.pkts.len()) as u64;
            *old = kept_old;
        }
        self.scratch = input;
        // Counted before the packets are published: the publication may wake a worker's
        // task, whose waker may panic out of `push_staged` (the packets it did not push
        // stay staged for a later call), and a reader that has seen a packet at a worker
        // finds it in the totals.
        let mut delta = [0u64; 5];
        delta[ACCEPTED] = accepted;
        delta[BACKPRESSURED] = pkts.len() as u64;
        self.stats.add_all(delta);
        // Before the publication too, so a panicking waker does not skip it; flows with
        // staged packets are in flight (their `last` counts them), so it keeps them.
        let lanes = &self.lanes;
        self.flows
            .prune_idle(|w| lanes[w].completed, FLOW_TABLE_SOFT_LIMIT);
        self.push_staged(true, self.publish_all);
        Ok(accepted as usize)
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
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// d.distribute(&mut vec![1, 2]).unwrap();
    /// let mut b = Vec::new();
    /// ws[0].recv_burst(&mut b, 8).unwrap();
    /// ws[0].done_burst(&mut b).unwrap();
    /// let mut out = Vec::new();
    /// assert_eq!(d.collect(&mut out), 2);
    /// assert_eq!(out, [1, 2]);
    /// ```
    pub fn collect(&mut self, out: &mut Vec<T>) -> usize {
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
    /// worker costs about 1% of a core, and a hand-back while the workers are otherwise
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
    /// let (mut d, _ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
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
            if !backoff.is_completed() {
                backoff.snooze();
                continue;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(FlushError::Timeout {
                    in_flight,
                    workers: self.holding_workers(),
                });
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
                // after such a nap make no progress, the next nap waits for news instead
                // (a change of the unread count), so a flush cannot spin on entries it
                // cannot use. The nap's end (its timeout) only ends the nap: the loop
                // decides.
                let lanes = &self.lanes;
                let unread =
                    || -> usize { lanes.iter().map(|l| l.done_rx.len() + l.rx.len()).sum() };
                let base = if eager { 0 } else { unread() };
                eager = false;
                self.wake.sleep_until(|| unread() != base, Some(now + nap));
            } else {
                // Nothing is held, only the backlog is left: the next round routes it.
                std::thread::yield_now();
            }
        }
    }

    /// The distributor's shared-line traffic so far, for the line-count benchmark: index
    /// stores it published (its packet rings' `tail`, its return rings' `head`), and
    /// loads it made of the workers' indices that found them moved (each a transfer of
    /// that line). `None` unless the crate was built with `--cfg flowline_lines` (the
    /// counting is not compiled in otherwise).
    #[doc(hidden)]
    pub fn line_counts(&self) -> Option<(u64, u64)> {
        #[cfg(flowline_lines)]
        {
            let (mut stores, mut loads) = (0, 0);
            for lane in &self.lanes {
                for (s, l) in [
                    lane.tx.line_counts(),
                    lane.done_rx.line_counts(),
                    lane.rx.line_counts(),
                ] {
                    stores += s as u64;
                    loads += l as u64;
                }
            }
            Some((stores, loads))
        }
        #[cfg(not(flowline_lines))]
        None
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
    /// let (mut d, _ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// d.distribute(&mut vec![1, 2, 3]).unwrap();
    /// assert_eq!(d.in_flight(), 3);
    /// ```
    pub fn in_flight(&self) -> usize {
        let held: u64 = self.lanes.iter().map(|l| l.outstanding()).sum();
        held as usize + self.backlog.len()
    }

    /// A new handle for worker `id`, which left earlier. It goes on counting on the
    /// worker's counters (the registry lists it as active again).
    ///
    /// # Errors
    ///
    /// [`JoinError::NoSuchWorker`] for an id that was never created or added, or was
    /// removed; [`JoinError::Active`] if that worker has not left (its `leave` has not
    /// returned yet).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// ws.pop().unwrap().leave(Vec::new()).unwrap();
    /// let w = d.rejoin(0).unwrap(); // reads the leave from the return ring first
    /// assert_eq!((w.id(), d.active_workers()), (0, 1));
    /// ```
    pub fn rejoin(&mut self, id: usize) -> Result<Worker<T>, JoinError> {
        // Reads the return rings first, so a leave that has happened is seen.
        let parked = self.take_parked(id)?;
        Ok(self.activate(id, parked))
    }

    /// The ring ends of worker `id`, which left (after reading the return rings).
    fn take_parked(&mut self, id: usize) -> Result<Parked<T>, JoinError> {
        self.poll_returns();
        let lane = match self.lanes.get_mut(id) {
            Some(l) if !l.removed => l,
            _ => return Err(JoinError::NoSuchWorker(id)),
        };
        if lane.active {
            return Err(JoinError::Active(id));
        }
        lane.parked.take().ok_or(JoinError::Active(id))
    }

    /// Lane `id` gets a worker again, with these ring ends; the registry says so.
    fn activate(&mut self, id: usize, parked: Parked<T>) -> Worker<T> {
        let lane = &mut self.lanes[id];
        lane.active = true;
        lane.removed = false;
        self.active += 1;
        let w = Worker {
            id,
            ends: ManuallyDrop::new(parked),
            held: 0,
            handed: lane.cursor,
            control: Arc::clone(&lane.control),
        };
        self.publish_roster();
        w
    }

    /// Adds a worker at run time, beyond those made by [`new`]: a handle with fresh
    /// counters, the default wait strategy and the configured credit. Its id is the lowest id of a removed worker
    /// ([`remove_worker`](Self::remove_worker)), whose rings it reuses, or else the next
    /// unused one. The new worker takes flows from the next [`distribute`](Self::distribute)
    /// on (a flow with nothing in flight may move to it; flows with packets in flight stay
    /// where they are). Cold path: allocates, and publishes a new registry roster.
    ///
    /// # Errors
    ///
    /// [`ConfigError::TooManyWorkers`] if [`MAX_WORKERS`] workers exist (active or away;
    /// remove one that left first), [`ConfigError::AllocFailed`] if its rings cannot be
    /// allocated. It has read the return rings then (as every call does), and changed
    /// nothing else.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// let w = d.add_worker().unwrap();
    /// assert_eq!((w.id(), d.active_workers()), (1, 2));
    /// assert_eq!(d.registry().workers().len(), 2);
    /// ```
    pub fn add_worker(&mut self) -> Result<Worker<T>, ConfigError> {
        self.poll_returns();
        if let Some(id) = self.lanes.iter().position(|l| l.removed) {
            let parked = self.lanes[id]
                .parked
                .take()
                .expect("a removed worker's ring ends stay with its lane");
            let mut parked = parked;
            // Fresh counters (the removed worker's were folded into the registry's
            // totals), the default wait strategy and async budget, completions counted
            // from here.
            let stats = Arc::new(CounterGroup::new(WORKER_STATS, 1));
            parked.stats = stats.handle();
            parked
                .rx
                .set_wait_strategy(crate::wait::WaitStrategy::default());
            #[cfg(feature = "async")]
            parked
                .rx
                .set_async_budget(crate::wait::DEFAULT_ASYNC_BUDGET);
            let lane = &mut self.lanes[id];
            lane.stats = stats;
            lane.completed_base = lane.completed;
            return Ok(self.activate(id, parked));
        }
        if self.lanes.len() >= MAX_WORKERS {
            return Err(ConfigError::TooManyWorkers(MAX_WORKERS + 1));
        }
        let id = self.lanes.len();
        let (lane, worker) = make_lane(id, self.credit as usize, &self.wake)?;
        self.lanes.push(lane);
        self.active += 1;
        self.publish_roster();
        Ok(worker)
    }

    /// Removes worker `id`, which left, for good: it can no longer re-join, the registry
    /// stops listing it, and its counters are folded into the registry's totals (which so
    /// never go backwards). Nothing it ever received is lost: leaving already handed back
    /// or recovered everything. A later [`add_worker`](Self::add_worker) may reuse the id.
    ///
    /// # Errors
    ///
    /// [`JoinError::NoSuchWorker`] for an id that does not exist (or was removed already),
    /// [`JoinError::Active`] if the worker has not left: call [`Worker::leave`] (or drop
    /// its handle) first.
    ///
    /// ```
    /// use flowline::distributor::{self, Config, JoinError};
    /// let (mut d, mut ws) = distributor::new(Config { workers: 2, credit: 8 }, |p: &u64| *p).unwrap();
    /// assert_eq!(d.remove_worker(1), Err(JoinError::Active(1)));
    /// ws.pop().unwrap().leave(Vec::new()).unwrap();
    /// d.remove_worker(1).unwrap();
    /// assert_eq!(d.rejoin(1).unwrap_err(), JoinError::NoSuchWorker(1));
    /// assert_eq!(d.registry().workers().len(), 1);
    /// assert_eq!(d.add_worker().unwrap().id(), 1); // the id is free again
    /// ```
    pub fn remove_worker(&mut self, id: usize) -> Result<(), JoinError> {
        let parked = self.take_parked(id)?;
        let lane = &mut self.lanes[id];
        // The worker's handle is gone and its counter handle is in `parked`, owned here:
        // these values are final.
        let last = lane.stats.snapshot();
        for (r, v) in self.removed_totals.iter_mut().zip(last.values()) {
            *r = r.wrapping_add(*v);
        }
        lane.parked = Some(parked);
        lane.removed = true;
        // One roster: the worker leaves the list and its counters join the removed totals
        // together, so a reader's totals never drop.
        self.publish_roster();
        Ok(())
    }

    /// The worker registry: which workers exist, whether each is active, and their
    /// counters, readable from any thread without a lock (see [`WorkerRegistry`]).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new(Config { workers: 2, credit: 8 }, |p: &u64| *p).unwrap();
    /// assert_eq!(d.registry().active(), 2);
    /// ```
    pub fn registry(&self) -> WorkerRegistry {
        self.registry.clone()
    }

    /// **Testing only:** sets the flush's first and longest nap (1 ms and 8 ms by
    /// default), so a test can make a lost wake-up show as a flush that times out. Hidden
    /// from the docs and outside any semver promise.
    #[doc(hidden)]
    pub fn set_flush_naps(&mut self, first: Duration, longest: Duration) {
        self.naps = (first, longest.max(first));
    }

    /// Sets how packets are gathered per worker before they are published. A call that
    /// brings at least `packets` new packets (the distributor under load) stages what it
    /// routes per worker: a lane publishes its staged packets with one index store once it
    /// has `packets` of them (at most half the credit; 1 turns batching off), or at the
    /// latest at the end of the `hold_calls`-th such call after the one that staged the
    /// oldest (0: at the end of that call), or at once when its worker has used up its
    /// credit. A call with fewer new packets (a lighter load; an empty `pkts` and every
    /// round of [`flush`](Self::flush) too) publishes everything at once. Return rings
    /// are read at the same grain: under load a call reads a lane's only when its worker
    /// holds `packets` published ones, the lane is near its credit or has a control entry
    /// (a drop, a reschedule, a leave), plus one lane in turn (every lane at least once
    /// per as many calls as there are lanes); a lighter call reads them all.
    ///
    /// So under load one line transfer carries a worker burst, also when each burst of
    /// input spreads over many workers, and a light load waits for nothing. The price:
    /// under load a packet may wait up to `hold_calls` calls, and a caller whose input
    /// stops must make one more call (with an empty `Vec`, or `flush`): staged packets do
    /// not move without a call. Defaults: [`DEFAULT_LANE_BATCH`] and [`DEFAULT_LANE_HOLD`].
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config { workers: 2, credit: 64 }, |p: &u64| *p).unwrap();
    /// d.set_batching(8, 16);
    /// let mut b = Vec::new();
    /// d.distribute(&mut (0..8).collect()).unwrap(); // a batch of input: spread, staged
    /// assert_eq!(ws[0].recv_burst(&mut b, 8), Ok(0));
    /// d.distribute(&mut Vec::new()).unwrap(); // no new input: published
    /// assert_eq!(ws[0].recv_burst(&mut b, 8).unwrap() + ws[1].recv_burst(&mut b, 8).unwrap(), 8);
    /// d.distribute(&mut vec![9]).unwrap(); // light input: published at once
    /// assert_eq!(ws[0].recv_burst(&mut b, 8).unwrap() + ws[1].recv_burst(&mut b, 8).unwrap(), 1);
    /// ```
    pub fn set_batching(&mut self, packets: usize, hold_calls: u32) {
        let packets = u64::try_from(packets).unwrap_or(u64::MAX);
        self.batch = packets.min(self.credit / 2).max(1);
        self.hold = u64::from(hold_calls);
        // A pick kept under another slack does not hold under this one.
        self.pick = Pick::NONE;
    }

    /// Turns the hand-back order check (see [`distribute`](Self::distribute)'s panics) on
    /// or off; it is on by default. The check compares the tag of a packet handed back with
    /// the tag of the packet sent at that position, so it needs the tag to be the same when
    /// the packet comes back. Turn it off if workers legitimately rewrite the fields the
    /// `tag` closure reads before [`Worker::done`] (address translation, for instance); the
    /// distributor then trusts workers to hand packets back in order, and saves the `tag`
    /// calls the check makes.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// d.set_order_check(false);
    /// d.distribute(&mut vec![10]).unwrap();
    /// let mut b = Vec::new();
    /// ws[0].recv_burst(&mut b, 8).unwrap();
    /// b[0] = 11; // the worker rewrote the field the tag reads
    /// ws[0].done_burst(&mut b).unwrap();
    /// let mut out = Vec::new();
    /// d.collect(&mut out);
    /// assert_eq!(out, [11]);
    /// ```
    pub fn set_order_check(&mut self, on: bool) {
        self.check_order = on;
    }

    /// Number of active workers.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new(Config { workers: 3, credit: 8 }, |p: &u64| *p).unwrap();
    /// assert_eq!(d.active_workers(), 3);
    /// ```
    pub fn active_workers(&self) -> usize {
        self.active
    }

    /// Packets worker `id` has completed since it was created or added (`None` for an
    /// unknown or removed id).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// assert_eq!(d.worker_completed(0), Some(0));
    /// assert_eq!(d.worker_completed(1), None);
    /// ```
    pub fn worker_completed(&self, id: usize) -> Option<u64> {
        self.lanes
            .get(id)
            .filter(|l| !l.removed)
            .map(|l| l.completed - l.completed_base)
    }

    /// Number of flows in the flow table.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// d.distribute(&mut vec![1, 2, 1]).unwrap();
    /// assert_eq!(d.flows(), 2);
    /// ```
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// The distributor's counters ([`DISTRIBUTOR_STATS`]), readable from any thread.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
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
    /// let (d, _ws) = distributor::new(Config { workers: 1, credit: 8 }, |p: &u64| *p).unwrap();
    /// assert_eq!(d.worker_totals().get("returned"), Some(0));
    /// ```
    pub fn worker_totals(&self) -> GroupSnapshot<5> {
        self.registry.totals()
    }
}

/// Publishes what is staged, as the call that routed it would have: what was sent reaches
/// its worker also when the distributor goes (the workers see
/// [`Disconnected`] once they took it).
impl<T, F> Drop for Distributor<T, F> {
    fn drop(&mut self) {
        for lane in &mut self.lanes {
            if !lane.staged.is_empty() {
                // Fits: the ring holds `credit` slots, and staged packets are within the
                // credit. A waker panicking in the publication is contained there.
                lane.tx.push_burst_from(&mut lane.staged);
            }
        }
    }
}

impl<T, F> fmt::Debug for Distributor<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Distributor")
            .field("workers", &self.lanes.iter().filter(|l| !l.removed).count())
            .field("active", &self.active)
            .field("backlog", &self.backlog.len())
            .finish()
    }
}
