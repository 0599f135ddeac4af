//! loom models of the sharded counter and the counter group.
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom -- counter::`.
#![cfg(loom)]

use flowline::counter::{CounterGroup, ShardedCounter};
// The handle API takes `&std::sync::Arc<Self>`; the shards' atomics are loom's.
use loom::thread;
use std::sync::Arc;

/// Two writers with handles and a reader summing twice: the sums never go backwards, never
/// exceed the total, and the sum is exact once the writers are joined.
#[test]
fn two_writers_reader_monotonic_and_exact() {
    loom::model(|| {
        let c = Arc::new(ShardedCounter::new(2));
        let ws: Vec<_> = (0..2)
            .map(|_| {
                let c = Arc::clone(&c);
                thread::spawn(move || {
                    let mut h = c.handle();
                    h.add(1);
                    h.add(2);
                })
            })
            .collect();
        let s1 = c.sum();
        let s2 = c.sum();
        assert!(s1 <= s2, "sum went backwards: {s1} then {s2}");
        assert!(s2 <= 6);
        for w in ws {
            w.join().unwrap();
        }
        assert_eq!(c.sum(), 6);
    });
}

/// A handle dropped in one thread and its shard re-acquired in another keeps the total:
/// the second owner continues from the first owner's value.
#[test]
fn drop_and_reacquire_keeps_total() {
    loom::model(|| {
        let c = Arc::new(ShardedCounter::new(1));
        // Both threads compete for the one shard, retrying until the other drops it.
        fn take(c: &Arc<ShardedCounter>) -> flowline::counter::CounterHandle {
            loop {
                match c.try_handle() {
                    Ok(h) => return h,
                    Err(_) => thread::yield_now(),
                }
            }
        }
        let t = {
            let c = Arc::clone(&c);
            thread::spawn(move || {
                let mut h = take(&c);
                h.add(5);
            })
        };
        let mut h = take(&c);
        h.add(1);
        drop(h);
        t.join().unwrap();
        assert_eq!(c.sum(), 6);
    });
}

/// A group writer adds (1 packet, 64 bytes) twice while a reader snapshots: every snapshot
/// is consistent (bytes == 64 * packets).
#[test]
fn group_snapshot_is_consistent() {
    loom::model(|| {
        let g = Arc::new(CounterGroup::new(["pkts", "bytes"], 1));
        let w = {
            let g = Arc::clone(&g);
            thread::spawn(move || {
                let mut h = g.handle();
                h.add_all([1, 64]);
                h.add_all([1, 64]);
            })
        };
        let s = g.snapshot();
        assert_eq!(s[1], 64 * s[0], "torn snapshot {s:?}");
        w.join().unwrap();
        assert_eq!(g.snapshot().values(), &[2, 128]);
    });
}
