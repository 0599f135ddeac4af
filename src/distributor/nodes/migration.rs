//! Migration of a bucket of flows from one node to another without reordering a flow: a
//! new ownership map is published, the old owner drains what it holds of the bucket, and
//! the new owner holds the bucket's packets until every node has delivered what it had sent
//! the old owner (quiescence), then releases them in arrival order.

use crate::distributor::ownership::{bucket_of, BUCKETS};
use crate::distributor::stats::{DROPPED, LOST};
use crate::fifo::spsc;

use super::quiescence::hold_key;
use super::{Drain, MigrateError, NodeDistributor, Phase};

impl<T, F> NodeDistributor<T, F>
where
    F: FnMut(&T) -> u64,
{
    /// Moves flow bucket `bucket` ([`bucket_of`]) from this node, which owns it, to node
    /// `to`, keeping every flow's order and every packet exactly once. The other nodes
    /// send the bucket's packets to `to` from the start of their next call; packets of the
    /// bucket that enter here stay with the caller (as for a full bridge) until the
    /// handover ends, and then go to `to`. Node `to` holds the bucket's packets until this
    /// node has finished the ones it has: the packets that every other node sent it
    /// before switching (counted off each bridge), those waiting in it, and those at its
    /// workers. Then it ends the handover and `to` routes them, oldest first (compare
    /// DPDK's dsw event device: pause, drain, unpause). The handover advances in this
    /// node's [`distribute`](Self::distribute) and [`flush`](Self::flush) calls (and
    /// needs the other nodes to keep calling theirs); [`migrating`](Self::migrating)
    /// says when it is over. One migration out of a node at a time. The handover waits
    /// until every worker of this node has completed what it held when the bucket's last
    /// packet was routed here, so a stalled worker here delays it (measured with no
    /// stall: `dist_2nodes_migrating` in the report); then until the other nodes have read
    /// the reschedules this node sent them (its workers' reschedules of the bucket's
    /// packets among them), so a node whose packets from here wait for its workers' credit
    /// delays it too. Reschedules into the bucket that this node's workers make meanwhile
    /// go to `to`, which holds them with the bucket's other packets.
    ///
    /// The ownership map is shared by the nodes and replaced at each step of a migration
    /// (crossbeam-epoch frees the versions no node reads any more); each node compares
    /// its private copy's version with the shared one once per call (one load of a line
    /// only migrations write) and copies the map only when it changed.
    ///
    /// # Errors
    ///
    /// [`MigrateError`]: a bucket or node out of range, the node itself, a bucket this
    /// node does not own, a migration still in progress here, or a dropped destination.
    ///
    /// # Panics
    ///
    /// If the user's `tag` panics while this call brings the node's copy of the map up
    /// to date (it re-sorts reschedules waiting for bridge room): before the new map is
    /// published nothing has changed; after it, the migration has started
    /// ([`migrating`](Self::migrating) says so) and goes on at the next calls.
    ///
    /// ```
    /// use flowline::distributor::nodes::{self, bucket_of, NodesConfig};
    /// let c = NodesConfig::default().nodes(2).workers_per_node(1).credit(8).bridge(8);
    /// let mut layout = nodes::new(c, |p: &u64| *p).unwrap();
    /// let tag = (0..).find(|&t| layout[0].0.owns(t)).unwrap();
    /// layout[0].0.migrate(bucket_of(tag), 1).unwrap();
    /// assert_eq!(layout[0].0.owner(tag), 1);
    /// // Nothing of the bucket is in flight: the next calls end the handover.
    /// layout[1].0.distribute(&mut Vec::new()).unwrap();
    /// layout[0].0.distribute(&mut Vec::new()).unwrap();
    /// assert!(!layout[0].0.migrating());
    /// assert_eq!(layout[0].0.bridge_stats().migrations, 1);
    /// ```
    pub fn migrate(&mut self, bucket: usize, to: usize) -> Result<(), MigrateError> {
        if bucket >= BUCKETS {
            return Err(MigrateError::NoSuchBucket(bucket));
        }
        if to >= self.nodes {
            return Err(MigrateError::NoSuchNode(to));
        }
        if to == self.id {
            return Err(MigrateError::SameNode);
        }
        if self.drain.is_some() {
            return Err(MigrateError::Busy);
        }
        self.refresh_map();
        if !self.ownership().owns_bucket(bucket) {
            return Err(MigrateError::NotOwner);
        }
        if self.out[to]
            .as_ref()
            .is_some_and(spsc::Producer::is_abandoned)
        {
            return Err(MigrateError::NodeGone);
        }
        let version = self
            .map
            .start(bucket, self.id, to)
            .ok_or(MigrateError::NotOwner)?;
        self.drain = Some(Drain {
            bucket,
            version,
            scanned: self.dist.epoch(),
            phase: Phase::Adoption,
        });
        self.refresh_map();
        Ok(())
    }

    /// Whether a migration out of this node is still in progress.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(2).workers_per_node(1).credit(8).bridge(8);
    /// let layout = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap();
    /// assert!(!layout[0].0.migrating());
    /// ```
    pub fn migrating(&self) -> bool {
        self.drain.is_some()
    }

    /// Tells the local distributor the flows of the released packets still waiting in
    /// `inbound[id]`, before it places another queue: their packets there are newer (see
    /// [`release_held`](Self::release_held)), and wait. If `tag` panics, the set is
    /// partial, and the queue is not placed in this step (the panic ends it).
    pub(super) fn wait_behind_released(&mut self) {
        let Self {
            id,
            dist,
            inbound,
            tag,
            ..
        } = self;
        dist.admission_mut().wait_first.clear();
        for p in &inbound[*id] {
            dist.admission_mut().wait_first.insert(tag(p));
        }
    }

    /// Adds to `wait_first` the flows of the packets waiting in another bridge's queue
    /// that arrived before those of `inbound[s]` (by an earlier poll), before the node
    /// places `inbound[s]`: they go first. A flow whose bucket migrated from one node to
    /// another sends the reschedules it made into a flow owned by a third node over two
    /// bridges; those made at the old owner are read here before the handover ends
    /// ([`Phase::Delivery`]), so before any made at the new owner, and must not be
    /// overtaken by them while they wait for credit. If `tag` panics, the set is partial,
    /// and the queue is not placed in this step (the panic ends it).
    pub(super) fn wait_behind_earlier(&mut self, s: usize) {
        let Self {
            id,
            dist,
            inbound,
            inbound_at,
            tag,
            ..
        } = self;
        for (o, q) in inbound.iter().enumerate() {
            if o != *id && o != s && inbound_at[o] < inbound_at[s] {
                for p in q {
                    dist.admission_mut().wait_first.insert(tag(p));
                }
            }
        }
    }

    /// Tells the local distributor which packets wait here to be placed (every `inbound`
    /// queue, with the poll after which it arrived), so that a reschedule read after
    /// them waits behind them. Only while the backlog holds something: otherwise there is
    /// nothing to hold back, and nothing is tagged. If `tag` panics, `behind` is partial:
    /// a reschedule may then go before one of them (the next step collects them again).
    pub(super) fn refresh_behind(&mut self) {
        let Self {
            id,
            dist,
            inbound,
            inbound_at,
            tag,
            ..
        } = self;
        dist.admission_mut().behind.clear();
        if dist.backlog_len() == 0 {
            return;
        }
        for (s, q) in inbound.iter().enumerate() {
            let arrived = if s == *id { 0 } else { inbound_at[s] };
            for p in q {
                let e = dist.admission_mut().behind.entry(tag(p)).or_insert(arrived);
                *e = (*e).min(arrived);
            }
        }
    }

    /// Sends the reschedules into the bucket migrating out of this node that the polls
    /// since the migration started read to its new owner (into `dist.exported`, in order,
    /// for `export_reschedules`), instead of to the workers here: that node holds them
    /// with the bucket's other packets until this node is done, and releases them in the
    /// order it read them. A reschedule into one of the bucket's flows, `g`, made at the
    /// new owner from a packet of flow `f` waits there until this node is done; if `f`'s
    /// bucket then moves here, a reschedule into `g` made here from a later packet of `f`
    /// must not run here before it. Packets a leaving worker handed back (read as 0) and
    /// reschedules read before the migration stay: they are older than anything of the
    /// bucket elsewhere. If `tag` panics, nothing has moved (and the next poll looks
    /// again).
    pub(super) fn divert_draining(&mut self) {
        let Self {
            drain, dist, tag, ..
        } = self;
        let Some(d) = drain.as_mut() else {
            return;
        };
        if d.scanned >= dist.epoch() {
            return;
        }
        // Tagged first: if `tag` panics, nothing has moved. Only the reschedules read
        // since the last look (the backlog keeps the order in which it was read).
        let mut hits = Vec::new();
        for (k, (p, at)) in dist.backlog().enumerate() {
            if at > d.scanned && bucket_of(tag(p)) == d.bucket {
                hits.push(k);
            }
        }
        d.scanned = dist.epoch();
        if hits.is_empty() {
            return;
        }
        let admit = dist.admission_mut();
        let mut to = core::mem::take(&mut admit.exported);
        let mut at = core::mem::take(&mut admit.exported_at);
        dist.take_from_backlog(&hits, &mut to, &mut at);
        let admit = dist.admission_mut();
        admit.exported = to;
        admit.exported_at = at;
    }

    /// Moves the packets of buckets migrating here out of `inbound[s]` into `held`, in
    /// order, keyed by their arrival. If `tag` panics, nothing has moved.
    pub(super) fn divert_held(&mut self, s: usize) {
        self.tags.clear();
        for p in &self.inbound[s] {
            self.tags.push((self.tag)(p));
        }
        let own = &self.dist.admission().ownership;
        if !self.tags.iter().any(|&t| own.held_here(t)) {
            return;
        }
        let key = hold_key(if s == self.id { 0 } else { self.inbound_at[s] }, false);
        for (p, &t) in core::mem::take(&mut self.inbound[s])
            .into_iter()
            .zip(&self.tags)
        {
            if own.held_here(t) {
                self.held.push((key, p));
                self.stats.held += 1;
            } else {
                self.inbound[s].push(p);
            }
        }
    }

    /// Brings this node's copy of the ownership map up to date (one load when nothing
    /// changed) and adopts a new version; releases the packets of buckets whose handover
    /// into this node ended, each source's in front of what came from it since.
    ///
    /// The steps that run the user's `tag` (re-sorting, releasing) are redone at the next
    /// call if it panics: a version counts as adopted, and held packets as looked at for
    /// a version, only once they are done.
    pub(super) fn refresh_map(&mut self) {
        // Reschedules set aside by the current copy (a panic may have left some) are
        // queued by it first, before a release can let newer ones of their flows pass.
        self.export_reschedules();
        let own = &mut self.dist.admission_mut().ownership;
        self.map.refresh(own);
        let version = own.version();
        if version == self.adopted && version == self.released {
            return;
        }
        self.holding = own.holding();
        if version != self.adopted {
            // Reschedules still waiting for room on a bridge were sorted by the older
            // version: sort them again, or one could reach a bucket's old owner after it
            // has handed the bucket over. Each flow's packets sit in one queue and keep
            // their order.
            self.resort_pending();
            // Every other packet this node sent by the older version must be on a bridge
            // first: the input staged for the bridges goes out (a full bridge puts the
            // adoption off to a later call; a handover waits for it).
            let mut all_out = true;
            for o in 0..self.nodes {
                all_out &= self.push_staged_out(o);
            }
            if all_out {
                self.progress.adopt(self.id, version);
                self.adopted = version;
            }
        }
        self.release_held();
        self.released = version;
    }

    /// Moves the held packets of buckets whose handover into this node ended to the end
    /// of `inbound[id]`, in the order this node read them: each source's in order, and a
    /// reschedule after what arrived before it was read, before what arrived after (their
    /// keys). Packets of their flows that arrive later wait behind them. If `tag` panics,
    /// nothing has moved (and the next call looks again).
    fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        // Tagged first: if `tag` panics, nothing has moved.
        self.tags.clear();
        for (_, p) in &self.held {
            self.tags.push((self.tag)(p));
        }
        let own = &self.dist.admission().ownership;
        if self.tags.iter().all(|&t| own.held_here(t)) {
            return;
        }
        let mut released = Vec::new();
        for ((k, p), &t) in core::mem::take(&mut self.held).into_iter().zip(&self.tags) {
            if own.held_here(t) {
                self.held.push((k, p));
            } else {
                released.push((k, p));
            }
        }
        // Stable: packets with equal keys (read together) keep their order.
        released.sort_by_key(|&(k, _)| k);
        self.inbound[self.id].extend(released.into_iter().map(|(_, p)| p));
    }

    /// Moves the reschedules waiting in `pending_out` to the queues of their owners by
    /// this node's copy of the map (its own buckets: held or routed here). The user's
    /// `tag` runs first: if it panics, nothing has moved, and the caller has not adopted
    /// the version yet (it does after this returns; the next call tries again).
    fn resort_pending(&mut self) {
        if self.pending_out.iter().all(Vec::is_empty) {
            return;
        }
        let mut all = Vec::new();
        self.tags.clear();
        for q in &self.pending_out {
            for p in q {
                self.tags.push((self.tag)(p));
            }
        }
        for q in &mut self.pending_out {
            all.append(q);
        }
        // They were read before this node read anything it holds for the bucket now
        // (it re-sorts them as soon as it adopts the version that holds it here).
        self.requeue(&mut all, &[]);
    }

    /// Whether every other node routes by map version `v` (or a later one) now.
    fn all_adopted(&self, v: u64) -> bool {
        (0..self.nodes).all(|o| o == self.id || self.progress.adopted(o) >= v)
    }

    /// Whether a packet of `bucket` waits in this node unrouted (from a bridge, or in
    /// the distributor's backlog).
    fn bucket_waiting(&mut self, bucket: usize) -> bool {
        let tag = &mut self.tag;
        self.inbound
            .iter()
            .flatten()
            .chain(self.dist.backlog().map(|(p, _)| p))
            .any(|p| bucket_of(tag(p)) == bucket)
    }

    /// Advances the migration out of this node, if any (see [`migrate`](Self::migrate)),
    /// through as many phases as are complete now.
    pub(super) fn drive_drain(&mut self) {
        // The user's `tag` runs here (looking for the bucket's packets), with the drain
        // still in place: if it panics, the drain goes on at the next call.
        // Whether the others adopted is read once too: a node adopting between two reads
        // would let this call pass the Adoption phase without having looked.
        let (adopted, waiting) = match &self.drain {
            None => return,
            Some(d) => {
                let adopted = match d.phase {
                    Phase::Adoption => self.all_adopted(d.version),
                    Phase::Bridges(_) | Phase::Workers(_) | Phase::Delivery(_) => true,
                };
                let bucket = d.bucket;
                (adopted, adopted && self.bucket_waiting(bucket))
            }
        };
        let Some(mut d) = self.drain.take() else {
            return;
        };
        loop {
            match &d.phase {
                Phase::Adoption => {
                    if !adopted {
                        break;
                    }
                    d.phase = Phase::Bridges(self.bridge_tails());
                }
                Phase::Bridges(targets) => {
                    let read = targets.iter().zip(&self.read_from).all(|(t, r)| r >= t);
                    if !read || waiting {
                        break;
                    }
                    d.phase = Phase::Workers(self.dist.sent_positions());
                }
                Phase::Workers(sent) => {
                    let (next, stop) = self.after_workers(d.bucket, sent, waiting);
                    if let Some(next) = next {
                        d.phase = next;
                    }
                    if stop {
                        break;
                    }
                }
                Phase::Delivery(_) if waiting => {
                    // Not expected (see `Phase::Delivery`); were one here, it would be
                    // routed first, as above.
                    d.phase = Phase::Bridges(vec![0; self.nodes]);
                    break;
                }
                Phase::Delivery(_) => {
                    let Phase::Delivery(targets) = &mut d.phase else {
                        unreachable!("matched above");
                    };
                    if !self.delivered(targets) {
                        break;
                    }
                    // Nothing of the bucket is here, and nothing more can come: the other
                    // nodes send it elsewhere, new input here waits with the caller, and
                    // a reschedule into it by a worker here goes to the new owner. The
                    // reschedules made here from its packets wait at their flows' owners.
                    // The new owner starts.
                    self.map.finish(self.id, |b| b == d.bucket);
                    self.stats.migrations += 1;
                    self.refresh_map();
                    return;
                }
            }
        }
        self.drain = Some(d);
    }

    /// The [`Phase::Adoption`] step once every other node adopted: each routes the bucket
    /// elsewhere now, and what each sent here before is on its bridge (`adopted` was
    /// stored after those pushes). Returns, per node, the count read off its bridge once
    /// its tail as of now is read.
    fn bridge_tails(&mut self) -> Vec<u64> {
        let mut targets = vec![0; self.nodes];
        for (s, t) in targets.iter_mut().enumerate() {
            if let Some(rx) = self.inb[s].as_mut() {
                *t = self.read_from[s] + rx.refresh() as u64;
            }
        }
        targets
    }

    /// The [`Phase::Workers`] step of the handover of `bucket`: whether every worker
    /// completed what it was `sent` when the phase began, and what follows. Returns the
    /// next phase (`None`: stay) and whether the drive stops for this call.
    fn after_workers(&self, bucket: usize, sent: &[u64], waiting: bool) -> (Option<Phase>, bool) {
        if !self.dist.completed_past(sent) {
            return (None, true);
        }
        if waiting {
            // A worker's reschedule (or a leaving worker's hand-back) put a packet of the
            // bucket in the backlog: route it first.
            return (Some(Phase::Bridges(vec![0; self.nodes])), true);
        }
        if self.dist.bucket_in_flight(bucket) {
            // Routed here after the counts were taken: wait for it too.
            let sent = self.dist.sent_positions();
            return (Some(Phase::Workers(sent)), true);
        }
        if !self.dist.admission().exported.is_empty() {
            // Not expected (the call's last step queued them); the counts below take only
            // queued ones, so wait for the next call.
            return (None, true);
        }
        // Every reschedule the workers made from the bucket's packets has been read:
        // queued for a bridge, sent, or placed here. Reschedules waiting for room go out
        // after the input staged for the same node (which entered before they were read):
        // both count.
        let targets = (0..self.nodes)
            .map(|o| match self.pending_out[o].len() as u64 {
                0 => self.resched_end[o],
                waiting => self.pushed_to[o] + self.staged_out[o].len() as u64 + waiting,
            })
            .collect();
        (Some(Phase::Delivery(targets)), false)
    }

    /// Whether every other node has read, off the bridge from this node, `targets[o]`
    /// packets (a handover's [`Phase::Delivery`]); the targets reached are set to 0, so
    /// that only the heads of the bridges still short of theirs are read (the consumers'
    /// lines).
    fn delivered(&self, targets: &mut [u64]) -> bool {
        let mut all = true;
        for (o, target) in targets.iter_mut().enumerate() {
            let Some(tx) = self.out[o].as_ref().filter(|_| *target > 0) else {
                continue;
            };
            // Reschedules still waiting for room were counted as sent to `o`; if they went
            // elsewhere since (a new map version re-sorted them, or `o` was dropped), the
            // count stops at what was pushed.
            if self.pending_out[o].is_empty() {
                *target = (*target).min(self.pushed_to[o]);
            }
            // `len` loads the consumer's head (Acquire), pairing with the Release store of
            // its head after it took the packets: what it read is in its queues (or
            // placed) before this node ends the handover, which it learns only after.
            // A dropped node reads nothing more: nothing of it to wait for.
            if *target <= self.pushed_to[o] - tx.len() as u64 || tx.is_abandoned() {
                *target = 0;
            } else {
                all = false;
            }
        }
        all
    }

    /// Publishes this node's counts when they changed (a store to its own line, read by
    /// nobody while nobody flushes).
    pub(super) fn publish(&mut self) {
        let v = self.dist.counts();
        let gone = v[DROPPED] + v[LOST];
        if gone != self.seen_gone {
            self.finished += gone - self.seen_gone;
            self.seen_gone = gone;
        }
        self.progress.publish(self.id, self.entered, self.finished);
    }
}
