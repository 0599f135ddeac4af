//! The multi-node layout's flow-ownership map: flow bucket -> owning node, shared by the
//! node distributors and replaced (under crossbeam-epoch) when a bucket migrates.
//!
//! Tags hash into [`BUCKETS`] buckets; every bucket has one owning node, and while a
//! bucket migrates, the node it comes from. Each node keeps a private copy of the map
//! ([`Ownership`], read per packet on its own thread) and compares its version with the
//! shared one once per call: one load of a line that only a migration writes.

use crossbeam_utils::CachePadded;

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::EpochCell;

/// Number of flow buckets in the ownership map: flows migrate between nodes a bucket at a
/// time ([`bucket_of`] gives a tag's bucket).
///
/// ```
/// assert_eq!(flowline::distributor::nodes::BUCKETS, 4096);
/// ```
pub const BUCKETS: usize = 1 << BUCKET_BITS;
const BUCKET_BITS: u32 = 12;

/// No migration into the bucket is pending (a node number is below 64).
const NONE: u8 = u8::MAX;

/// The bucket of flow `tag`: the top bits of a hash of the tag (splitmix64's finaliser),
/// so neighbouring tags land in different buckets.
///
/// ```
/// use flowline::distributor::nodes::{bucket_of, BUCKETS};
/// assert!(bucket_of(7) < BUCKETS);
/// assert_ne!(bucket_of(7), bucket_of(8));
/// ```
#[inline]
#[must_use]
pub fn bucket_of(tag: u64) -> usize {
    let mut h = tag ^ (tag >> 30);
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> (64 - BUCKET_BITS)) as usize
}

/// The node that owns `bucket` before any migration, in a layout of `nodes` nodes: an
/// even split of the buckets (multiply-shift).
#[inline]
pub(crate) fn default_owner(bucket: usize, nodes: usize) -> usize {
    (bucket * nodes) >> BUCKET_BITS
}

/// One version of the map.
#[derive(Clone)]
pub(crate) struct OwnerMap {
    version: u64,
    /// Owning node of each bucket.
    owner: Box<[u8]>,
    /// For a bucket under migration: the node it comes from (`NONE` otherwise).
    from: Box<[u8]>,
    /// The buckets under migration (a few at most: one per node).
    migrating: Vec<u16>,
}

/// The map all nodes of one layout share.
pub(crate) struct SharedMap {
    map: EpochCell<OwnerMap>,
    /// The map's latest version, written (after the map) by each migration step: the
    /// line the nodes compare their copy's version with once per call.
    version: CachePadded<AtomicU64>,
}

