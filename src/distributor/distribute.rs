//! Distributing: a call places new packets (and any backlog) on the workers' lanes under
//! their credit, stages them per lane under load and publishes a lane's batch with one
//! index store, and reads the lanes' returns that are due.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use crate::counter::GroupHandle;

use super::admission::sealed::Admitting;
use super::atomic::Atomic;
use super::config::NoWorkers;
use super::flows::FLOW_TABLE_SOFT_LIMIT;
use super::flows::{FlowTable, TagHasher};
use super::lanes::{Lane, Router};
use super::schedule::Schedule;
use super::stats::{ACCEPTED, BACKPRESSURED};
use super::{ownership, Distributor};

impl<T, F, A> Distributor<T, Atomic<F, A>>
where
    F: FnMut(&T) -> u64,
    A: Admitting<T>,
{
    /// Whether a flow of ownership bucket `bucket` has a packet at a worker (sent, staged
    /// or held by a leaving worker, and not handed back): a scan of the flow table.
    pub(crate) fn bucket_in_flight(&self, bucket: usize) -> bool {
        self.sched.flows.iter().any(|(tag, f)| {
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
                if lane.ooo > 0 && lane.marked(pos) {
                    continue;
                }
                let t = lane.stamps[pos as usize & lane.stamp_mask];
                *by.entry(ownership::bucket_of(t)).or_default() += 1;
            }
        }
        let mut v: Vec<(usize, u64)> = by.into_iter().collect();
        v.sort_unstable();
        v
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
            self.give_back(pkts);
            return Err(NoWorkers);
        }
        Ok(self.route_input(pkts, old, arrived))
    }

    /// The routing pass of [`distribute_polled`](Self::distribute_polled), with a worker
    /// active: the backlog first, then the input (see there).
    #[inline(always)]
    pub(super) fn route_input(
        &mut self,
        pkts: &mut Vec<T>,
        old: &mut usize,
        arrived: u64,
    ) -> usize {
        // (`clear` rewrites a set's control bytes even when it is empty.)
        if !self.sched.blocked.is_empty() {
            self.sched.blocked.clear();
        }
        self.sched.admit.begin_pass();
        self.route_backlog();
        let mut input = std::mem::take(&mut self.scratch);
        std::mem::swap(&mut input, pkts);
        // `scratch` is only ever an emptied input (or new after a panic): `accepted` below
        // counts on `pkts` starting empty.
        debug_assert!(pkts.is_empty());
        let len = input.len();
        let g = PutBack {
            rest: input.drain(..),
            next: 0,
            pkts,
            stats: &mut self.stats,
            entered: None,
            finished: false,
        };
        let Self {
            lanes,
            pick,
            credit,
            batch,
            publish_all,
            sched,
            ..
        } = self;
        let Atomic {
            tag,
            flows,
            blocked,
            admit,
            ..
        } = sched;
        let mut router = Router {
            lanes,
            flows,
            pick: *pick,
            credit: *credit,
            slack: if *publish_all { 0 } else { *batch - 1 },
        };
        *old = route_pass(g, &mut router, tag, blocked, admit, *old, arrived);
        *pick = router.pick;
        // Every packet taken was routed or went back onto `pkts` (empty at the start).
        let accepted = (len - pkts.len()) as u64;
        self.scratch = input;
        self.end_call(accepted, pkts.len() as u64, |s: &mut Atomic<F, A>| {
            &mut s.flows
        });
        accepted as usize
    }
}

impl<T, S: Schedule<T>> Distributor<T, S> {
    /// The end of a call that routed: counts what it `accepted` and left `backpressured`,
    /// forgets idle flows past the table's limit (the schedule's table, from `flows`), and
    /// publishes what is due.
    #[inline(always)]
    pub(super) fn end_call(
        &mut self,
        accepted: u64,
        backpressured: u64,
        flows: impl FnOnce(&mut S) -> &mut FlowTable,
    ) {
        // Counted before the packets are published: the publication may wake a worker's
        // task, whose waker may panic out of `push_staged` (the packets it did not push
        // stay staged for a later call), and a reader that has seen a packet at a worker
        // finds it in the totals.
        let mut delta = [0u64; 5];
        delta[ACCEPTED] = accepted;
        delta[BACKPRESSURED] = backpressured;
        self.stats.add_all(delta);
        // Before the publication too, so a panicking waker does not skip it; flows with
        // staged packets are in flight (their `last` counts them), so it keeps them.
        let lanes = &self.lanes;
        flows(&mut self.sched).prune_idle(|w| lanes[w].completed, FLOW_TABLE_SOFT_LIMIT);
        self.push_staged(true, self.publish_all);
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
    /// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(2), |p: &u64| *p).unwrap();
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
        if self.active == 0 {
            self.give_back(pkts);
            return Err(NoWorkers);
        }
        Ok(S::route_call(self, pkts))
    }

