//! Re-joining from the worker's own thread: a [`RejoinToken`] taken from a worker asks the
//! distributor for a new handle once the worker has left, and waits until one of the
//! distributor's calls hands it over (a request and answer through the worker's control
//! block, the distributor looking for requests with one load of a flag per call).

use core::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::sync::atomic::{AtomicBool, Ordering};
use crate::wait::Sleepers;

use super::config::JoinError;
use super::protocol::Control;
use super::schedule::Schedule;
use super::worker::Worker;
use super::Distributor;

/// What a distributor shares with every token of its workers.
pub(crate) struct RejoinDesk {
    /// Set by a token that posted a request; cleared by the call that serves them.
    pending: AtomicBool,
    /// Set when the distributor is dropped: a request would never be answered.
    closed: AtomicBool,
    /// The distributor's sleeper slot, which a request notifies.
    wake: Arc<CachePadded<Sleepers>>,
}

/// A worker's request and its answer (in its control block).
pub(crate) struct Request<T> {
    state: Mutex<State<T>>,
    answered: Condvar,
}

enum State<T> {
    Idle,
    Asked,
    /// (Boxed: a handle is large, and the control block holds this for ever.)
    Granted(Box<Worker<T>>),
    Refused(JoinError),
}

impl<T> Request<T> {
    pub(super) fn new() -> Self {
        Request {
            state: Mutex::new(State::Idle),
            answered: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Nothing panics while the lock is held: the state is whole either way.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Re-joins a worker that left, from any thread (see [`Worker::rejoin_token`]): the
/// distributor's next call hands the new handle over.
pub struct RejoinToken<T> {
    id: usize,
    control: Arc<Control<T>>,
}

impl<T> fmt::Debug for RejoinToken<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RejoinToken").field("id", &self.id).finish()
    }
}

/// Why [`RejoinToken::rejoin`] gave no handle.
pub enum RejoinError<T> {
    /// No call of the distributor answered within the timeout; the request is withdrawn
    /// and the token comes back, to try again.
    Timeout(RejoinToken<T>),
    /// The distributor refused: the worker has not left (it is still active), or it was
    /// removed.
    Refused(JoinError),
    /// The distributor is gone.
    Disconnected,
}

impl<T> fmt::Debug for RejoinError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejoinError::Timeout(t) => f.debug_tuple("Timeout").field(t).finish(),
            RejoinError::Refused(e) => f.debug_tuple("Refused").field(e).finish(),
            RejoinError::Disconnected => f.write_str("Disconnected"),
        }
    }
}

impl<T> fmt::Display for RejoinError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejoinError::Timeout(t) => write!(
                f,
                "worker {}: no distributor call answered the re-join in time",
                t.id
            ),
            RejoinError::Refused(e) => write!(f, "re-join refused: {e}"),
            RejoinError::Disconnected => f.write_str("re-join: the distributor is gone"),
        }
    }
}

impl<T> std::error::Error for RejoinError<T> {}

impl<T> RejoinToken<T> {
    pub(crate) fn new(id: usize, control: Arc<Control<T>>) -> Self {
        RejoinToken { id, control }
    }

