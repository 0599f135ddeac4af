//! Bridges between nodes: per other node an SPSC burst ring each way, packets staged per
//! bridge under load and pushed as one batch, reschedules exported to the flow's owner, and
//! what a full bridge leaves with the caller.

use super::quiescence::hold_key;
use super::{BridgeStats, NodeDistributor};

impl<T, F> NodeDistributor<T, F>
where
    F: FnMut(&T) -> u64,
{
    /// Packets and publications on this node's bridges so far.
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(2).workers_per_node(1).credit(8).bridge(8);
    /// let (n, _ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// assert_eq!(n.bridge_stats(), Default::default());
    /// ```
    pub fn bridge_stats(&self) -> BridgeStats {
        self.stats
    }

    /// Sets how this node gathers packets before it publishes them, per local worker and
    /// per bridge: as [`Distributor::set_batching`](crate::distributor::Distributor::set_batching), by the new input of this node's
    /// [`distribute`](Self::distribute) (a call with less than a batch, and every round of
    /// [`flush`](Self::flush), publishes everything). A bridge's batch also goes out
    /// before any reschedule for its node (which must follow it) and before this node
    /// adopts a new ownership map (a handover waits for it).
    ///
    /// ```
    /// let c = flowline::distributor::nodes::NodesConfig::default().nodes(1).workers_per_node(1).credit(8).bridge(8);
    /// let (mut n, mut ws) = flowline::distributor::nodes::new(c, |p: &u64| *p).unwrap().remove(0);
    /// n.set_batching(1, 0); // every call publishes what it routed
    /// n.distribute(&mut vec![5]).unwrap();
    /// assert_eq!(ws[0].recv_burst(&mut Vec::new(), 8), Ok(1));
    /// ```
    pub fn set_batching(&mut self, packets: usize, hold_calls: u32) {
        self.dist.set_batching(packets, hold_calls);
    }

    /// Moves reschedules the local distributor set aside (tags another node owns) to
    /// their owners' queues, in order. If `tag` panics they stay set aside.
    pub(super) fn export_reschedules(&mut self) {
        if self.dist.admission().exported.is_empty() {
            return;
        }
        self.tags.clear();
        for p in &self.dist.admission().exported {
            self.tags.push((self.tag)(p));
        }
        let admit = self.dist.admission_mut();
        let mut v = core::mem::take(&mut admit.exported);
        let mut at = core::mem::take(&mut admit.exported_at);
        self.requeue(&mut v, &at);
        // Empty again; their allocations go back for the next reschedules.
        at.clear();
        let admit = self.dist.admission_mut();
        admit.exported = v;
        admit.exported_at = at;
    }

    /// Moves the packets of `v`, tagged in `self.tags` (in order), to the queues of their
    /// owners by this node's copy of the map: another node's bridge queue, or here the
    /// packets held for a handover into this node, or those routed here. Each queue keeps
    /// the packets' order. `read` gives the poll that read each reschedule (empty: before
    /// any packet now held). No user code runs here.
    pub(super) fn requeue(&mut self, v: &mut Vec<T>, read: &[u64]) {
        let tags = core::mem::take(&mut self.tags);
        let own = &self.dist.admission().ownership;
        for (k, (p, &t)) in v.drain(..).zip(&tags).enumerate() {
            let o = own.owner(t);
            if o != self.id {
                self.pending_out[o].push(p);
            } else if own.held_here(t) {
                // A bucket migrating here: waits with its other packets.
                let r = read.get(k).copied().unwrap_or(0);
                self.held.push((hold_key(r, true), p));
                self.stats.held += 1;
            } else {
                // Its handover ended since it was set aside: routed here.
                self.inbound[o].push(p);
            }
        }
        self.tags = tags;
    }

    /// Pushes the front of `v` onto the bridge to `o` with one publication; what does not
    /// fit stays in `v`. Everything pushed has entered already (and its count was
    /// published); `resched` marks reschedules (see `resched_end`). The room is the
    /// producer's cached view of the other end, refreshed only when it says full. Returns
    /// false (and pushes nothing) if node `o` was dropped.
    pub(super) fn push_bridge(&mut self, o: usize, v: &mut Vec<T>, resched: bool) -> bool {
        let mut tx = self.out[o].take().expect("a bridge to every other node");
        let open = !tx.is_abandoned();
        if open {
            let chunk = tx.write_chunk(v.len());
            let k = chunk.len();
            if k > 0 {
                let mut it = v.drain(..k);
                let n = chunk.fill_from_iter(&mut it);
                debug_assert_eq!(n, k, "the drain holds k packets");
                drop(it);
                // After the publication: node `o` may sleep in a wait (see `waits`).
                self.wake_out[o]
                    .as_ref()
                    .expect("a wake for every other node")
                    .notify();
                self.stats.sent += k as u64;
                self.stats.bursts += 1;
                self.pushed_to[o] += k as u64;
                if resched {
                    self.resched_end[o] = self.pushed_to[o];
                }
            }
        }
        self.out[o] = Some(tx);
        open
    }

    /// Pushes the input staged for node `o` onto its bridge; returns whether none is left
    /// (what does not fit stays staged, in order). If node `o` was dropped, its staged
    /// input goes back to the caller (it had entered: counted as finished then).
    pub(super) fn push_staged_out(&mut self, o: usize) -> bool {
        if self.staged_out[o].is_empty() {
            return true;
        }
        let mut v = core::mem::take(&mut self.staged_out[o]);
        if !self.push_bridge(o, &mut v, false) {
            self.undeliverable.append(&mut v);
        }
        self.staged_out_call[o] = u64::MAX;
        let done = v.is_empty();
        self.staged_out[o] = v;
        done
    }
}
