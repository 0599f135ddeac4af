//! The distributor's own counters: their names, in the order of a snapshot, and their
//! indices.

/// Names of the distributor's statistics, in the order of [`Distributor::stats`](super::Distributor::stats).
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

pub(crate) const ACCEPTED: usize = 0;
pub(crate) const BACKPRESSURED: usize = 1;
pub(crate) const RESCHEDULED: usize = 2;
pub(crate) const DROPPED: usize = 3;
/// Packets a worker held when its handle was dropped without `leave`.
pub(crate) const LOST: usize = 4;
