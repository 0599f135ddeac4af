//! The distributor's flow table: tag -> (worker, position of the flow's last packet in that
//! worker's stream). Owned by the distributor thread alone; never shared.
//!
//! A flow is **in flight** while its worker has not completed the flow's last packet:
//! workers complete packets in the order they received them, so with `sent` and
//! `completed` counters per worker, flow `f` is in flight iff
//! `completed[worker(f)] < last(f)`. Sending a packet costs one table update and no
//! per-packet queue; completing a burst is one counter add.

use std::hash::Hasher;

/// Flow-table size past which idle flows are forgotten (bounded memory under churning
/// tags).
pub(super) const FLOW_TABLE_SOFT_LIMIT: usize = 1 << 16;

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

/// Marks a free slot of the table (no worker has this index).
const FREE: usize = usize::MAX;

/// One slot of the table: a flow and its tag, or free (`flow.worker == FREE`).
#[derive(Clone, Copy)]
struct Slot {
    tag: u64,
    flow: Flow,
}

const FREE_SLOT: Slot = Slot {
    tag: 0,
    flow: Flow {
        worker: FREE,
        last: 0,
    },
};

/// The smallest table that is allocated (slots).
const MIN_SLOTS: usize = 16;

/// tag -> flow: open addressing with linear probing, at most half full, the slot picked by
/// the top bits of a Fibonacci hash of the tag. A hit costs a multiplication, a shift and
/// usually one compare (fewer instructions than `HashMap`'s SIMD group probe:
/// `docs/performance-notes.md`, section 12). Entries are never removed one by one, only by
/// [`prune_idle`]'s rebuild, so no tombstones are needed.
///
/// [`prune_idle`]: FlowTable::prune_idle
pub(crate) struct FlowTable {
    /// A power of two of slots, at least [`MIN_SLOTS`] (allocated at creation, so a lookup
    /// needs no emptiness check).
    slots: Vec<Slot>,
    /// Occupied slots.
    len: usize,
    /// `64 - log2(slots.len())`: the hash's top bits pick the slot.
    shift: u32,
    /// Size past which the next `prune_idle` scans the table (0: the caller's limit).
    prune_at: usize,
}

impl Default for FlowTable {
    fn default() -> Self {
        FlowTable {
            slots: vec![FREE_SLOT; MIN_SLOTS],
            len: 0,
            shift: 64 - MIN_SLOTS.trailing_zeros(),
            prune_at: 0,
        }
    }
}

impl FlowTable {
    /// The first slot to look at for `tag`.
    #[inline(always)]
    fn home(&self, tag: u64) -> usize {
        // Fibonacci hashing: bit k of the product depends on bits 0..=k of the tag, so its
        // top bits (the only ones used) depend on every bit of it, and no fold of the high
        // half into the low one is needed first (`TagHasher`'s fold is for `HashMap`s,
        // which index by the low bits).
        (tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, tag: u64) -> Option<&mut Flow> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(tag);
        loop {
            // SAFETY: `i <= mask` (the home is below `slots.len()`, a power of two and never
            // 0, and every step is masked), so it is in bounds. Unchecked because the
            // bounds checks of this probe cost instructions on every packet
            // (`docs/performance-notes.md`, section 12).
            let s = unsafe { self.slots.get_unchecked(i) };
            if s.flow.worker == FREE {
                return None;
            }
            if s.tag == tag {
                break;
            }
            // At most half full: a free slot ends every probe.
            i = (i + 1) & mask;
        }
        // SAFETY: as above (`i` is the slot the loop stopped at).
        Some(unsafe { &mut self.slots.get_unchecked_mut(i).flow })
    }

