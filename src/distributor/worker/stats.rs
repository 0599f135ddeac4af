//! A worker's counters: their names, in the order of a snapshot, and their indices.

/// Names of the per-worker statistics, in the order of the worker counter group. Every
/// packet a worker received is, once it is out of the worker's hands, counted once more:
/// handed back done (`returned`), `rescheduled`, `dropped`, `lost` (held by a worker
/// dropped without leaving), or `redistributed` (handed back unprocessed by
/// [`Worker::leave`](super::Worker::leave), and then received again by another worker). So `received` equals the
/// other five plus the packets the workers hold.
///
/// ```
/// use flowline::distributor::{self, Config, WORKER_STATS};
/// assert_eq!(WORKER_STATS[0], "received");
/// let (mut d, mut ws) = distributor::new(Config::default().workers(2).credit(8), |p: &u64| *p).unwrap();
/// d.distribute(&mut vec![5, 5]).unwrap(); // one flow: both to one worker
/// let mut b = Vec::new();
/// let i = ws.iter_mut().position(|w| w.recv_burst(&mut b, 8).unwrap() > 0).unwrap();
/// ws.remove(i).leave(std::mem::take(&mut b)).unwrap(); // both back, unprocessed
/// let (mut again, mut out) = (Vec::new(), Vec::new());
/// while d.collect(&mut out) < 2 {
///     d.distribute(&mut again).unwrap(); // the leave is read: both go to the other worker
///     if ws[0].recv_burst(&mut b, 8).unwrap() > 0 {
///         ws[0].done_burst(&mut b).unwrap();
///     }
/// }
/// let t = d.worker_totals();
/// let [received, returned, rescheduled, dropped, lost, redistributed] = *t.values();
/// assert_eq!((received, returned, redistributed), (4, 2, 2));
/// assert_eq!(received, returned + rescheduled + dropped + lost + redistributed);
/// ```
pub const WORKER_STATS: [&str; 6] = [
    "received",
    "returned",
    "rescheduled",
    "dropped",
    "lost",
    "redistributed",
];

/// How many statistics a worker has (the length of [`WORKER_STATS`]).
pub(crate) const WORKER_FIELDS: usize = 6;

/// Index of "received" in [`WORKER_STATS`].
pub(crate) const RECEIVED: usize = 0;
pub(crate) const RETURNED: usize = 1;
pub(crate) const RESCHEDULED: usize = 2;
pub(crate) const DROPPED: usize = 3;
pub(crate) const LOST: usize = 4;
pub(crate) const REDISTRIBUTED: usize = 5;