impl SharedMap {
    pub(crate) fn new(nodes: usize) -> SharedMap {
        debug_assert!(nodes >= 1 && nodes < usize::from(NONE));
        let owner = (0..BUCKETS)
            .map(|b| default_owner(b, nodes) as u8)
            .collect();
        SharedMap {
            map: EpochCell::new(OwnerMap {
                version: 0,
                owner,
                from: vec![NONE; BUCKETS].into_boxed_slice(),
                migrating: Vec::new(),
            }),
            version: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// A node's private copy of the current map.
    pub(crate) fn local(&self, node: usize) -> Ownership {
        self.map.read(|m| Ownership {
            node,
            map: m.clone(),
        })
    }

    /// Brings `local` up to date if the map changed since it was copied; returns whether
    /// it did. One load while nothing changed.
    #[inline]
    pub(crate) fn refresh(&self, local: &mut Ownership) -> bool {
        // Acquire: pairs with the Release in `change`, which follows the map's
        // replacement, so the map read below is at least that version.
        if self.version.load(Ordering::Acquire) == local.map.version {
            return false;
        }
        self.map.read(|m| {
            local.map.owner.copy_from_slice(&m.owner);
            local.map.from.copy_from_slice(&m.from);
            local.map.migrating.clone_from(&m.migrating);
            local.map.version = m.version;
        });
        true
    }

    /// Replaces the map with a copy changed by `f` (which returns false to leave it as it
    /// is); returns the new version, or `None` if `f` declined.
    ///
    /// The version line is raised *before* the new map is published (inside the update,
    /// before its compare-exchange): a node that reads the new map (to route by it) has
    /// then also made the raised line visible to whoever its packets reach, so a receiver
    /// that compares the line after reading them sees that its copy is out of date. (The
    /// other order let a receiver read a line still behind a map a sender had already
    /// routed by.) A reader that sees the raised line before the map is published copies
    /// the older map and looks again at its next call. The number raised belongs to the
    /// map this attempt publishes, or, if the compare-exchange fails, to the map that
    /// beat it (same version), so the line never runs ahead of every published map.
    fn change(&self, mut f: impl FnMut(&mut OwnerMap) -> bool) -> Option<u64> {
        let mut version = None;
        let changed = self.map.update(|m| {
            let mut next = m.clone();
            next.version = m.version + 1;
            if !f(&mut next) {
                return None;
            }
            version = Some(next.version);
            // Release: pairs with the Acquire in `refresh`; the map's publication (the
            // update's compare-exchange, AcqRel) comes after it.
            self.version.fetch_max(next.version, Ordering::Release);
            Some(next)
        });
        version.filter(|_| changed)
    }

    /// Starts moving `bucket` from `from` to `to`, if `from` owns it and it is not
    /// migrating; returns the new map version.
    pub(crate) fn start(&self, bucket: usize, from: usize, to: usize) -> Option<u64> {
        self.change(|m| {
            let free = usize::from(m.owner[bucket]) == from && m.from[bucket] == NONE;
            if free {
                m.owner[bucket] = to as u8;
                m.from[bucket] = from as u8;
                m.migrating.push(bucket as u16);
            }
            free
        })
    }

    /// Ends the handovers of every bucket migrating out of `from` for which `done` holds:
    /// the new owners start routing those buckets' packets.
    pub(crate) fn finish(&self, from: usize, done: impl Fn(usize) -> bool) -> Option<u64> {
        self.change(|m| {
            let before = m.migrating.len();
            let from_map = &mut m.from;
            m.migrating.retain(|&b| {
                let b = usize::from(b);
                let end = usize::from(from_map[b]) == from && done(b);
                if end {
                    from_map[b] = NONE;
                }
                !end
            });
            m.migrating.len() != before
        })
    }
}

/// A node's private copy of the map, read per packet by its thread.
pub(crate) struct Ownership {
    node: usize,
    map: OwnerMap,
}

impl Ownership {
    /// The version this copy shows.
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.map.version
    }

    /// The node `tag`'s packets are sent to.
    #[inline]
    pub(crate) fn owner(&self, tag: u64) -> usize {
        usize::from(self.map.owner[bucket_of(tag)])
    }

    /// Whether this node's distributor routes a packet of `tag` to its own workers: it
    /// owns the flow's bucket and no handover into it is pending, or the bucket is leaving
    /// it (its packets still here finish here before the new owner starts).
    #[inline]
    pub(crate) fn routes_here(&self, tag: u64) -> bool {
        let b = bucket_of(tag);
        let (owner, from) = (self.map.owner[b], self.map.from[b]);
        (usize::from(owner) == self.node && from == NONE) || usize::from(from) == self.node
    }

    /// Whether packets of `tag` that reach this node wait here: it is the flow's new
    /// owner and the old owner has not finished the flow's earlier packets yet.
    #[inline]
    pub(crate) fn held_here(&self, tag: u64) -> bool {
        let b = bucket_of(tag);
        usize::from(self.map.owner[b]) == self.node && self.map.from[b] != NONE
    }

    /// Whether a handover into this node is pending (some packets may be held).
    pub(crate) fn holding(&self) -> bool {
        self.map
            .migrating
            .iter()
            .any(|&b| usize::from(self.map.owner[usize::from(b)]) == self.node)
    }

    /// Whether `bucket` is owned by this node with no migration pending.
    pub(crate) fn owns_bucket(&self, bucket: usize) -> bool {
        usize::from(self.map.owner[bucket]) == self.node && self.map.from[bucket] == NONE
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{bucket_of, default_owner, SharedMap, BUCKETS};

    #[test]
    fn migration_moves_a_bucket_and_finishes() {
        let shared = SharedMap::new(2);
        let mut a = shared.local(0);
        let mut b = shared.local(1);
        let bucket = (0..BUCKETS).find(|&x| default_owner(x, 2) == 0).unwrap();
        let tag = (0..).find(|&t| bucket_of(t) == bucket).unwrap();
        assert!(a.routes_here(tag) && !b.routes_here(tag) && a.owns_bucket(bucket));
        assert_eq!(shared.start(bucket, 1, 0), None, "node 1 does not own it");
        let v = shared.start(bucket, 0, 1).unwrap();
        assert_eq!(shared.start(bucket, 0, 1), None, "already migrating");
        assert!(shared.refresh(&mut a) && shared.refresh(&mut b));
        assert!(!shared.refresh(&mut a), "unchanged: one load, no copy");
        assert_eq!((a.version(), b.version()), (v, v));
        // Old owner: still routes the bucket's residual packets; new owner holds them.
        assert!(a.routes_here(tag) && !a.held_here(tag) && a.owner(tag) == 1);
        assert!(!b.routes_here(tag) && b.held_here(tag) && b.holding());
        assert!(shared.finish(0, |x| x == bucket).is_some());
        assert!(
            shared.finish(0, |_| true).is_none(),
            "nothing left to finish"
        );
        shared.refresh(&mut a);
        shared.refresh(&mut b);
        assert!(!a.routes_here(tag) && b.routes_here(tag) && b.owns_bucket(bucket));
        assert!(!b.holding());
    }
}
