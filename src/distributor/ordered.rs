//! Ordered scheduling: any worker with credit takes any packet, and the packets come back
//! out of [`collect`](Distributor::collect) in the order the distributor accepted them,
//! through a bounded reorder window (the ORDERED queue type of DPDK's eventdev, whose sw
//! and DLB devices restore order the same way: a sequence number per packet at
//! admission, a window released in sequence order).
//!
//! Routing needs no flow table: each packet goes to the least loaded worker, or one within
//! a lane batch of it, so bursts stay together on one worker (one line transfer still
//! moves a burst). The sequence number is the distributor's own: it is kept, per position
//! of a worker's stream, where an atomic distributor keeps the tag for its order check,
//! and the packet travels bare.

use std::collections::VecDeque;

use core::fmt;

use super::backlog::Backlog;
use super::config::{Config, ConfigError};
use super::handbacks::unmarked_from;
use super::lanes::Lane;
use super::reorder::Reorder;
use super::schedule::sealed::Scheduling;
use super::stats::{ACCEPTED, BACKPRESSURED};
use super::worker::Worker;
use super::Distributor;

/// A backlog packet's note when it has no sequence number yet (a rescheduled packet: it
/// gets a new one when it is routed again).
const NO_SEQ: u64 = u64::MAX;

/// The ordered schedule of a [`Distributor`] (made by [`new_ordered`]): any worker with
/// credit takes any packet, and packets leave [`collect`](Distributor::collect) in the
/// order they were accepted, through a bounded reorder window.
pub struct Ordered<T> {
    pub(super) window: Reorder<T>,
}

impl<T> fmt::Debug for Ordered<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ordered")
            .field("window", &self.window.window())
            .field("waiting", &self.window.waiting())
            .finish()
    }
}

/// Makes an **ordered** distributor and its `config.workers` workers: any worker with
/// credit may take any packet (one heavy flow spreads over every worker), and
/// [`collect`](Distributor::collect) gives the packets back in the order
/// [`distribute`](Distributor::distribute) accepted them, across all flows (so every flow's
/// order holds too).
///
/// Every accepted packet takes a slot of a reorder window of `window` packets until it is
/// released: a packet handed back waits there for every older one. A dropped,
/// rescheduled or lost packet gives its slot up (a rescheduled packet is accepted again as
/// new, with a new place in the order); packets a leaving worker hands back unprocessed,
/// and those it never received, keep their place and go to another worker. While the
/// window is full (the oldest packet is still at a slow worker), `distribute` accepts
/// nothing and leaves the input with the caller, as it does when credit runs out: nothing
/// is dropped. A window of a few times `workers * credit` lets a worker lag by a few
/// credits' worth of packets before admission stops. A worker handle that is never
/// dropped (forgotten, or its thread blocked for good) holds its oldest packet's place
/// for good: admission stops once the window is full, and a
/// [`flush`](Distributor::flush) times out naming that worker.
///
/// Workers use the same calls as with an atomic distributor; they may hand packets back
/// in any order with [`Worker::done_at`] and the other `_at` calls. The distributor makes
/// no order check (an ordered distributor has no `set_order_check`): the in-order calls
/// ([`Worker::done`], [`Worker::done_burst`], [`Worker::leave`]'s packets, ...) are taken
/// as handing back the oldest packets held, so a worker that passes them in another order
/// swaps those packets' places in the output. Pipelines that need per-flow state chain an
/// ordered distributor into an atomic one (see the `pipeline` example's two-stage form).
/// The multi-node layout ([`nodes`](crate::distributor::nodes)) is atomic only.
///
/// Release is in global order (one head, one slot per packet: the cost is a compare per
/// packet handed back in sequence and a slot write and read for the others), not per flow
/// (which would let other flows pass a slow packet, at the price of a queue per flow).
///
/// # Errors
///
/// As [`new`](crate::distributor::new), and [`ConfigError::BadWindow`] for a window of 0
/// or above [`MAX_WINDOW`](crate::distributor::MAX_WINDOW).
///
/// ```
/// use flowline::distributor::{self, Config};
/// let (mut d, mut ws) = distributor::new_ordered::<u64>(Config::default().workers(2).credit(8), 64).unwrap();
/// d.distribute(&mut vec![1, 2, 3]).unwrap(); // one flow, spread over both workers
/// let (mut a, mut b) = (Vec::new(), Vec::new());
/// let got = ws[0].recv_burst(&mut a, 8).unwrap() + ws[1].recv_burst(&mut b, 8).unwrap();
/// assert_eq!(got, 3);
/// // The worker that holds the newer packets finishes first...
/// let (old, new) = if a.contains(&1) { (0, 1) } else { (1, 0) };
/// let (mut old_b, mut new_b) = if old == 0 { (a, b) } else { (b, a) };
/// ws[new].done_burst(&mut new_b).unwrap();
/// let mut out = Vec::new();
/// d.collect(&mut out);
/// assert!(out.is_empty()); // ...and waits for the older ones.
/// ws[old].done_burst(&mut old_b).unwrap();
/// d.collect(&mut out);
/// assert_eq!(out, [1, 2, 3]);
/// ```
#[allow(clippy::type_complexity)]
pub fn new_ordered<T>(
    config: Config,
    window: usize,
) -> Result<(Distributor<T, Ordered<T>>, Vec<Worker<T>>), ConfigError> {
    let window = Reorder::new(window)?;
    Distributor::build(config, Ordered { window })
}