    /// No worker is active: the backlog goes back to the caller at the front of `pkts`
    /// (it is older than they are), giving up what the schedule noted for it.
    #[cold]
    #[inline(never)]
    pub(super) fn give_back(&mut self, pkts: &mut Vec<T>) {
        let mut all = Vec::with_capacity(self.backlog.len() + pkts.len());
        let notes = self.backlog.take_into(&mut all);
        self.sched
            .give_up(notes, &mut self.returned, &mut self.backlog);
        all.append(pkts);
        *pkts = all;
    }
}

/// The routing pass over new input of [`route_input`](Distributor::route_input): takes
/// packets from `g` in order and routes them with `router`, or puts them back (their
/// worker has no credit, their flow is blocked in this pass, or the admission holds them);
/// returns how many of the first `old` packets went back. The guard `g` ends here.
#[inline(always)]
pub(super) fn route_pass<T, F, A>(
    mut g: PutBack<'_, '_, T>,
    router: &mut Router<'_, T>,
    tag: &mut F,
    blocked: &mut HashSet<u64, BuildHasherDefault<TagHasher>>,
    admit: &A,
    old: usize,
    arrived: u64,
) -> usize
where
    F: FnMut(&T) -> u64,
    A: Admitting<T>,
{
    let mut kept_old = 0;
    // Whether any packet may have to wait (checked once here). An unfiltered pass runs the
    // fast loop until the first packet refused for credit (whose tag then joins `blocked`),
    // then the filtering loop for the rest.
    if blocked.is_empty() && !admit.may_hold() {
        // The common case, in a loop of its own that keeps fewer values live: no packet
        // has to wait until one finds no credit.
        while let Some(first) = g.rest.as_slice().first() {
            // Tagged in place: if `tag` panics, the packet is still in the drain and goes
            // back.
            let t = tag(first);
            let Some(p) = g.rest.next() else { break };
            g.next += 1;
            if let Err(p) = router.route(p, t) {
                blocked.insert(t);
                g.pkts.push(p);
                kept_old += usize::from(g.next <= old);
                break;
            }
        }
    }
    while let Some(first) = g.rest.as_slice().first() {
        // As above: tagged in place.
        let t = tag(first);
        let Some(p) = g.rest.next() else { break };
        let is_old = g.next < old;
        g.next += 1;
        let came = if is_old { 0 } else { arrived };
        if blocked.contains(&t) || admit.holds_input(t, came) {
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
    g.finished = true;
    kept_old
}

/// Owns the input packets not yet taken (the rest of a drain of the input); puts them back
/// at the end of the caller's `Vec`, in order, if the user's `tag` panics (the packets
/// already routed stay staged for a later call, and are counted as accepted here: the
/// call's own count never runs then).
pub(super) struct PutBack<'a, 'b, T> {
    pub(super) rest: std::vec::Drain<'b, T>,
    /// Packets taken from the input so far.
    pub(super) next: usize,
    pub(super) pkts: &'a mut Vec<T>,
    pub(super) stats: &'a mut GroupHandle<5>,
    /// Where else the packets routed count when a panic cuts the pass short (a one-stage
    /// pipeline's entries), beside the statistics.
    pub(super) entered: Option<&'a mut u64>,
    /// Set once the pass ran to its end (the call then counts for itself).
    pub(super) finished: bool,
}

impl<T> Drop for PutBack<'_, '_, T> {
    fn drop(&mut self) {
        if !self.finished {
            // Cut short by a panic: of the `next` packets taken, those not back on `pkts`
            // (which held none at the start) were routed.
            let routed = self.next - self.pkts.len();
            self.stats.add(ACCEPTED, routed as u64);
            if let Some(entered) = self.entered.as_deref_mut() {
                *entered += routed as u64;
            }
        }
        self.pkts.extend(self.rest.by_ref());
    }
}
