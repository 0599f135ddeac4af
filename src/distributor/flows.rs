//! The distributor's flow table: tag -> (worker, position of the flow's last packet in that
//! worker's stream). Owned by the distributor thread alone; never shared.
//!
//! A flow is **in flight** while its worker has not completed the flow's last packet:
//! workers complete packets in the order they received them, so with `sent` and
//! `completed` counters per worker, flow `f` is in flight iff
//! `completed[worker(f)] < last(f)`. Sending a packet costs one table update and no
//! per-packet queue; completing a burst is one counter add.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Where a flow's packets go and how far its last one is in that worker's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flow {
    pub(crate) worker: usize,
    /// The worker's `sent` count just after the flow's last packet was sent to it.
    pub(crate) last: u64,
}

/// Multiply-shift hashing for integer tags: one multiplication instead of SipHash's rounds.
/// Tags come from packet headers the distributor's own caller computed; a caller worried
/// about adversarial tags should hash them (keyed) before handing them in.
#[derive(Default)]
pub(crate) struct TagHasher(u64);

impl Hasher for TagHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        // Fibonacci hashing; hashbrown uses the top 7 bits as the control byte, which the
        // multiplication fills from every input bit.
        self.0 = (v ^ (v >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// tag -> flow.
#[derive(Default)]
pub(crate) struct FlowTable {
    map: HashMap<u64, Flow, BuildHasherDefault<TagHasher>>,
}

impl FlowTable {
    #[inline]
    pub(crate) fn get_mut(&mut self, tag: u64) -> Option<&mut Flow> {
        self.map.get_mut(&tag)
    }

    #[inline]
    pub(crate) fn set(&mut self, tag: u64, flow: Flow) {
        self.map.insert(tag, flow);
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Forgets flows that are not in flight, given each worker's completed count, once the
    /// table has grown past `limit` entries (keeps memory bounded under churning tags).
    pub(crate) fn prune_idle(&mut self, completed: impl Fn(usize) -> u64, limit: usize) {
        if self.map.len() > limit {
            self.map.retain(|_, f| completed(f.worker) < f.last);
        }
    }
}
