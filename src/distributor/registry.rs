//! The worker registry: which workers a distributor has, whether each is active, and their
//! counters, for stats and control threads to read while the distributor runs.
//!
//! The distributor thread is the only writer. It publishes a new roster (an immutable list)
//! when a worker is added, leaves, re-joins or is removed: cold-path events, never per
//! packet or per burst. Readers pin crossbeam-epoch once per read and walk the roster they
//! see; a replaced roster is freed once no pinned reader can see it. The distributor's hot
//! path never touches the registry.

use core::fmt;
use std::sync::Arc;

use crate::counter::{CounterGroup, GroupSnapshot};
use crate::sync::EpochCell;

use super::worker::{WORKER_FIELDS, WORKER_STATS};

/// One worker as a roster lists it.
pub(crate) struct Entry {
    pub(crate) id: usize,
    pub(crate) active: bool,
    /// The worker's own counters (one shard, written only by its handle).
    pub(crate) stats: Arc<CounterGroup<WORKER_FIELDS>>,
}

/// What the registry holds: the workers that exist, and the final counters of the workers
/// removed so far (so that totals never go backwards when a worker is removed).
pub(crate) struct Roster {
    pub(crate) version: u64,
    pub(crate) workers: Vec<Entry>,
    pub(crate) removed: [u64; WORKER_FIELDS],
}

/// A read-only view of a distributor's workers, cheap to clone and to send to a stats or
/// control thread (`Send + Sync`). Each read sees one published roster as a whole; the
/// distributor publishes a new one whenever a worker is added, leaves, re-joins or is
/// removed. Reading costs one crossbeam-epoch pin and one counter snapshot per worker; it
/// takes no lock and never delays the distributor or its workers.
///
/// ```
/// use flowline::distributor::{self, Config};
/// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
/// let reg = d.registry();
/// let stats = std::thread::spawn(move || reg.workers().len()); // from another thread
/// assert_eq!(stats.join().unwrap(), 1);
/// let w = d.add_worker().unwrap();
/// assert_eq!((w.id(), d.registry().active()), (1, 2));
/// ```
#[derive(Clone)]
pub struct WorkerRegistry {
    pub(crate) roster: Arc<EpochCell<Roster>>,
}

/// One worker in a [`WorkerRegistry`] read.
///
/// ```
/// use flowline::distributor::{self, Config};
/// let (mut d, mut ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
/// d.distribute(&mut vec![4]).unwrap();
/// ws[0].recv_burst(&mut Vec::new(), 8).unwrap();
/// let info = &d.registry().workers()[0];
/// assert_eq!((info.id, info.active, info.stats.get("received")), (0, true, Some(1)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    /// The worker's id ([`Worker::id`](super::Worker::id)).
    pub id: usize,
    /// Whether the worker is active (false once the distributor has seen it leave, until it
    /// re-joins).
    pub active: bool,
    /// Its counters ([`WORKER_STATS`]) since it was created or added.
    pub stats: GroupSnapshot<6>,
}

impl WorkerRegistry {
    pub(crate) fn new(workers: Vec<Entry>) -> Self {
        WorkerRegistry {
            roster: Arc::new(EpochCell::new(Roster {
                version: 0,
                workers,
                removed: [0; WORKER_FIELDS],
            })),
        }
    }

    /// Publishes the distributor's current view (only the distributor calls this).
    pub(crate) fn publish(&self, workers: Vec<Entry>, removed: [u64; WORKER_FIELDS]) {
        let mut next = Some((workers, removed));
        self.roster.update(|cur| {
            // One writer: the update never retries, so `next` is still there.
            let (workers, removed) = next.take().expect("the registry has one writer");
            Some(Roster {
                version: cur.version + 1,
                workers,
                removed,
            })
        });
    }

