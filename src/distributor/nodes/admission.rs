//! A node's admission: the hook through which the multi-node layout steers its node's
//! atomic schedule (see [`admission`](crate::distributor::admission)). Packets that must
//! wait behind others queued at the node are held back; reschedules of flows another node
//! owns are exported, in order, for the node to send over its bridge.

use core::fmt;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

use crate::distributor::admission::sealed::Admitting;
use crate::distributor::flows::TagHasher;
use crate::distributor::ownership::Ownership;

type TagMap = HashMap<u64, u64, BuildHasherDefault<TagHasher>>;
type TagSet = HashSet<u64, BuildHasherDefault<TagHasher>>;

/// The admission of one node of a [`nodes`](crate::distributor::nodes) layout, the second
/// parameter of its distributor's [`Atomic`](crate::distributor::Atomic) schedule: which
/// flows the node owns, and which packets wait behind others queued at the node.
pub struct NodeAdmission<T> {
    /// Which tags this node owns: rescheduled packets of tags another node owns are not
    /// routed here but moved to `exported`.
    pub(super) ownership: Ownership,
    /// Packets waiting at the node to be placed (a bridge's packets waiting for credit,
    /// packets a handover released), as tag -> the earliest `epoch` at which one of them
    /// arrived (0: before any reschedule). A backlog packet read by a later poll waits
    /// behind them (invariant 4: a reschedule goes before what arrives after it, and after
    /// what arrived before it). Set by the node before each routing step while its backlog
    /// is not empty; empty otherwise.
    pub(super) behind: TagMap,
    /// Tags of backlog packets kept behind `behind` in this routing pass, with the earliest
    /// poll that read one: input of such a tag that arrived at or after that poll waits too
    /// (it is newer); input that arrived before does not.
    held_back: TagMap,
    /// Tags whose packets wait in the node's queue of released packets (set by the node
    /// before it places another queue, empty otherwise). Input of such a tag waits behind
    /// them: it is newer.
    pub(super) wait_first: TagSet,
    /// Rescheduled packets of tags another node owns, in order, for the node to send over
    /// its bridge.
    pub(super) exported: Vec<T>,
    /// In step with `exported`: the poll that read each of them.
    pub(super) exported_at: Vec<u64>,
}

impl<T> NodeAdmission<T> {
    /// The admission of a node with this copy of the ownership map.
    pub(super) fn new(ownership: Ownership) -> Self {
        NodeAdmission {
            ownership,
            behind: TagMap::default(),
            held_back: TagMap::default(),
            wait_first: TagSet::default(),
            exported: Vec::new(),
            exported_at: Vec::new(),
        }
    }

    /// Moves `p`, read by poll `at`, to the packets exported to other nodes.
    pub(super) fn export(&mut self, p: T, at: u64) {
        self.exported.push(p);
        self.exported_at.push(at);
    }
}

impl<T> fmt::Debug for NodeAdmission<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeAdmission")
            .field("waiting_tags", &(self.behind.len() + self.wait_first.len()))
            .field("exported", &self.exported.len())
            .finish_non_exhaustive()
    }
}

impl<T> Admitting<T> for NodeAdmission<T> {
    #[inline(always)]
    fn may_hold(&self) -> bool {
        !self.wait_first.is_empty() || !self.held_back.is_empty()
    }

    #[inline(always)]
    fn begin_pass(&mut self) {
        // (`clear` rewrites a map's control bytes even when it is empty.)
        if !self.held_back.is_empty() {
            self.held_back.clear();
        }
    }

    #[inline(always)]
    fn own_call(&mut self) {
        if !self.behind.is_empty() {
            self.behind.clear();
        }
    }

    #[inline(always)]
    fn holds_input(&self, t: u64, came: u64) -> bool {
        self.wait_first.contains(&t) || self.held_back.get(&t).is_some_and(|&read| read <= came)
    }

    #[inline(always)]
    fn holds_backlog(&mut self, t: u64, at: u64) -> bool {
        // Read after older packets of its flow reached the node, and they still wait
        // there: it goes after them.
        if self.behind.get(&t).is_some_and(|&arrived| arrived < at) {
            let h = self.held_back.entry(t).or_insert(at);
            *h = (*h).min(at);
            true
        } else {
            false
        }
    }

    #[inline(always)]
    fn try_export(&mut self, t: u64, p: T, at: u64) -> Option<T> {
        if self.ownership.routes_here(t) {
            Some(p)
        } else {
            // A reschedule to a tag another node owns: that node routes it.
            self.export(p, at);
            None
        }
    }
}