    /// The worker's id.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Asks the distributor for a new handle of this worker, which left, and waits until a
    /// call of the distributor ([`distribute`](Distributor::distribute),
    /// [`collect`](Distributor::collect) and the calls built on them, their waiting forms
    /// included, which this request wakes) hands it over, as
    /// [`Distributor::rejoin`] would.
    ///
    /// # Errors
    ///
    /// [`RejoinError::Timeout`] (the token back) if no call answered within `timeout`;
    /// [`RejoinError::Refused`] if the worker had not left or was removed;
    /// [`RejoinError::Disconnected`] if the distributor is gone.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::distributor::{self, Config};
    /// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let w = ws.pop().unwrap();
    /// let worker = std::thread::spawn(move || {
    ///     let token = w.rejoin_token();
    ///     w.leave(Vec::new()).unwrap();
    ///     // ... away for a while; then back, from this thread:
    ///     let mut w = token.rejoin(Duration::from_secs(10)).unwrap();
    ///     let mut b = Vec::new();
    ///     w.recv_burst_wait(&mut b, 8, Duration::from_secs(10)).unwrap();
    ///     w.done_burst(&mut b).unwrap();
    /// });
    /// let mut input = vec![7];
    /// let mut out = Vec::new();
    /// while out.is_empty() {
    ///     let _ = d.distribute(&mut input); // `NoWorkers` while it is away
    ///     d.collect_wait(&mut out, Duration::from_millis(1)).ok();
    /// }
    /// worker.join().unwrap();
    /// assert_eq!(out, [7]);
    /// ```
    pub fn rejoin(self, timeout: Duration) -> Result<Worker<T>, RejoinError<T>> {
        let deadline = Instant::now().checked_add(timeout);
        let req = &self.control.rejoin;
        let mut state = req.lock();
        *state = State::Asked;
        drop(state);
        let desk = &self.control.desk;
        // Release: pairs with the serving call's Acquire swap, which then sees the request
        // and this worker's leave marker, both published before.
        desk.pending.store(true, Ordering::Release);
        // A distributor asleep in a wait polls again.
        desk.wake.notify();
        let mut nap = Duration::from_millis(1);
        state = req.lock();
        loop {
            match std::mem::replace(&mut *state, State::Idle) {
                State::Granted(w) => return Ok(*w),
                State::Refused(e) => return Err(RejoinError::Refused(e)),
                State::Asked | State::Idle => *state = State::Asked,
            }
            // Acquire: pairs with the Release store of `RejoinDesk::close`.
            if desk.closed.load(Ordering::Acquire) {
                *state = State::Idle;
                return Err(RejoinError::Disconnected);
            }
            let now = Instant::now();
            let left = deadline.map_or(nap, |d| d.saturating_duration_since(now));
            if left.is_zero() {
                *state = State::Idle;
                drop(state);
                return Err(RejoinError::Timeout(self));
            }
            // Naps bounded so a distributor dropped without answering is seen.
            let wait = left.min(nap);
            nap = (nap * 2).min(Duration::from_millis(50));
            state = req
                .answered
                .wait_timeout(state, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl<T, S: Schedule<T>> Distributor<T, S> {
    /// Serves the re-join requests of workers' tokens, if a token posted one (one load
    /// when none did). Called at the start of the calls that read the return rings.
    #[inline]
    pub(super) fn serve_rejoins(&mut self) {
        // A hint: a flag seen late is seen by a later call (the token also wakes a waiting
        // one), and the swap below orders the request.
        if self.desk.pending.load(Ordering::Relaxed) {
            self.serve_rejoins_now();
        }
    }

    /// Whether a token posted a request no call has served yet.
    pub(super) fn rejoin_asked(&self) -> bool {
        // Relaxed: a hint for the waits' re-check, which the sleeper protocol orders after
        // the token's store (it notifies after storing); the serving swap does the rest.
        self.desk.pending.load(Ordering::Relaxed)
    }

    /// The requests, each answered under its own lock (no user code runs there: the
    /// return rings are read before any is taken).
    #[cold]
    #[inline(never)]
    fn serve_rejoins_now(&mut self) {
        // Pairs with the token's Release store: its worker's leave and its request are
        // visible from here on.
        if !self.desk.pending.swap(false, Ordering::Acquire) {
            return;
        }
        // The leaves are read before any request is looked at. If user code panics in
        // this poll, the flag goes up again and a later call serves the requests.
        let mut again = Repend {
            desk: Arc::clone(&self.desk),
            armed: true,
        };
        self.poll_returns();
        again.armed = false;
        drop(again);
        for id in 0..self.lanes.len() {
            let control = Arc::clone(&self.lanes[id].control);
            let mut state = control.rejoin.lock();
            if !matches!(*state, State::Asked) {
                continue;
            }
            *state = match self.take_parked_read(id) {
                Ok(parked) => State::Granted(Box::new(self.activate(id, parked))),
                Err(JoinError::Active(_)) if self.leave_posted(&control) => {
                    // Its leave is on the way (posted after this poll's reads): a later
                    // call serves it. Relaxed: only this thread reads the flag to serve, and
                    // the request is already in place under its lock.
                    self.desk.pending.store(true, Ordering::Relaxed);
                    continue;
                }
                Err(e) => State::Refused(e),
            };
            drop(state);
            control.rejoin.answered.notify_all();
        }
    }

    /// Whether the worker of `control` has parked its ring ends: its leave marker is
    /// posted, though maybe not read yet.
    fn leave_posted(&self, control: &Control<T>) -> bool {
        control
            .parked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

/// Raises the desk's flag again when dropped armed (by a panic in the poll before the
/// requests are served).
struct Repend {
    desk: Arc<RejoinDesk>,
    armed: bool,
}

impl Drop for Repend {
    fn drop(&mut self) {
        if self.armed {
            // Release, as a token's store: the requests stay visible to the next swap.
            self.desk.pending.store(true, Ordering::Release);
        }
    }
}

impl RejoinDesk {
    pub(super) fn new(wake: &Arc<CachePadded<Sleepers>>) -> Self {
        RejoinDesk {
            pending: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            wake: Arc::clone(wake),
        }
    }

    /// The distributor is gone: waiting tokens stop waiting.
    pub(super) fn close<T>(&self, controls: impl Iterator<Item = Arc<Control<T>>>) {
        // Release: pairs with the waiting tokens' Acquire load.
        self.closed.store(true, Ordering::Release);
        for c in controls {
            // Taking the lock orders the flag before a waiter's next look.
            drop(c.rejoin.lock());
            c.rejoin.answered.notify_all();
        }
    }
}