impl<T> Distributor<T, Ordered<T>> {
    /// Packets handed back and held for an older one: they leave with
    /// [`collect`](Self::collect) once every older packet is back or given up.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new_ordered::<u64>(Config::default().workers(1).credit(8), 16).unwrap();
    /// assert_eq!(d.waiting_for_order(), 0);
    /// ```
    pub fn waiting_for_order(&self) -> usize {
        self.sched.window.waiting() as usize
    }

    /// A call's routing pass (a worker is active): routes the backlog, then stamps and
    /// routes input while the window has room and a worker has credit.
    fn route_ordered(&mut self, pkts: &mut Vec<T>) -> usize {
        self.route_backlog_ordered();
        let mut input = std::mem::take(&mut self.scratch);
        std::mem::swap(&mut input, pkts);
        let len = input.len();
        {
            // A run per worker: a lane batch (one burst, one index store), 1 unbatched.
            let run = self.batch;
            let Self {
                lanes,
                sched,
                credit,
                ..
            } = self;
            let win = &mut sched.window;
            let mut rest = input.drain(..);
            // No user code runs in this loop (no tag, no waker): nothing can cut it short.
            'runs: while win.room() > 0 && rest.len() > 0 {
                let Some((w, n)) = pick_run(lanes, *credit, run, &mut win.turn) else {
                    break;
                };
                for _ in 0..n {
                    if win.room() == 0 {
                        break 'runs;
                    }
                    let Some(p) = rest.next() else { break 'runs };
                    let seq = win.stamp();
                    lanes[w].send(p, seq);
                }
            }
            pkts.extend(rest);
        }
        self.scratch = input;
        let accepted = (len - pkts.len()) as u64;
        let mut delta = [0u64; 5];
        delta[ACCEPTED] = accepted;
        delta[BACKPRESSURED] = pkts.len() as u64;
        // Counted before the publication, whose waker may panic (see `distribute_polled`).
        self.stats.add_all(delta);
        // A full window gathers no more: what is staged goes out now, not after the hold.
        let full = self.sched.window.room() == 0;
        self.push_staged(true, self.publish_all || full);
        accepted as usize
    }

    /// Routes the backlog of an ordered distributor, oldest first, while workers have
    /// credit: packets a leaving worker handed back keep their sequence number; a
    /// rescheduled packet gets a new one, if the window has room.
    fn route_backlog_ordered(&mut self) {
        let run = self.batch;
        let Self {
            lanes,
            sched,
            credit,
            backlog,
            ..
        } = self;
        let win = &mut sched.window;
        'runs: while !backlog.is_empty() {
            let Some((w, n)) = pick_run(lanes, *credit, run, &mut win.turn) else {
                break;
            };
            for _ in 0..n {
                let Some(at) = backlog.front_note() else {
                    break 'runs;
                };
                if at == NO_SEQ && win.room() == 0 {
                    break 'runs;
                }
                let (p, _) = backlog.pop_front().expect("a note is a packet's");
                let seq = if at == NO_SEQ { win.stamp() } else { at };
                lanes[w].send(p, seq);
            }
        }
    }
}

