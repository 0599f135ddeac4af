//! Quiescence between the nodes: each node publishes its progress (polls, and the
//! reschedules it has exported), and a node waits until every other node has passed a
//! point before it reuses what they might still read (an epoch scheme in the manner of
//! RCU's grace periods, on padded per-node counters).

use super::*;

/// A node's progress, on its own line: written by that node's thread only.
#[derive(Default)]
pub(super) struct Progress {
    /// Packets that entered the layout here: input taken for the local workers (those
    /// given back unplaced count as finished too) or pushed onto a bridge.
    entered: AtomicU64,
    /// Packets that finished here: collected, dropped or lost, or given back on
    /// [`NoWorkers`] after having entered (at any node), or dropped with the node.
    finished: AtomicU64,
    /// The node's input has ended: it is in `flush` (and has not taken new input since),
    /// or it was dropped.
    flushing: AtomicBool,
    /// The version of the ownership map this node routes by (`u64::MAX` once dropped: it
    /// sends nothing more), stored at the start of a call, after every packet it sent by
    /// an older version is on its bridge.
    adopted: AtomicU64,
    /// The node's last sampled fill plus one (per-mille of its workers' credit in use), 0
    /// when unknown: it does not balance, has no active worker, or was dropped. Written
    /// once per balance period at most (only when it changed); read by the other
    /// balancing nodes once per period.
    load: AtomicU64,
}

/// The layout-wide quiescence check behind [`NodeDistributor::flush`]: one [`Progress`]
/// line per node.
///
/// The argument: counts only grow, and a packet is counted as entered (and published)
/// before any node can finish it, so the sum of `finished` never exceeds the sum of
/// `entered`. A checker that reads every node's `flushing` flag (all set: no node takes
/// new input, so the entered counts stay as they are), then every `finished`, then every
/// `entered`, and finds the sums equal, has seen an instant (between its finished and its
/// entered reads) at which every packet that had entered had finished. All accesses are
/// SeqCst, so they fall into one order with the nodes' stores.
pub(crate) struct Quiescence(Arc<[CachePadded<Progress>]>);

impl Quiescence {
    pub(crate) fn new(nodes: usize) -> Quiescence {
        Quiescence(
            (0..nodes)
                .map(|_| CachePadded::new(Progress::default()))
                .collect(),
        )
    }

    pub(super) fn share(&self) -> Quiescence {
        Quiescence(Arc::clone(&self.0))
    }

    /// Node `node`'s counts, stored where they changed (only that node's thread calls
    /// this for `node`).
    pub(crate) fn publish(&self, node: usize, entered: u64, finished: u64) {
        let p = &self.0[node];
        // Relaxed loads: this thread is the only writer of its counts. SeqCst stores: see
        // the type's docs.
        if p.entered.load(Ordering::Relaxed) != entered {
            p.entered.store(entered, Ordering::SeqCst);
        }
        if p.finished.load(Ordering::Relaxed) != finished {
            p.finished.store(finished, Ordering::SeqCst);
        }
    }

    /// Node `node` routes by map version `v` from now on (only that node's thread calls
    /// this for `node`).
    pub(crate) fn adopt(&self, node: usize, v: u64) {
        // SeqCst (a Release would do): pairs with the load in `adopted`; this node's
        // bridge pushes by older versions come before it in its program order.
        self.0[node].adopted.store(v, Ordering::SeqCst);
    }

    /// The map version node `node` routes by (see [`adopt`](Self::adopt)).
    pub(crate) fn adopted(&self, node: usize) -> u64 {
        // SeqCst (an Acquire would do): pairs with `adopt`, so the bridge pushes node
        // `node` made before are visible to a read of its bridge's tail after this.
        self.0[node].adopted.load(Ordering::SeqCst)
    }

