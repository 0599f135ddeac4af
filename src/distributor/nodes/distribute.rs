//! A node's calls: `distribute` sorts each packet to the local distributor or to its
//! owning node's bridge, pumps what other nodes bridged here, and drives migrations and
//! balancing; `collect` and `flush`.

use std::time::{Duration, Instant};

use crate::distributor::config::{FlushError, NoWorkers};
use crate::distributor::node_view::Batching;
use crate::fifo::spsc;
use crate::sync::Backoff;

use super::config::MAX_NODES;
use super::quiescence::hold_key;
use super::NodeDistributor;

impl<T, F> NodeDistributor<T, F>
where
    F: FnMut(&T) -> u64,
{
    /// Routes a burst that entered at this node: packets of flows this node owns to its
    /// workers, the others onto the bridges to their owners. Takes the packets it placed
    /// out of `pkts` and returns how many. Also moves packets that came over the bridges
    /// to the local workers, and reschedules to other nodes' tags onto their bridges, so
    /// call it (with an empty burst when there is no input) as often as
    /// [`collect`](Self::collect).
    ///
    /// Under load (a call bringing a batch of input or more: see
    /// [`set_batching`](Self::set_batching)), the packets for each other node are gathered
    /// across calls and pushed onto its bridge as a batch, as the local workers' are.
    ///
    /// Packets it cannot place stay in `pkts`, each group in order, so every flow's order
    /// holds on the retry: first those for the local workers (as
    /// [`Distributor::distribute`](crate::distributor::Distributor::distribute) leaves them), then packets for a node that was dropped
    /// (reschedules, and input staged for it in earlier calls), then those for each other
    /// node whose bridge was full, was dropped, or still holds reschedules waiting for
    /// room (those go first).
    ///
    /// # Errors
    ///
    /// [`NoWorkers`] if this node has no active worker: its own flows' packets are given
    /// back in `pkts` (those that came over the bridges first, with the backlog in front
    /// of the first source's or of the local ones, then the burst's); reschedules and
    /// packets for other nodes still go onto their bridges, reschedules first. Packets
    /// that came over a bridge and are given back here have left their path: re-fed
    /// after a worker rejoins, they may be processed after later packets of their flow
    /// that were still on the bridge.
    ///
    /// # Panics
    ///
    /// As [`Distributor::distribute`](crate::distributor::Distributor::distribute). If `tag` (or the order check) panics, no packet is
    /// lost: the burst's packets not yet placed are back in `pkts`, and packets the node
    /// had taken in earlier calls stay in it.
    ///
    /// ```
    /// use flowline::distributor::nodes::{self, NodesConfig};
    /// let c = NodesConfig::default().nodes(2).workers_per_node(1).credit(8).bridge(8);
    /// let mut layout = nodes::new(c, |p: &u64| *p).unwrap();
    /// let (mut n0, _w0) = layout.remove(0);
    /// let mut burst: Vec<u64> = (0..3).collect(); // light input: out at once
    /// assert_eq!(n0.distribute(&mut burst), Ok(3)); // some to local workers, some to node 1
    /// assert!(n0.bridge_stats().sent > 0);
    /// ```
    pub fn distribute(&mut self, pkts: &mut Vec<T>) -> Result<usize, NoWorkers> {
        /// Hands the packets of this call still held in the node back to the caller if
        /// user code (`tag`, the order check) panics, as `Distributor::distribute` does.
        struct GiveBack<'a, T, F: FnMut(&T) -> u64> {
            node: &'a mut NodeDistributor<T, F>,
            pkts: &'a mut Vec<T>,
        }
        impl<T, F: FnMut(&T) -> u64> Drop for GiveBack<'_, T, F> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.node.give_back(self.pkts);
                }
            }
        }
        let g = GiveBack { node: self, pkts };
        g.node.distribute_inner(g.pkts, true)
    }

    /// Gives the packets of this call that the node still holds back to the caller:
    /// local input not placed (counted as finished: it had entered), packets for full
    /// bridges, reschedules for dropped nodes (counted as finished now).
    pub(super) fn give_back(&mut self, pkts: &mut Vec<T>) {
        let id = self.id;
        self.finished += (self.sorted[id].len() + self.undeliverable.len()) as u64;
        let mut v = core::mem::take(&mut self.undeliverable);
        v.append(&mut self.sorted[id]);
        v.append(&mut self.back);
        v.append(pkts);
        *pkts = v;
        self.publish();
    }

    /// `distribute`; with `give_back` false (`flush`), reschedules for dropped nodes stay
    /// in the node, uncounted as finished, so the flush does not end while they exist
    /// (the next `distribute` hands them back).
    fn distribute_inner(&mut self, pkts: &mut Vec<T>, give_back: bool) -> Result<usize, NoWorkers> {
        debug_assert!(
            self.back.is_empty() && self.sorted.iter().all(Vec::is_empty),
            "emptied by every call, also when it panics"
        );
        // The node's workers get their packets in batches while the caller brings a batch
        // of input or more, and everything at once in a call with less (every flush round
        // brings none).
        self.dist.begin_call(pkts.len());
        if self.flushing && !pkts.is_empty() {
            // New input: the other nodes' flushes wait for this node's again.
            self.flushing = false;
            self.progress.set_flushing(self.id, false);
        }
        // The ownership map as of now, for the whole call (and the adoption of a new
        // version, once everything sent by the old one is on the bridges).
        self.refresh_map();
        // The workers' hand-backs first: a reschedule read now (or by `collect` before)
        // goes out ahead of this call's input, to whichever node owns its new tag. `tag`
        // may panic in here: nothing has been taken from `pkts` yet.
        self.dist.poll_returns();
        self.divert_draining();
        self.refresh_behind();
        self.dist.route_polled();
        self.export_reschedules();
        let mut blocked = self.push_pending_out();
        // Tag the whole burst first: if `tag` panics, `pkts` is untouched.
        self.tags.clear();
        for p in pkts.iter() {
            self.tags.push((self.tag)(p));
        }
        // From here until the end every packet is in `self` (`sorted`, `back`, the
        // bridges, the distributor), so a panic below loses none: the next call goes on.
        // A destination whose staged input did not all fit on its bridge takes no new
        // input either (those packets are left, with no call noted: see below).
        for (o, blocked) in blocked.iter_mut().enumerate().take(self.nodes) {
            *blocked |= self.staged_out_call[o] == u64::MAX && !self.staged_out[o].is_empty();
        }
        let mut placed = self.sort_input(pkts, &blocked);
        let mut fresh = [0usize; MAX_NODES];
        self.stage_for_bridges(&mut fresh, &mut placed);
        self.publish();
        placed -= self.push_due_bridges(&fresh);
        let r = self.pump_local().and_then(|()| self.place_local());
        let r = r.map(|n| placed += n);
        if r.is_err() {
            self.give_back_bridged(pkts);
        }
        // Local packets not placed (with the backlog in front on `NoWorkers`): all had
        // entered, so going back to the caller they count as finished. Then reschedules
        // for dropped nodes (unless flushing), then packets for full bridges.
        self.finished += self.sorted[self.id].len() as u64;
        pkts.append(&mut self.sorted[self.id]);
        if give_back || r.is_err() {
            self.finished += self.undeliverable.len() as u64;
            pkts.append(&mut self.undeliverable);
        }
        pkts.append(&mut self.back);
        self.publish();
        if r.is_ok() {
            self.drive_drain();
            self.balance();
        }
        r.map(|()| placed)
    }

    /// Reschedules waiting for room go first; a destination still blocked by them takes no
    /// new input this call (its flows' order): returns which. Those for a node that was
    /// dropped go back to the caller (`undeliverable`).
    fn push_pending_out(&mut self) -> [bool; MAX_NODES] {
        let mut blocked = [false; MAX_NODES];
        for (o, blocked) in blocked.iter_mut().enumerate().take(self.nodes) {
            if !self.pending_out[o].is_empty() {
                // Input staged for `o` entered before these were read: it goes first.
                if !self.push_staged_out(o) {
                    *blocked = true;
                    continue;
                }
                let mut v = core::mem::take(&mut self.pending_out[o]);
                if self.push_bridge(o, &mut v, true) {
                    *blocked = !v.is_empty();
                } else {
                    // Node `o` was dropped: they go back to the caller (counted as finished
                    // when handed over).
                    self.undeliverable.append(&mut v);
                }
                self.pending_out[o] = v;
            }
        }
        blocked
    }

    /// Sorts the input (tagged in `tags`) by owner: this node's into `sorted[id]` (or held,
    /// for a bucket migrating here), another's into `sorted[o]`, or back to the caller
    /// (`back`) for a `blocked` destination or a bucket migrating out. Returns how many
    /// it held (placed, for the caller's count).
    fn sort_input(&mut self, pkts: &mut Vec<T>, blocked: &[bool; MAX_NODES]) -> usize {
        let mut placed = 0;
        let own = &self.dist.admission().ownership;
        let draining = self.drain.is_some();
        for (p, &t) in pkts.drain(..).zip(&self.tags) {
            let o = own.owner(t);
            if o == self.id {
                // Counted as entered now; what the workers cannot take yet goes back to the
                // caller at the end, counted as finished. Packets of a bucket migrating
                // here wait until its old owner is done with it.
                self.entered += 1;
                if self.holding && own.held_here(t) {
                    // Taken from the caller: placed, for the caller's count. It entered
                    // after this call's poll (and the reschedules it read).
                    self.held.push((hold_key(self.dist.epoch(), false), p));
                    self.stats.held += 1;
                    placed += 1;
                } else {
                    self.sorted[o].push(p);
                }
            } else if blocked[o] || (draining && own.routes_here(t)) {
                // A full destination; or a bucket migrating out of this node, whose new
                // input waits with the caller until the handover ends: this node may
                // still give older packets of it back to the caller (`NoWorkers`),
                // which must stay in front.
                self.back.push(p);
            } else {
                self.sorted[o].push(p);
            }
        }
        placed
    }

    /// Stages the input sorted for the other nodes (entered now, and the count published
    /// before any of it can reach another node), adding it to `placed`; input for a node
    /// that was dropped goes back to the caller, never entered. Notes how many packets
    /// each destination got in `fresh` (all 0 on entry).
    fn stage_for_bridges(&mut self, fresh: &mut [usize; MAX_NODES], placed: &mut usize) {
        for (o, fresh) in fresh.iter_mut().enumerate().take(self.nodes) {
            if o == self.id || self.sorted[o].is_empty() {
                continue;
            }
            let mut v = core::mem::take(&mut self.sorted[o]);
            if self.out[o]
                .as_ref()
                .is_some_and(spsc::Producer::is_abandoned)
            {
                // Node `o` was dropped: back to the caller, never entered.
                self.back.append(&mut v);
            } else {
                *fresh = v.len();
                self.entered += v.len() as u64;
                *placed += v.len();
                self.staged_out[o].append(&mut v);
            }
            self.sorted[o] = v;
        }
    }

    /// Pushes each bridge's staged batch that is due (as a lane's: a batch, its hold, a
    /// call that publishes all, or packets left by a push that did not fit). A full
    /// bridge leaves this call's packets that did not fit with the caller (in order,
    /// behind any older ones left here): entered, so counted as finished, as local input
    /// the workers had no room for. Returns how many of this call's (`fresh`) went back.
    fn push_due_bridges(&mut self, fresh: &[usize; MAX_NODES]) -> usize {
        let Batching {
            publish_all: all,
            batch,
            hold,
            calls,
        } = self.dist.batching();
        let mut back = 0;
        for (o, &fresh) in fresh.iter().enumerate().take(self.nodes) {
            let n = self.staged_out[o].len();
            if n == 0 {
                continue;
            }
            let since = self.staged_out_call[o];
            // Older packets left by a push that did not fit (no call noted) try again.
            let left_over = since == u64::MAX && n > fresh;
            // As for a lane: 0 for packets staged by this call.
            let age = if since == u64::MAX {
                0
            } else {
                calls.wrapping_sub(since)
            };
            let due = all || n as u64 >= batch || left_over || age >= hold;
            if !due {
                if since == u64::MAX {
                    self.staged_out_call[o] = calls;
                }
                continue;
            }
            self.push_staged_out(o);
            let left = self.staged_out[o].len();
            let k = left.min(fresh);
            if k > 0 {
                let mut v = self.staged_out[o].split_off(left - k);
                self.finished += k as u64;
                back += k;
                self.back.append(&mut v);
            }
        }
        back
    }

    /// Places this node's own input (and what waits here) on its workers, after one more
    /// read of their hand-backs; returns how many it placed.
    fn place_local(&mut self) -> Result<usize, NoWorkers> {
        let before = self.sorted[self.id].len();
        self.dist.poll_returns();
        self.divert_draining();
        self.refresh_behind();
        // Input of the flows whose released packets still wait for credit waits behind
        // them (back to the caller); the other flows go on.
        self.wait_behind_released();
        if self.dist.active_workers() == 0 {
            return Err(self.no_workers());
        }
        let res = self
            .dist
            .distribute_polled(&mut self.sorted[self.id], &mut 0, u64::MAX);
        self.dist.admission_mut().wait_first.clear();
        // Reschedules this last poll read for a bucket held here: queued now, before a
        // later call's release could let a newer one of their flow go first.
        self.export_reschedules();
        if res.is_err() {
            debug_assert!(self.sorted[self.id].len() >= before, "all given back");
        }
        res
    }

    /// No worker here: the flows this node owns cannot be placed, so what came over the
    /// bridges goes back too, first (the backlog is at the front of the source that found
    /// no worker, or of the local input), then the local input (by the caller). Merged by
    /// when this node read each, as the normal path orders them: a leaver's hand-backs
    /// first (older than anything waiting here), then the released queue (the other
    /// queues' packets of their flows are newer), then reschedules and bridged packets by
    /// their polls (a reschedule after what arrived before it was read).
    #[cold]
    fn give_back_bridged(&mut self, pkts: &mut Vec<T>) {
        let id = self.id;
        let mut keyed: Vec<((u64, u8), T)> = Vec::new();
        let at = core::mem::take(&mut self.no_workers_at);
        for (p, a) in self.no_workers_backlog.drain(..).zip(at) {
            keyed.push((
                if a == 0 {
                    (0, 0)
                } else {
                    (hold_key(a, true), 0)
                },
                p,
            ));
        }
        for p in self.inbound[id].drain(..) {
            keyed.push(((0, 1), p));
        }
        for s in (0..self.nodes).filter(|&s| s != id) {
            let k = hold_key(self.inbound_at[s], false);
            for p in self.inbound[s].drain(..) {
                keyed.push(((k, 0), p));
            }
        }
        keyed.sort_by_key(|&(k, _)| k);
        self.finished += keyed.len() as u64;
        pkts.extend(keyed.into_iter().map(|(_, p)| p));
    }

    /// Moves the packets this node's workers handed back as processed onto `out`; returns
    /// how many (as [`Distributor::collect`](crate::distributor::Distributor::collect)). They are this node's flows' packets, from
    /// whichever node they entered at.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(1).workers_per_node(1).credit(8).bridge(8);
    /// let (mut n, mut ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// n.distribute(&mut vec![1, 2]).unwrap();
    /// let mut b = Vec::new();
    /// ws[0].recv_burst(&mut b, 8).unwrap();
    /// ws[0].done_burst(&mut b).unwrap();
    /// let mut out = Vec::new();
    /// assert_eq!(n.collect(&mut out), 2);
    /// ```
    pub fn collect(&mut self, out: &mut Vec<T>) -> usize {
        let n = self.dist.collect(out);
        self.finished += n as u64;
        self.publish();
        n
    }

    /// Drives the layout until every node is flushing too (or was dropped) and every packet
    /// that entered at any node has come back (collected at its owner, dropped or lost),
    /// collecting this node's onto `out`, or until `timeout` passes. So every node's thread
    /// flushes once its input ends, and each flush returns only when all input has ended
    /// and all packets are back: no node leaves while another still sends it packets.
    /// Spins with backoff, then naps of 50 us doubling to 1 ms while nothing moves (never
    /// past the deadline). A `timeout` too large to add to the current time means no deadline.
    ///
    /// # Errors
    ///
    /// [`FlushError::Timeout`] (with the packets this node still holds) if `timeout`
    /// passed first; [`FlushError::NoWorkers`] (with its flows' packets) if this node has
    /// no active worker.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(1).workers_per_node(1).credit(8).bridge(8);
    /// let (mut n, _ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// n.distribute(&mut vec![1]).unwrap();
    /// let mut out = Vec::new();
    /// // Nobody runs the worker here, so the flush times out; the packet is not lost.
    /// assert!(n.flush(&mut out, Duration::from_millis(1)).is_err());
    /// ```
    pub fn flush(&mut self, out: &mut Vec<T>, timeout: Duration) -> Result<(), FlushError<T>> {
        let deadline = Instant::now().checked_add(timeout);
        let mut backoff = Backoff::new();
        let mut nap = Duration::from_micros(50);
        let mut empty = Vec::new();
        if !self.flushing {
            self.flushing = true;
            self.progress.set_flushing(self.id, true);
        }
        loop {
            let before = (self.entered, self.finished, self.stats);
            // Nothing but `NoWorkers` puts packets into `empty` (no input, and reschedules
            // for dropped nodes stay in the node, keeping the flush from ending).
            if self.distribute_inner(&mut empty, false).is_err() {
                self.collect(out);
                return Err(FlushError::NoWorkers(empty));
            }
            debug_assert!(empty.is_empty());
            self.collect(out);
            if self.progress.idle() {
                return Ok(());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(FlushError::Timeout {
                    in_flight: self.held(),
                    workers: self.dist.holding_workers(),
                });
            }
            if before != (self.entered, self.finished, self.stats) {
                backoff = Backoff::new();
                nap = Duration::from_micros(50);
            } else if !backoff.is_completed() {
                backoff.snooze();
            } else {
                // Never past the deadline.
                let left = deadline.map_or(nap, |d| d.saturating_duration_since(Instant::now()));
                std::thread::sleep(nap.min(left));
                nap = (nap * 2).min(Duration::from_millis(1));
            }
        }
    }

    /// Places what waits here: first the packets handovers released (`inbound[id]`),
    /// then each bridge's, reading a bridge whose earlier packets are all placed. While
    /// released packets wait, the other queues' packets of their flows wait behind them.
    pub(super) fn pump_local(&mut self) -> Result<(), NoWorkers> {
        let id = self.id;
        for s in core::iter::once(id).chain((0..self.nodes).filter(|&s| s != id)) {
            if s != id && self.inbound[s].is_empty() {
                let rx = self.inb[s]
                    .as_mut()
                    .expect("a bridge from every other node");
                let n = rx.pop_burst_into(&mut self.inbound[s], usize::MAX);
                self.inbound_at[s] = self.dist.epoch();
                self.stats.received += n as u64;
                self.read_from[s] += n as u64;
                if n > 0 {
                    // The sender may have routed them by a map version newer than this
                    // node's copy (a bucket migrating here whose packets must wait): its
                    // version store came before its push, so after reading the push one
                    // more load of the version finds it. A handover that ended may
                    // release packets into `inbound[id]` here: these are newer.
                    self.refresh_map();
                }
            }
            if self.holding && !self.inbound[s].is_empty() {
                self.divert_held(s);
            }
            if !self.inbound[s].is_empty() {
                // In place: if `tag` panics, what was not taken stays here. On `NoWorkers`
                // the backlog comes back in front of it; the caller hands it all back.
                // A reschedule read after packets of its flow arrived here goes after them
                // (`refresh_behind`), and these packets after a reschedule read before they
                // arrived.
                self.dist.poll_returns();
                self.divert_draining();
                self.refresh_behind();
                // (Set anew for every queue: a panic in the step before may have left it.)
                let (mut old, arrived) = if s == id {
                    self.dist.admission_mut().wait_first.clear();
                    (usize::MAX, 0)
                } else {
                    self.wait_behind_released();
                    self.wait_behind_earlier(s);
                    (0, self.inbound_at[s])
                };
                if self.dist.active_workers() == 0 {
                    return Err(self.no_workers());
                }
                let r = self
                    .dist
                    .distribute_polled(&mut self.inbound[s], &mut old, arrived);
                self.dist.admission_mut().wait_first.clear();
                r?;
                // Reschedules this step read for a bucket whose handover into this node
                // ended in the meantime: queued here now (after what waits here), before
                // a later step can read a newer one of the same flow.
                self.export_reschedules();
            }
        }
        Ok(())
    }

    /// No active worker here: sends the backlog's reschedules for other nodes (or held
    /// buckets) to their queues, takes the rest out with the polls that read it (to go
    /// back to the caller merged with what waits here, in the order it was read), and
    /// answers `NoWorkers`.
    fn no_workers(&mut self) -> NoWorkers {
        // Reschedules to other nodes' tags (or to buckets held here) go to their queues
        // first, as in a step with workers; `tag` may panic here, before anything is
        // taken out.
        self.dist.route_polled();
        self.export_reschedules();
        self.dist
            .take_backlog(&mut self.no_workers_backlog, &mut self.no_workers_at);
        self.dist.admission_mut().wait_first.clear();
        NoWorkers
    }
}
