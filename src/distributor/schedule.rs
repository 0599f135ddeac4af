//! A distributor's scheduling type: what decides which worker takes a packet and what a
//! hand-back means, as a type parameter of [`Distributor`] ([`Atomic`] or [`Ordered`], as
//! an event queue of DPDK's eventdev is `ATOMIC` or `ORDERED`, or a [`Pipeline`] of
//! stages, as the queues of one event device).
//!
//! The distributor's own part (the worker lanes: rings, credit, batching, publication,
//! reading hand-backs in each worker's order) is the same for all; a schedule is called at
//! the points where they differ: a call's routing pass, the packets given back to the
//! caller with [`NoWorkers`](crate::distributor::NoWorkers), and each kind of hand-back. Each
//! lane keeps one `u64` per position of its worker's stream for the schedule (its *stamp*:
//! an atomic schedule's flow tag, which its order check compares; an ordered one's sequence
//! number, which its reorder window releases by; a pipeline's stage and flow key), and each
//! backlog packet one *note* (the poll that read a reschedule, for an atomic schedule; the
//! sequence number it keeps, for an ordered one; the stage it leaves, for a pipeline).
//!
//! The trait is sealed: its calls are the crate's own.

use std::collections::VecDeque;

use super::backlog::Backlog;
use super::lanes::Lane;
use super::Distributor;

#[cfg(doc)]
use super::{Atomic, Ordered, Pipeline};

/// A distributor's scheduling type: [`Atomic`] (made by [`new`](crate::distributor::new) and
/// [`new_boxed`](crate::distributor::new_boxed)), [`Ordered`] (made by
/// [`new_ordered`](crate::distributor::new_ordered)) or [`Pipeline`] (made by
/// [`new_pipeline`](crate::distributor::new_pipeline)). Sealed: the crate's three are the
/// only ones. Calls that make sense for one schedule only are on that schedule's distributor
/// only ([`Distributor::set_order_check`] on an atomic one,
/// [`Distributor::waiting_for_order`] on an ordered one).
pub trait Schedule<T>: sealed::Scheduling<T> {}

impl<T, S: sealed::Scheduling<T>> Schedule<T> for S {}

pub(super) mod sealed {
    use super::{Backlog, Distributor, Lane, VecDeque};

    /// The points where the schedules differ (see the module docs).
    #[allow(private_interfaces)] // sealed: nameable only inside the crate
    pub trait Scheduling<T>: Sized {
        /// Whether the schedule releases packets in the order it accepted them.
        fn is_ordered(&self) -> bool;

        /// A call's routing pass (a worker is active, the return rings were read): the
        /// backlog first, then the input it accepts, taken out of `pkts`; returns how many
        /// it accepted, and publishes what is due.
        fn route_call(d: &mut Distributor<T, Self>, pkts: &mut Vec<T>) -> usize;

        /// Backlog packets with these notes leave the distributor unprocessed (given back
        /// with `NoWorkers`).
        fn give_up(
            &mut self,
            notes: VecDeque<u64>,
            returned: &mut Vec<T>,
            backlog: &mut Backlog<T>,
        );

        /// Whether a burst read past positions handed back out of order needs those
        /// positions ([`took_burst`](Self::took_burst)'s `spread`).
        fn wants_positions(&self) -> bool;

        /// Worker `w` handed back `returned[start..]` processed, at the positions from
        /// `at` on (or at `spread`, past positions handed back out of order); the lane's
        /// accounting is done. A packet that goes on (a pipeline's forward) moves to
        /// `backlog`.
        #[allow(clippy::too_many_arguments)]
        fn took_burst(
            &mut self,
            w: usize,
            lane: &mut Lane<T>,
            returned: &mut Vec<T>,
            backlog: &mut Backlog<T>,
            start: usize,
            at: u64,
            spread: Option<&[u64]>,
        );

        /// The packet at position `pos` was dropped (before the lane's accounting).
        fn dropped(
            &mut self,
            lane: &Lane<T>,
            pos: u64,
            returned: &mut Vec<T>,
            backlog: &mut Backlog<T>,
        );

        /// The packet at position `pos` of worker `w` was rescheduled (or forwarded) by the
        /// read of poll `epoch`: the note its backlog entry keeps (before the lane's
        /// accounting).
        fn rescheduled(
            &mut self,
            w: usize,
            lane: &Lane<T>,
            pos: u64,
            epoch: u64,
            returned: &mut Vec<T>,
            backlog: &mut Backlog<T>,
        ) -> u64;

        /// Worker `w` handed `pkt` back processed out of order, at position `pos`: taken
        /// (into `returned`, or `backlog` if it goes on), with the lane's accounting.
        fn done_at(
            &mut self,
            w: usize,
            lane: &mut Lane<T>,
            pos: u64,
            pkt: T,
            returned: &mut Vec<T>,
            backlog: &mut Backlog<T>,
        );

        /// Worker `w`, leaving, handed back the packet at position `pos` unprocessed (the
        /// last of `lane.leaving`): checked, its note kept in `lane.leaving_notes`.
        fn unprocessed(&mut self, w: usize, lane: &mut Lane<T>, pos: u64);

        /// The note of a backlog packet a leaving worker never received, sent at `pos`.
        fn never_received(lane: &Lane<T>, pos: u64) -> u64;

        /// A dropped worker's `n` packets held (the oldest positions not handed back) are
        /// lost (before the lane's accounting).
        fn lost(&mut self, lane: &Lane<T>, n: u64, returned: &mut Vec<T>, backlog: &mut Backlog<T>);

        /// The reorder window's size, for `Debug` (`None`: not ordered).
        fn window(&self) -> Option<u64>;
    }
}