    /// Node `node`'s sampled fill (`None`: unknown), stored only if it changed (only that
    /// node's thread calls this for `node`).
    pub(crate) fn set_load(&self, node: usize, fill: Option<u32>) {
        let v = fill.map_or(0, |f| u64::from(f) + 1);
        // Relaxed: a load hint, not a synchronising flag; readers act on it only through
        // `migrate`, whose protocol does its own synchronisation. Assign-unless-equal
        // keeps the line shared while the value holds.
        crate::cell::AssignUnlessEqual::assign_unless_equal(
            &self.0[node].load,
            v,
            Ordering::Relaxed,
        );
    }

    /// Node `node`'s last sampled fill, if known.
    pub(crate) fn load(&self, node: usize) -> Option<u32> {
        // Relaxed: see `set_load`.
        match self.0[node].load.load(Ordering::Relaxed) {
            0 => None,
            v => Some((v - 1) as u32),
        }
    }

    /// Node `node`'s input has ended (`true`) or started again.
    pub(crate) fn set_flushing(&self, node: usize, on: bool) {
        // SeqCst: see the type's docs.
        self.0[node].flushing.store(on, Ordering::SeqCst);
    }

    /// Whether every node is flushing and every packet that entered has finished.
    pub(crate) fn idle(&self) -> bool {
        // SeqCst: see the type's docs. Flags first, then finished, then entered.
        if !self.0.iter().all(|p| p.flushing.load(Ordering::SeqCst)) {
            return false;
        }
        let finished: u64 = self
            .0
            .iter()
            .map(|p| p.finished.load(Ordering::SeqCst))
            .sum();
        let entered: u64 = self
            .0
            .iter()
            .map(|p| p.entered.load(Ordering::SeqCst))
            .sum();
        finished == entered
    }
}

