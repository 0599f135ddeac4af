//! The distributor's configuration ([`Config`]), its run-time settings, and the errors
//! its calls return.

use core::fmt;

use crate::fifo::CapacityError;
use crate::wait::WaitStrategy;

use super::atomic::Atomic;
use super::lanes::Pick;
use super::reorder::MAX_WINDOW;
use super::schedule::Schedule;
use super::Distributor;

/// The wait strategy a distributor of `workers` workers starts with, for its own waits
/// and its workers' ([`WaitStrategy::default`], spinning first), unless the distributor's
/// thread and its workers outnumber the CPUs this process may use: then no spins
/// (`SpinPark { spins: 0, yields: 8 }`), since a thread spinning there keeps a CPU from
/// the thread it waits for. A worker added later starts with the strategy for the workers
/// then active. `set_wait_strategy` overrides either.
///
/// ```
/// use flowline::distributor::default_wait_strategy;
/// use flowline::wait::WaitStrategy;
/// let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
/// assert_eq!(default_wait_strategy(cpus - 1), WaitStrategy::default());
/// assert_eq!(default_wait_strategy(cpus), WaitStrategy::SpinPark { spins: 0, yields: 8 });
/// ```
#[must_use]
pub fn default_wait_strategy(workers: usize) -> WaitStrategy {
    if workers.saturating_add(1) > crate::topology::available_cpus() {
        WaitStrategy::SpinPark {
            spins: 0,
            yields: 8,
        }
    } else {
        WaitStrategy::default()
    }
}

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

/// Distributor configuration: start from [`Config::default`] and set what differs
/// (non-exhaustive: later settings get defaults of their own).
///
/// ```
/// let c = flowline::distributor::Config::default().workers(4).credit(128);
/// assert_eq!((c.workers, c.credit), (4, 128));
/// assert!(flowline::distributor::new(c, |p: &u64| *p).is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Number of workers, 1 to [`MAX_WORKERS`].
    pub workers: usize,
    /// Packets one worker may hold at once (sent and not yet handed back), 1 to
    /// [`MAX_CREDIT`]: the depth of its rings. Larger absorbs jitter; smaller bounds the
    /// work a stalled worker sits on.
    pub credit: usize,
}

impl Config {
    /// This configuration with `workers` workers (1 to [`MAX_WORKERS`]; checked when the
    /// distributor is made).
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// This configuration with `credit` packets per worker (1 to [`MAX_CREDIT`]; checked
    /// when the distributor is made).
    #[must_use]
    pub fn credit(mut self, credit: usize) -> Self {
        self.credit = credit;
        self
    }
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

/// A configuration that cannot be honoured. Non-exhaustive: later settings may bring
/// errors of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
///
/// ```
/// use flowline::distributor::{self, Config, ConfigError};
/// let e = distributor::new(Config::default().workers(1).credit(0), |p: &u64| *p).unwrap_err();
/// assert_eq!(e, ConfigError::BadCredit(0));
/// ```
pub enum ConfigError {
    /// `workers` is 0 (named apart from [`NoWorkers`], the run-time error of a distributor
    /// whose workers all left).
    ZeroWorkers,
    /// `workers` is above [`MAX_WORKERS`].
    TooManyWorkers(usize),
    /// `credit` is 0 or above [`MAX_CREDIT`].
    BadCredit(usize),
    /// A worker's rings (or an ordered distributor's reorder window) could not be
    /// allocated (the allocator refused).
    AllocFailed(CapacityError),
    /// An ordered distributor's reorder window is 0 or above [`MAX_WINDOW`] packets.
    BadWindow(usize),
    /// A pipeline has no stage, or more than
    /// [`MAX_STAGES`](crate::distributor::MAX_STAGES).
    BadStages(usize),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroWorkers => write!(f, "a distributor needs at least one worker"),
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
                "could not allocate a worker's rings or the reorder window ({e}): use fewer \
                 workers, a smaller credit or a smaller window"
            ),
            ConfigError::BadWindow(w) => write!(
                f,
                "reorder window {w} is out of range: use 1 to {MAX_WINDOW} packets"
            ),
            ConfigError::BadStages(n) => write!(
                f,
                "{n} pipeline stages asked for: use 1 to {} stages",
                crate::distributor::MAX_STAGES
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
/// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
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
/// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
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
        /// it [`leave`](crate::distributor::Worker::leave), to end the wait.
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
/// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
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

impl<T, S: Schedule<T>> Distributor<T, S> {
    /// **Testing only:** sets the flush's first and longest nap (1 ms and 8 ms by
    /// default), so a test can make a lost wake-up show as a flush that times out. Hidden
    /// from the docs and outside any semver promise.
    #[doc(hidden)]
    #[cfg(feature = "__test_hooks")]
    pub fn set_flush_naps(&mut self, first: std::time::Duration, longest: std::time::Duration) {
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
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(2).credit(64), |p: &u64| *p).unwrap();
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
}

impl<T, F, A> Distributor<T, Atomic<F, A>> {
    /// Turns the hand-back order check (see [`distribute`](Self::distribute)'s panics) on
    /// or off; it is on by default. The check compares the tag of a packet handed back with
    /// the tag of the packet sent at that position, so it needs the tag to be the same when
    /// the packet comes back. Turn it off if workers legitimately rewrite the fields the
    /// `tag` closure reads before [`Worker::done`](crate::distributor::Worker::done) (address translation, for instance); the
    /// distributor then trusts workers to hand packets back in order, and saves the `tag`
    /// calls the check makes.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
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
        self.sched.check_order = on;
    }
}
