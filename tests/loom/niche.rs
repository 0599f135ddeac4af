//! loom models of the index-free `niche` ring: single, burst and bulk operations on
//! capacity 2 (so full, empty and wrap-around are all reached), with items whose contents
//! are written before the push and read after the pop through loom cells (so a missing
//! Release/Acquire edge between the ends is reported as a data race), and exactly-once drop
//! of leftovers.
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom -- niche::`.
#![cfg(loom)]

use flowline::fifo::niche;
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A packet: its contents are written by the producer after allocation, read by the
/// consumer after the pop.
type Packet = Box<UnsafeCell<u32>>;

fn packet(v: u32) -> Packet {
    let p = Box::new(UnsafeCell::new(0));
    // SAFETY: the packet is not shared yet.
    p.with_mut(|c| unsafe { *c = v });
    p
}

fn read(p: &Packet) -> u32 {
    // SAFETY: the consumer owns the packet after the pop; loom checks that the producer's
    // write happens before this read.
    p.with(|c| unsafe { *c })
}

/// Producer: `push`, then a bulk of 2 (which must find both slots empty by reading only
/// the second: the consumer's clears of both must happen before its writes), then a burst;
/// consumer: `pop`, a bulk pop of 2, then a burst pop. 5 items through 2 slots. Checked:
/// order, count, contents (loom's cell tracking), and that the model finishes (no item
/// lost to a clear that landed after a new write).
#[test]
fn single_bulk_and_burst_ops_keep_order() {
    loom::model(|| {
        let (mut tx, mut rx) = niche::channel::<Packet>(2).unwrap();
        let p = thread::spawn(move || {
            let mut next = Some(packet(0));
            while let Some(v) = next.take() {
                if let Err(v) = tx.push(v) {
                    next = Some(v.into_inner());
                    thread::yield_now();
                }
            }
            while tx.push_bulk_iter([packet(1), packet(2)]).is_err() {
                thread::yield_now();
            }
            let mut rest = [packet(3), packet(4)].into_iter();
            while rest.len() > 0 {
                if tx.push_burst_iter(&mut rest) == 0 {
                    thread::yield_now();
                }
            }
        });
        let mut got = Vec::new();
        while got.len() < 5 {
            let before = got.len();
            let mut buf = Vec::new();
            match got.len() {
                0 => buf.extend(rx.pop()),
                1 => {
                    let _ = rx.pop_bulk_into(&mut buf, 2);
                }
                _ => {
                    rx.pop_burst_into(&mut buf, 2);
                }
            }
            got.extend(buf.iter().map(read));
            if got.len() == before {
                thread::yield_now();
            }
        }
        p.join().unwrap();
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert!(rx.is_abandoned());
        assert!(rx.pop().is_none());
    });
}

/// The `Copy` slice forms with a bulk push that has to wait: 4 items in two bulks of 2
/// through 2 slots while the consumer pops one at a time.
#[test]
fn slice_bulk_waits_for_both_slots() {
    loom::model(|| {
        let (mut tx, mut rx) = niche::channel::<core::num::NonZeroUsize>(2).unwrap();
        let nz = |v| core::num::NonZeroUsize::new(v).unwrap();
        let p = thread::spawn(move || {
            for pair in [[nz(1), nz(2)], [nz(3), nz(4)]] {
                while !tx.push_bulk(&pair) {
                    thread::yield_now();
                }
            }
        });
        let mut got = Vec::new();
        while got.len() < 4 {
            match rx.pop() {
                Some(v) => got.push(v.get()),
                None => thread::yield_now(),
            }
        }
        p.join().unwrap();
        assert_eq!(got, [1, 2, 3, 4]);
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
        let (mut tx, mut rx) = niche::channel::<Box<Counted>>(2).unwrap();
        let p = {
            let drops = Arc::clone(&drops);
            thread::spawn(move || {
                let _ = tx.push(Box::new(Counted(Arc::clone(&drops))));
                let _ = tx.push(Box::new(Counted(drops)));
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
