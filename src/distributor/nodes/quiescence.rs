//! Quiescence between the nodes: each node publishes its progress (polls, and the
//! reschedules it has exported), and a node waits until every other node has passed a
//! point before it reuses what they might still read (an epoch scheme in the manner of
//! RCU's grace periods, on padded per-node counters).

use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
mod loom_tests;
