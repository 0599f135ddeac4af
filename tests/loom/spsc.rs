//! loom models of the SPSC ring: single, burst and chunk operations on capacity 2 (so full,
//! empty and wrap-around are all reached), and exactly-once drop of leftovers.
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom -- spsc::`.
#![cfg(loom)]

use flowline::fifo::spsc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Producer: `push`, then a burst, then a chunk; consumer: `pop`, a read chunk, then a
/// burst pop. 4 items through 2 slots, so the ring fills, empties and wraps. Checked: order,
/// count, and (by loom's slot-access tracking) no unsynchronised slot access.
#[test]
fn single_burst_and_chunk_ops_keep_order() {
    loom::model(|| {
        let (mut tx, mut rx) = spsc::channel::<u32>(2).unwrap();
        let p = thread::spawn(move || {
            while tx.push(0).is_err() {
                thread::yield_now();
            }
            let mut sent = 0;
            while sent < 2 {
                sent += tx.push_burst(&[1, 2][sent..]);
                if sent < 2 {
                    thread::yield_now();
                }
            }
            loop {
                let mut c = tx.write_chunk(1);
                if c.len() == 1 {
                    c.as_mut_slices().0[0].write(3);
                    // SAFETY: the one reserved slot was written just above.
                    unsafe { c.commit(1) };
                    break;
                }
                drop(c);
                thread::yield_now();
            }
        });
        let mut got = Vec::new();
        while got.len() < 4 {
            let before = got.len();
            match got.len() {
                0 => got.extend(rx.pop()),
                1 => {
                    let c = rx.read_chunk(2);
                    let (a, b) = c.as_slices();
                    got.extend(a.iter().chain(b));
                    c.commit_all();
                }
                _ => {
                    let mut buf = [0u32; 2];
                    let n = rx.pop_burst(&mut buf);
                    got.extend(&buf[..n]);
                }
            }
            if got.len() == before {
                thread::yield_now();
            }
        }
        p.join().unwrap();
        assert_eq!(got, [0, 1, 2, 3]);
        assert!(rx.is_abandoned());
        assert_eq!(rx.pop(), None);
    });
}

struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Items left in the ring are dropped exactly once, whichever end is dropped last, with
/// both ends dropped concurrently from two threads.
#[test]
fn leftovers_dropped_exactly_once() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut tx, mut rx) = spsc::channel::<Counted>(2).unwrap();
        let p = {
            let drops = Arc::clone(&drops);
            thread::spawn(move || {
                let _ = tx.push(Counted(Arc::clone(&drops)));
                let _ = tx.push(Counted(drops));
                drop(tx);
            })
        };
        // Takes at most one item (may find none yet), then drops its end.
        drop(rx.pop());
        drop(rx);
        p.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    });
}

/// Lazy release: single pops on a 4-slot ring release their slots in pairs (and before the
/// consumer looks for more items), while the producer pushes 6 items one by one, so it
/// has to wait for released room. Checked: order, count, no unsynchronised slot access (a
/// slot reused before its pop was released would be flagged), and no lost wake-up (the
/// model finishes: a producer waiting for room always gets it).
#[test]
fn single_pops_released_in_batches_keep_order() {
    loom::model(|| {
        let (mut tx, mut rx) = spsc::with_release_batch::<u32>(4, 0, 2).unwrap();
        let p = thread::spawn(move || {
            for i in 0..6 {
                while tx.push(i).is_err() {
                    thread::yield_now();
                }
            }
        });
        let mut got = Vec::new();
        while got.len() < 6 {
            match rx.pop() {
                Some(v) => got.push(v),
                None => thread::yield_now(),
            }
        }
        p.join().unwrap();
        assert_eq!(got, [0, 1, 2, 3, 4, 5]);
    });
}

/// A consumer dropped with single pops not yet released: the final drop sees its real
/// index, so the items it popped are not dropped again and the others are dropped once.
#[test]
fn consumer_dropped_with_pending_release_drops_leftovers_once() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut tx, mut rx) = spsc::with_release_batch::<Counted>(4, 0, 4).unwrap();
        for _ in 0..3 {
            assert!(tx.push(Counted(drops.clone())).is_ok());
        }
        let c = thread::spawn(move || {
            drop(rx.pop());
            drop(rx);
        });
        drop(tx);
        c.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    });
}