/// Orders the packets a node holds for a handover by when it read them: a packet that
/// arrived (over a bridge, or as input) after poll `poll` of the return rings sorts after
/// the reschedules that poll read and before those of later polls (invariant 4: a
/// reschedule goes after what arrived before it, before what arrived after it). Polls are
/// counted in a `u64`; this doubles them, which would wrap only after 2^63 polls.
pub(super) fn hold_key(poll: u64, reschedule: bool) -> u64 {
    (poll << 1) | u64::from(!reschedule)
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::{bucket_of, Quiescence};
    use crate::distributor::ownership::{default_owner, SharedMap};
    use crate::fifo::spsc;
    use crate::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    /// A flow's tag whose bucket node 0 owns at the start, and that bucket.
    fn flow_of_node_0(nodes: usize) -> (u64, usize) {
        let tag = (0u64..)
            .find(|&t| default_owner(bucket_of(t), nodes) == 0)
            .unwrap();
        (tag, bucket_of(tag))
    }

    /// The new owner's side of a handover: node 0 moves the flow's bucket to node 1 while
    /// node 2 takes a packet of the flow (adopting a newer map at the start of its call,
    /// as `NodeDistributor::distribute` does, and routing by its copy). Node 1, which may
    /// not have seen the new version yet, reads its bridge from node 2 and, having read a
    /// packet, refreshes its copy once more before deciding (`pump_local`): its copy then
    /// knows the migration (it holds the packet). Without the second refresh, a packet
    /// routed by a newer map than node 1's copy is routed as if node 1 did not own the
    /// bucket (before node 0 is done with it), and the model fails; so it does if the
    /// version line is raised after the map's publication instead of before.
    #[test]
    fn a_receiver_knows_the_map_its_sender_routed_by() {
        let (tag, b) = flow_of_node_0(3);
        // Another bucket of node 0, migrated first: node 1 has seen that change and node 2
        // has not, so node 1's copy is ahead of node 2's until node 2 looks (a version
        // line that trailed the map's publication let node 1 miss the next change).
        let other = (0..super::BUCKETS)
            .find(|&x| x != b && default_owner(x, 3) == 0)
            .unwrap();
        loom::model(move || {
            let map = Arc::new(SharedMap::new(3));
            let (mut tx, mut rx) = spsc::channel::<u64>(1).unwrap(); // node 2 -> 1
            let mut local1 = map.local(1);
            let mut local2 = map.local(2);
            map.start(other, 0, 2).unwrap();
            assert!(map.refresh(&mut local1));
            let map0 = Arc::clone(&map);
            let old = thread::spawn(move || {
                map0.start(b, 0, 1).unwrap();
            });
            let map2 = Arc::clone(&map);
            let sender = thread::spawn(move || {
                map2.refresh(&mut local2);
                if local2.owner(tag) == 1 {
                    tx.push(7).unwrap();
                }
            });
            map.refresh(&mut local1);
            if rx.pop().is_some() {
                map.refresh(&mut local1);
                assert!(
                    local1.held_here(tag),
                    "node 1 would route a packet of a bucket it does not own yet"
                );
            }
            old.join().unwrap();
            sender.join().unwrap();
        });
    }

    /// The old owner's side: node 2 takes a packet of the flow, routing by its copy of
    /// the map (adopting a newer version first), then is dropped (adopting "every
    /// version"). Node 0 moves the bucket to node 1; once it sees that node 2 adopted the
    /// new version, it reads its bridge from node 2 up to the tail it sees then. Every
    /// packet node 2 sent it must be within that count: nothing of the bucket may reach
    /// node 0 after it has handed the bucket over.
    #[test]
    fn the_old_owner_counts_every_packet_sent_by_the_old_map() {
        let (tag, b) = flow_of_node_0(3);
        loom::model(move || {
            let map = Arc::new(SharedMap::new(3));
            let q = Quiescence::new(3);
            let (mut tx, mut rx) = spsc::channel::<u64>(1).unwrap(); // node 2 -> 0
            let mut local2 = map.local(2);
            let (map2, q2) = (Arc::clone(&map), q.share());
            let sender = thread::spawn(move || {
                if map2.refresh(&mut local2) {
                    q2.adopt(2, local2.version());
                }
                if local2.owner(tag) == 0 {
                    tx.push(7).unwrap();
                }
                q2.adopt(2, u64::MAX);
            });
            let v = map.start(b, 0, 1).unwrap();
            let counted = if q.adopted(2) >= v {
                let target = rx.refresh();
                for _ in 0..target {
                    rx.pop().expect("below the tail seen");
                }
                true
            } else {
                false
            };
            sender.join().unwrap();
            if counted {
                assert!(
                    rx.pop().is_none(),
                    "a packet sent by the old map arrived after the count"
                );
            }
        });
    }

    /// Node 0 takes one packet for node 1's flows: counts it, pushes it onto the bridge,
    /// then flushes. Node 1 flushes from the start and pumps its bridge. Neither flush may
    /// return before node 1 has finished the packet.
    #[test]
    fn no_flush_returns_while_a_packet_crosses_a_bridge() {
        loom::model(|| {
            let q = Quiescence::new(2);
            let q0 = q.share();
            let (mut tx, mut rx) = spsc::channel::<u8>(2).unwrap();
            let done = Arc::new(AtomicBool::new(false));
            let done0 = Arc::clone(&done);
            let t = thread::spawn(move || {
                q0.publish(0, 1, 0);
                tx.push(7).unwrap();
                q0.set_flushing(0, true);
                while !q0.idle() {
                    thread::yield_now();
                }
                assert!(
                    done0.load(Ordering::SeqCst),
                    "node 0's flush returned early"
                );
            });
            q.set_flushing(1, true);
            let mut finished = 0;
            loop {
                if rx.pop().is_some() {
                    done.store(true, Ordering::SeqCst);
                    finished += 1;
                    q.publish(1, 0, finished);
                }
                if q.idle() {
                    break;
                }
                thread::yield_now();
            }
            assert_eq!(
                finished, 1,
                "node 1's flush returned before the packet came"
            );
            t.join().unwrap();
        });
    }
}
