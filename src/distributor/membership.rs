//! Membership: workers added, removed and rejoining at run time, and the roster that the
//! [`WorkerRegistry`] publishes.

use std::sync::Arc;

use crate::counter::CounterGroup;

use super::config::MAX_WORKERS;
use super::config::{ConfigError, JoinError};
use super::lanes::roster_of;
use super::protocol::{lane_pair, Parked};
use super::registry::WorkerRegistry;
use super::schedule::Schedule;
use super::worker::{Staging, Worker, WORKER_STATS};
use super::Distributor;

impl<T, S: Schedule<T>> Distributor<T, S> {
    /// Publishes the lanes' current state to the registry (cold path: a worker was added,
    /// left, re-joined or was removed).
    pub(super) fn publish_roster(&self) {
        self.registry
            .publish(roster_of(&self.lanes), self.removed_totals);
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
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
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
        self.take_parked_read(id)
    }

    /// The ring ends of worker `id`, which left, as the return rings read so far say.
    pub(super) fn take_parked_read(&mut self, id: usize) -> Result<Parked<T>, JoinError> {
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
    pub(super) fn activate(&mut self, id: usize, mut parked: Parked<T>) -> Worker<T> {
        let lane = &mut self.lanes[id];
        lane.active = true;
        lane.removed = false;
        self.active += 1;
        // Positions the last worker handed back out of order are all behind the new one's
        // stream (it starts at `sent`).
        parked.handed_bits.fill(0);
        let window = parked.handed_bits.len() * 64;
        let w = Worker {
            id,
            ends: Some(parked),
            held: 0,
            handed: lane.cursor,
            low: lane.sent,
            recvd: lane.sent,
            ooo: 0,
            staged: Staging::new(window),
            control: Arc::clone(&lane.control),
        };
        self.publish_roster();
        w
    }

    /// Adds a worker at run time, beyond those made by [`new`](crate::distributor::new): a handle with fresh
    /// counters, the default wait strategy for the workers then active
    /// ([`default_wait_strategy`](super::default_wait_strategy)) and the configured credit. Its id is the lowest id of a removed worker
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
    /// # Panics
    ///
    /// Never, unless this crate's own bookkeeping broke (a removed worker's lane without its
    /// ring ends).
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
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
                .set_wait_strategy(super::config::default_wait_strategy(self.active + 1));
            #[cfg(feature = "async")]
            parked
                .rx
                .set_async_budget(crate::wait::DEFAULT_ASYNC_BUDGET);
            let lane = &mut self.lanes[id];
            lane.stats = stats;
            lane.passed_on = lane.cursor;
            return Ok(self.activate(id, parked));
        }
        if self.lanes.len() >= MAX_WORKERS {
            return Err(ConfigError::TooManyWorkers(MAX_WORKERS + 1));
        }
        let id = self.lanes.len();
        let (lane, mut worker) = lane_pair(id, self.credit as usize, &self.wake, &self.desk)?;
        worker.set_wait_strategy(super::config::default_wait_strategy(self.active + 1));
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
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(2).credit(8), |p: &u64| *p).unwrap();
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
    /// let (d, _ws) = distributor::new(Config::default().workers(2).credit(8), |p: &u64| *p).unwrap();
    /// assert_eq!(d.registry().active(), 2);
    /// ```
    pub fn registry(&self) -> WorkerRegistry {
        self.registry.clone()
    }
}
