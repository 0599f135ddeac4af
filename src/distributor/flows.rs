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
    /// Size past which the next `prune_idle` scans the table (0: the caller's limit).
    prune_at: usize,
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

    /// Every flow the table knows (in flight or not).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Flow)> {
        self.map.iter().map(|(&t, f)| (t, f))
    }

    /// Forgets flows that are not in flight, given each worker's completed count, once the
    /// table has grown past `limit` entries (keeps memory bounded under churning tags). If
    /// most flows are in flight the table stays large; the next scan then waits until it has
    /// doubled, so the cost stays amortised O(1) per inserted flow.
    pub(crate) fn prune_idle(&mut self, completed: impl Fn(usize) -> u64, limit: usize) {
        if self.map.len() > self.prune_at.max(limit) {
            self.map.retain(|_, f| completed(f.worker) < f.last);
            self.prune_at = 2 * self.map.len();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn prune_forgets_idle_flows_and_backs_off_when_busy() {
        let mut t = FlowTable::default();
        for tag in 0..10u64 {
            t.set(
                tag,
                Flow {
                    worker: 0,
                    last: tag + 1,
                },
            );
        }
        // Worker 0 completed 4 packets: flows 0..=3 are idle.
        t.prune_idle(|_| 4, 8);
        assert_eq!(t.len(), 6);
        assert!(t.get_mut(3).is_none() && t.get_mut(4).is_some());
        // Everything in flight: a scan keeps all, and the next one waits for 2x growth.
        for tag in 10..20u64 {
            t.set(
                tag,
                Flow {
                    worker: 0,
                    last: 100,
                },
            );
        }
        t.prune_idle(|_| 0, 8);
        assert_eq!(t.len(), 16);
        for tag in 20..30u64 {
            t.set(
                tag,
                Flow {
                    worker: 0,
                    last: 100,
                },
            );
        }
        t.prune_idle(|_| 1000, 8); // 26 <= 32: no scan yet, even though all are idle
        assert_eq!(t.len(), 26);
        for tag in 30..40u64 {
            t.set(
                tag,
                Flow {
                    worker: 0,
                    last: 100,
                },
            );
        }
        t.prune_idle(|_| 1000, 8); // 36 > 32: scans, all idle
        assert_eq!(t.len(), 0);
    }
}