    /// Inserts or replaces the flow of `tag`. `flow.worker` is a worker index (never `FREE`).
    #[inline]
    pub(crate) fn set(&mut self, tag: u64, flow: Flow) {
        debug_assert_ne!(flow.worker, FREE);
        if (self.len + 1) * 2 > self.slots.len() {
            self.rebuild(((self.len + 1) * 2).next_power_of_two(), |_| true);
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(tag);
        loop {
            let s = &mut self.slots[i];
            if s.flow.worker == FREE {
                *s = Slot { tag, flow };
                self.len += 1;
                return;
            }
            if s.tag == tag {
                s.flow = flow;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Re-inserts the flows that `keep` keeps into a table of `slots` slots (at least
    /// [`MIN_SLOTS`], and at least twice what is kept).
    fn rebuild(&mut self, slots: usize, keep: impl Fn(&Flow) -> bool) {
        // Filtered before the old slots are replaced: if `keep` panicked, the table would
        // still be whole (a lookup relies on `slots` never being empty).
        let kept: Vec<Slot> = self
            .slots
            .iter()
            .filter(|s| s.flow.worker != FREE && keep(&s.flow))
            .copied()
            .collect();
        let n = slots
            .max(MIN_SLOTS)
            .max((kept.len() * 2).next_power_of_two());
        self.slots = vec![FREE_SLOT; n];
        self.shift = 64 - n.trailing_zeros();
        self.len = 0;
        for s in kept {
            self.set(s.tag, s.flow);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every flow the table knows (in flight or not).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Flow)> {
        self.slots
            .iter()
            .filter(|s| s.flow.worker != FREE)
            .map(|s| (s.tag, &s.flow))
    }

    /// Forgets flows that are not in flight, given each worker's completed count, once the
    /// table has grown past `limit` entries (keeps memory bounded under churning tags). If
    /// most flows are in flight the table stays large; the next scan then waits until it has
    /// doubled, so the cost stays amortised O(1) per inserted flow.
    /// The check is inline (the distributor makes it once per call); the scan is not.
    #[inline]
    pub(crate) fn prune_idle(&mut self, completed: impl Fn(usize) -> u64, limit: usize) {
        if self.len > self.prune_at.max(limit) {
            self.prune_now(completed);
        }
    }

    #[cold]
    #[inline(never)]
    fn prune_now(&mut self, completed: impl Fn(usize) -> u64) {
        self.rebuild(0, |f| completed(f.worker) < f.last);
        self.prune_at = 2 * self.len;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Flow, FlowTable};

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

/// The table against a `HashMap` model: random inserts, replacements, updates through
/// `get_mut`, lookups and prunes, with tags from a small set (many replacements) and with
/// tags that share their low or high bits (long probe runs), across growth and shrinking
/// rebuilds.
#[cfg(all(test, not(loom)))]
mod model {
    use super::{Flow, FlowTable};
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Clone, Debug)]
    enum Op {
        Set(u64, usize, u64),
        Bump(u64),
        Get(u64),
        Prune(u64, usize),
    }

    fn tag() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..40,
            (0u64..40).prop_map(|t| t << 40),
            (0u64..40).prop_map(|t| t.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            any::<u64>(),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (tag(), 0usize..4, 0u64..100).prop_map(|(t, w, l)| Op::Set(t, w, l)),
            1 => tag().prop_map(Op::Bump),
            2 => tag().prop_map(Op::Get),
            1 => (0u64..100, 0usize..40).prop_map(|(c, l)| Op::Prune(c, l)),
        ]
    }

    proptest! {
        #[test]
        // Under Miri (which checks the unchecked indexing) short sequences: each op
        // compares the whole table, interpreted.
        fn matches_a_hashmap(
            ops in proptest::collection::vec(op(), 0..if cfg!(miri) { 40 } else { 300 })
        ) {
            let mut t = FlowTable::default();
            let mut m: HashMap<u64, Flow> = HashMap::new();
            for op in ops {
                match op {
                    Op::Set(tag, worker, last) => {
                        t.set(tag, Flow { worker, last });
                        m.insert(tag, Flow { worker, last });
                    }
                    Op::Bump(tag) => {
                        if let Some(f) = t.get_mut(tag) {
                            f.last += 1;
                        }
                        if let Some(f) = m.get_mut(&tag) {
                            f.last += 1;
                        }
                    }
                    Op::Get(tag) => {
                        prop_assert_eq!(t.get_mut(tag).copied(), m.get(&tag).copied());
                    }
                    Op::Prune(completed, limit) => {
                        let before = t.len();
                        t.prune_idle(|_| completed, limit);
                        if t.len() != before {
                            m.retain(|_, f| completed < f.last);
                        }
                    }
                }
                prop_assert_eq!(t.len(), m.len());
                prop_assert!(t.len() * 2 <= t.slots.len().max(1));
                let mut all: Vec<(u64, Flow)> = t.iter().map(|(k, f)| (k, *f)).collect();
                all.sort_unstable_by_key(|e| e.0);
                let mut want: Vec<(u64, Flow)> = m.iter().map(|(k, f)| (*k, *f)).collect();
                want.sort_unstable_by_key(|e| e.0);
                prop_assert_eq!(all, want);
            }
        }
    }
}
