//! Atomic scheduling: one flow on one worker at a time, and a flow's packets processed in
//! the order the distributor received them (the ATOMIC queue type of DPDK's eventdev, and
//! `rte_distributor`'s flow affinity). A flow table maps each flow tag to its worker and the
//! position of its last packet in that worker's stream; a flow with nothing in flight may
//! move to the least loaded worker. Hand-backs are checked against the tag sent at their
//! position (the order check).
//!
//! This file holds the schedule's type, its part of reading hand-backs, and the routing of
//! the backlog; a call's routing pass over new input is in
//! [`distribute`](super::distribute).

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use core::fmt;

use super::admission::sealed::Admitting;
use super::admission::AdmitAll;
use super::backlog::Backlog;
use super::flows::{FlowTable, TagHasher};
use super::lanes::{Lane, Pick, Router};
use super::schedule::sealed::Scheduling;
use super::Distributor;

/// The atomic schedule of a [`Distributor`] (made by [`new`](crate::distributor::new) and
/// [`new_boxed`](crate::distributor::new_boxed)): packets of one flow tag (given by the
/// tag function `F`) go to one worker at a time, in order; see the
/// [module documentation](crate::distributor). `Distributor<T>` names the atomic
/// distributor with a boxed tag function ([`BoxTag`](crate::distributor::BoxTag)).
pub struct Atomic<F, A = AdmitAll> {
    pub(super) tag: F,
    pub(super) flows: FlowTable,
    /// Tags refused in the current routing pass (their worker is out of credit): later
    /// packets of those flows wait too, so each flow keeps its order.
    pub(super) blocked: HashSet<u64, BuildHasherDefault<TagHasher>>,
    /// Whether hand-backs are checked against the tag sent at their position.
    pub(super) check_order: bool,
    /// Scratch for the backlog's tags ([`tag_backlog`](Distributor::tag_backlog)).
    pub(super) backlog_tags: Vec<u64>,
    /// Which packets a routing pass places now ([`AdmitAll`] on its own; a node's
    /// admission in the multi-node layout).
    pub(super) admit: A,
}

impl<F> Atomic<F> {
    /// The schedule of a new distributor on its own, with tag function `tag`.
    pub(super) fn new(tag: F) -> Self {
        Atomic::with_admission(tag, AdmitAll)
    }
}

impl<F, A> Atomic<F, A> {
    /// The schedule of a new distributor with tag function `tag` and admission `admit`.
    pub(super) fn with_admission(tag: F, admit: A) -> Self {
        Atomic {
            tag,
            flows: FlowTable::default(),
            blocked: HashSet::default(),
            check_order: true,
            backlog_tags: Vec::new(),
            admit,
        }
    }
}

impl<F, A: fmt::Debug> fmt::Debug for Atomic<F, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Atomic")
            .field("flows", &self.flows.len())
            .field("check_order", &self.check_order)
            .field("admit", &self.admit)
            .finish_non_exhaustive()
    }
}

#[allow(private_interfaces)] // sealed: nameable only inside the crate
impl<T, F, A> Scheduling<T> for Atomic<F, A>
where
    F: FnMut(&T) -> u64,
    A: Admitting<T>,
{
    #[inline(always)]
    fn is_ordered(&self) -> bool {
        false
    }

    #[inline(always)]
    fn route_call(d: &mut Distributor<T, Self>, pkts: &mut Vec<T>) -> usize {
        // Only a node's own steps wait behind its queues.
        d.sched.admit.own_call();
        d.route_input(pkts, &mut 0, u64::MAX)
    }

    #[inline(always)]
    fn give_up(
        &mut self,
        _notes: std::collections::VecDeque<u64>,
        _returned: &mut Vec<T>,
        _backlog: &mut Backlog<T>,
    ) {
    }

    #[inline(always)]
    fn wants_positions(&self) -> bool {
        self.check_order
    }

    /// The order check: every packet of the burst in debug builds and past positions
    /// handed back out of order; one per burst, at a rotating offset, otherwise.
    #[inline(always)]
    fn took_burst(
        &mut self,
        w: usize,
        lane: &mut Lane<T>,
        returned: &mut Vec<T>,
        _backlog: &mut Backlog<T>,
        start: usize,
        at: u64,
        spread: Option<&[u64]>,
    ) {
        if !self.check_order {
            return;
        }
        lane.check_burst(w, &returned[start..], at, spread, &mut self.tag);
    }

    #[inline(always)]
    fn dropped(
        &mut self,
        _lane: &Lane<T>,
        _pos: u64,
        _returned: &mut Vec<T>,
        _backlog: &mut Backlog<T>,
    ) {
    }

    #[inline(always)]
    fn rescheduled(
        &mut self,
        _w: usize,
        _lane: &Lane<T>,
        _pos: u64,
        epoch: u64,
        _returned: &mut Vec<T>,
        _backlog: &mut Backlog<T>,
    ) -> u64 {
        // Routed after what arrived before this poll, before what arrives after it.
        epoch
    }

    /// Kept and accounted, then (sampled in release builds) checked: the packet must be
    /// the one sent at `pos`, and must not overtake an older packet of its flow.
    #[inline(always)]
    fn done_at(
        &mut self,
        w: usize,
        lane: &mut Lane<T>,
        pos: u64,
        pkt: T,
        returned: &mut Vec<T>,
        _backlog: &mut Backlog<T>,
    ) {
        returned.push(pkt);
        let checked = self.check_order && lane.sample_ooo();
        lane.complete_at(w, pos, checked);
        if checked {
            let t = (self.tag)(returned.last().expect("just pushed"));
            lane.check(w, pos, t);
        }
    }

    /// Noted as older than anything of its flow not yet placed (0), then checked (the
    /// user's `tag` runs after the packet is kept: a panic loses nothing).
    #[inline(always)]
    fn unprocessed(&mut self, w: usize, lane: &mut Lane<T>, pos: u64) {
        lane.leaving_notes.push(0);
        if self.check_order {
            let t = (self.tag)(lane.leaving.last().expect("just pushed"));
            lane.check(w, pos, t);
        }
    }

    #[inline(always)]
    fn never_received(_lane: &Lane<T>, _pos: u64) -> u64 {
        0
    }

    #[inline(always)]
    fn lost(
        &mut self,
        _lane: &Lane<T>,
        _n: u64,
        _returned: &mut Vec<T>,
        _backlog: &mut Backlog<T>,
    ) {
    }

    fn window(&self) -> Option<u64> {
        None
    }
}