#[allow(private_interfaces)] // sealed: nameable only inside the crate
impl<T> Scheduling<T> for Ordered<T> {
    #[inline(always)]
    fn is_ordered(&self) -> bool {
        true
    }

    fn route_call(d: &mut Distributor<T, Self>, pkts: &mut Vec<T>) -> usize {
        d.route_ordered(pkts)
    }

    /// Packets that leave unprocessed (given back with `NoWorkers`) give their slots up.
    #[cold]
    #[inline(never)]
    fn give_up(&mut self, notes: VecDeque<u64>, returned: &mut Vec<T>, _backlog: &mut Backlog<T>) {
        for s in notes {
            if s != NO_SEQ {
                self.window.skip(s, returned);
            }
        }
    }

    #[inline(always)]
    fn wants_positions(&self) -> bool {
        true
    }

    /// The burst's sequence numbers are kept at its positions: it goes through the window.
    #[inline(always)]
    fn took_burst(
        &mut self,
        _w: usize,
        lane: &mut Lane<T>,
        returned: &mut Vec<T>,
        _backlog: &mut Backlog<T>,
        start: usize,
        at: u64,
        spread: Option<&[u64]>,
    ) {
        let (stamps, m) = (&lane.stamps, lane.stamp_mask);
        match spread {
            Some(ps) => self
                .window
                .take_burst(returned, start, |k| stamps[ps[k] as usize & m]),
            None => self
                .window
                .take_burst(returned, start, |k| stamps[(at + k as u64) as usize & m]),
        }
    }

    /// Its place in the order is given up.
    #[inline(always)]
    fn dropped(
        &mut self,
        lane: &Lane<T>,
        pos: u64,
        returned: &mut Vec<T>,
        _backlog: &mut Backlog<T>,
    ) {
        self.window.skip(lane.stamp(pos), returned);
    }

    /// A new arrival: its old place in the order is given up, and it gets a new one.
    #[inline(always)]
    fn rescheduled(
        &mut self,
        _w: usize,
        lane: &Lane<T>,
        pos: u64,
        _epoch: u64,
        returned: &mut Vec<T>,
        _backlog: &mut Backlog<T>,
    ) -> u64 {
        self.window.skip(lane.stamp(pos), returned);
        NO_SEQ
    }

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
        self.window.put(lane.stamp(pos), pkt, returned);
        lane.complete_at(w, pos, false);
    }

    /// It keeps its place in the order: its sequence number goes with it.
    #[inline(always)]
    fn unprocessed(&mut self, _w: usize, lane: &mut Lane<T>, pos: u64) {
        let seq = lane.stamp(pos);
        lane.leaving_notes.push(seq);
    }

    #[inline(always)]
    fn never_received(lane: &Lane<T>, pos: u64) -> u64 {
        lane.stamp(pos)
    }

    /// The packets held (the `n` oldest positions not handed back) give their places up.
    fn lost(&mut self, lane: &Lane<T>, n: u64, returned: &mut Vec<T>, _backlog: &mut Backlog<T>) {
        for pos in unmarked_from(lane, n) {
            self.window.skip(lane.stamp(pos), returned);
        }
    }

    fn window(&self) -> Option<u64> {
        Some(self.window.window())
    }
}

/// The lane for the next run of an ordered distributor's packets, and how many it may
/// take: the active lane with the least outstanding work that has credit left (ties go to
/// the first from `turn` on, so equal lanes take runs in turn), up to `run` packets and
/// its credit. `turn` moves past the lane picked.
fn pick_run<T>(lanes: &[Lane<T>], credit: u64, run: u64, turn: &mut usize) -> Option<(usize, u64)> {
    let n = lanes.len();
    let mut best: Option<(usize, u64)> = None;
    for k in 0..n {
        let i = (*turn + k) % n;
        let lane = &lanes[i];
        if !lane.active {
            continue;
        }
        let load = lane.outstanding();
        if load < credit && best.map_or(true, |(_, b)| load < b) {
            best = Some((i, load));
        }
    }
    let (w, load) = best?;
    *turn = if w + 1 == n { 0 } else { w + 1 };
    Some((w, run.min(credit - load)))
}