    /// The final counters of the removed workers, as published.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn removed(&self) -> [u64; WORKER_FIELDS] {
        self.roster.read(|r| r.removed)
    }

    /// Every worker that exists (active or away, not removed), by id.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new(Config::default().workers(2).credit(8), |p: &u64| *p).unwrap();
    /// let ids: Vec<usize> = d.registry().workers().iter().map(|w| w.id).collect();
    /// assert_eq!(ids, [0, 1]);
    /// ```
    #[must_use]
    pub fn workers(&self) -> Vec<WorkerInfo> {
        self.roster.read(|r| {
            r.workers
                .iter()
                .map(|e| WorkerInfo {
                    id: e.id,
                    active: e.active,
                    stats: e.stats.snapshot(),
                })
                .collect()
        })
    }

    /// The counters summed over every worker ever created or added, removed ones
    /// included: exact once the workers are quiet, and never going backwards while they
    /// count, also across removals.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new(Config::default().workers(2).credit(8), |p: &u64| *p).unwrap();
    /// assert_eq!(d.registry().totals().get("returned"), Some(0));
    /// ```
    #[must_use]
    pub fn totals(&self) -> GroupSnapshot<6> {
        self.roster.read(|r| {
            let mut total = r.removed;
            for e in &r.workers {
                for (t, v) in total.iter_mut().zip(e.stats.snapshot().values()) {
                    *t = t.wrapping_add(*v);
                }
            }
            GroupSnapshot::from_values(WORKER_STATS, total)
        })
    }

    /// How many workers are active.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (d, _ws) = distributor::new(Config::default().workers(3).credit(8), |p: &u64| *p).unwrap();
    /// assert_eq!(d.registry().active(), 3);
    /// ```
    #[must_use]
    pub fn active(&self) -> usize {
        self.roster
            .read(|r| r.workers.iter().filter(|e| e.active).count())
    }

    /// How many rosters the distributor has published since creation: it changes exactly
    /// when the set of workers or their states change, so a control thread can poll it
    /// cheaply and re-read only then.
    ///
    /// ```
    /// use flowline::distributor::{self, Config};
    /// let (mut d, _ws) = distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    /// let reg = d.registry();
    /// let v = reg.version();
    /// let _w = d.add_worker().unwrap();
    /// assert_eq!(reg.version(), v + 1);
    /// ```
    #[must_use]
    pub fn version(&self) -> u64 {
        self.roster.read(|r| r.version)
    }
}

impl fmt::Debug for WorkerRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One read: the version and the list from the same roster.
        self.roster.read(|r| {
            let workers: Vec<(usize, bool)> = r.workers.iter().map(|e| (e.id, e.active)).collect();
            f.debug_struct("WorkerRegistry")
                .field("version", &r.version)
                .field("workers (id, active)", &workers)
                .field("removed_totals", &r.removed)
                .finish()
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;

    use super::{Entry, WorkerRegistry, WORKER_FIELDS, WORKER_STATS};
    use crate::counter::CounterGroup;

    /// A reader thread walking the registry while its writer publishes rosters that add,
    /// count and remove workers: every read sees one whole roster (ids unique, totals
    /// never going back), and replaced rosters are freed (crossbeam-epoch here; a lock
    /// under Miri's Stacked Borrows run and loom).
    #[test]
    fn registry_readers_see_whole_rosters_while_the_writer_replaces_them() {
        let rounds = if cfg!(miri) { 8 } else { 2_000 };
        let first = Arc::new(CounterGroup::new(WORKER_STATS, 1));
        let reg = WorkerRegistry::new(vec![Entry {
            id: 0,
            active: true,
            stats: Arc::clone(&first),
        }]);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (reg, stop) = (reg.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut last = 0;
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    let t = reg.totals()[0];
                    assert!(t >= last, "totals went back: {last} -> {t}");
                    last = t;
                    let ids: Vec<usize> = reg.workers().iter().map(|w| w.id).collect();
                    let mut sorted = ids.clone();
                    sorted.dedup();
                    assert_eq!(sorted, ids, "ids listed once, in order");
                    std::thread::yield_now();
                }
                last
            })
        };
        let mut removed = [0u64; WORKER_FIELDS];
        let mut h0 = first.handle();
        for r in 0..rounds {
            // Worker 1 comes, counts, and is removed, its count folded into `removed`.
            let g = Arc::new(CounterGroup::new(WORKER_STATS, 1));
            let mut h = g.handle();
            let both = |a: &Arc<CounterGroup<WORKER_FIELDS>>,
                        b: &Arc<CounterGroup<WORKER_FIELDS>>| {
                vec![
                    Entry {
                        id: 0,
                        active: true,
                        stats: Arc::clone(a),
                    },
                    Entry {
                        id: 1,
                        active: r % 2 == 0,
                        stats: Arc::clone(b),
                    },
                ]
            };
            reg.publish(both(&first, &g), removed);
            h.add(0, 3);
            h0.add(0, 1);
            let last = g.snapshot();
            drop(h);
            removed[0] += last[0];
            reg.publish(
                vec![Entry {
                    id: 0,
                    active: true,
                    stats: Arc::clone(&first),
                }],
                removed,
            );
        }
        assert_eq!(reg.version(), 2 * rounds);
        assert_eq!(reg.totals()[0], 4 * rounds);
        assert_eq!(reg.removed()[0], 3 * rounds);
        assert_eq!(reg.active(), 1);
        stop.store(true, std::sync::atomic::Ordering::Release);
        assert!(reader.join().unwrap() <= 4 * rounds);
    }
}