impl<T, F, A> Distributor<T, Atomic<F, A>>
where
    F: FnMut(&T) -> u64,
    A: Admitting<T>,
{
    /// Routes `pkt` (tag `t`) to a worker's staging buffer, or gives it back. One flow-table
    /// lookup per packet.
    #[inline(always)]
    pub(super) fn route(&mut self, pkt: T, t: u64) -> Result<(), T> {
        let slack = self.slack();
        let mut router = Router {
            lanes: &mut self.lanes,
            flows: &mut self.sched.flows,
            pick: self.pick,
            credit: self.credit,
            slack,
        };
        let r = router.route(pkt, t);
        self.pick = router.pick;
        r
    }

    /// Routes as much of the backlog as possible; returns whether it is now empty. Tags of
    /// backlog packets left behind are added to `blocked`.
    pub(super) fn route_backlog(&mut self) {
        // A new pass: completions read since the last one may have lowered any load.
        self.pick = Pick::NONE;
        if self.backlog.is_empty() {
            return;
        }
        let tags = self.tag_backlog();
        // The packets left behind keep their order.
        for &t in &tags {
            let (p, at) = self.backlog.pop_front().expect("counted");
            let Some(p) = self.sched.admit.try_export(t, p, at) else {
                continue;
            };
            let blocked = !self.sched.blocked.is_empty() && self.sched.blocked.contains(&t);
            let keep = if blocked || self.sched.admit.holds_backlog(t, at) {
                Some(p)
            } else {
                match self.route(p, t) {
                    Ok(()) => None,
                    Err(p) => {
                        self.sched.blocked.insert(t);
                        Some(p)
                    }
                }
            };
            if let Some(p) = keep {
                self.backlog.push_back(p, at);
            }
        }
        self.sched.backlog_tags = tags;
    }

    /// The backlog's tags, in order, with the backlog untouched: the user's `tag` runs
    /// here, before any packet moves, so a panic leaves the backlog as it was (a panic
    /// half-way through a pass that rotates it would leave it out of order). The caller
    /// gives the `Vec` back to `backlog_tags` (its allocation; lost on a panic).
    pub(super) fn tag_backlog(&mut self) -> Vec<u64> {
        let mut tags = core::mem::take(&mut self.sched.backlog_tags);
        tags.clear();
        for p in self.backlog.pkts() {
            tags.push((self.sched.tag)(p));
        }
        tags
    }

    /// Reads the workers' return rings and routes the backlog now, so that a reschedule
    /// read here goes out before input the caller splits up next (the multi-node layout
    /// sends reschedules to other nodes' tags over a bridge, ahead of later input).
    /// The node polls first ([`poll_returns`](Self::poll_returns)) and sets `behind`.
    pub(crate) fn route_polled(&mut self) {
        if self.active > 0 {
            self.sched.blocked.clear();
            self.sched.admit.begin_pass();
            self.route_backlog();
            self.push_staged(false, self.publish_all);
        } else {
            // No worker to route to, but reschedules to other nodes' tags still go there
            // first (the rest of the backlog goes back with `NoWorkers`).
            let tags = self.tag_backlog();
            for &t in &tags {
                let (p, at) = self.backlog.pop_front().expect("counted");
                if let Some(p) = self.sched.admit.try_export(t, p, at) {
                    self.backlog.push_back(p, at);
                }
            }
            self.sched.backlog_tags = tags;
        }
    }
}
