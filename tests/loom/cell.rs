//! loom model of assign-unless-equal: concurrent writers and a reader.
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom -- cell::`.
#![cfg(loom)]

use flowline::cell::AssignUnlessEqual;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Two writers and a reader on one cell. Writer 1 assigns 1 then 2; writer 2 assigns 1.
/// Each writer first stores a payload it "publishes" with the assignment. Checked:
/// * the reader and the final load only ever see 0 (initial) or a value some writer passed;
/// * a value the reader sees other than 0 carries the published payload (the store that put
///   it there was a Release store, even if a later call skipped its own store);
/// * the "wrote" results agree with the final value: the final value was stored by a call
///   that returned true (or is the initial value and nobody stored), and every call that
///   returned false saw its value already there, so that value had been stored before.
#[test]
fn writers_and_reader_see_only_written_values() {
    loom::model(|| {
        let cell = Arc::new(AtomicU64::new(0));
        let payload = Arc::new(AtomicU64::new(0));

        let w1 = {
            let (cell, payload) = (Arc::clone(&cell), Arc::clone(&payload));
            thread::spawn(move || {
                payload.store(42, Ordering::Relaxed);
                let a = cell.assign_unless_equal(1, Ordering::Release);
                let b = cell.assign_unless_equal(2, Ordering::Release);
                (a, b)
            })
        };
        let w2 = {
            let (cell, payload) = (Arc::clone(&cell), Arc::clone(&payload));
            thread::spawn(move || {
                payload.store(42, Ordering::Relaxed);
                cell.assign_unless_equal(1, Ordering::Release)
            })
        };
        let seen = cell.load(Ordering::Acquire);
        assert!(seen <= 2, "reader saw {seen}, which nobody wrote");
        if seen != 0 {
            assert_eq!(payload.load(Ordering::Relaxed), 42, "release edge lost");
        }

        let (w1_one, w1_two) = w1.join().unwrap();
        let w2_one = w2.join().unwrap();
        let last = cell.load(Ordering::Relaxed);

        // Writer 1's assignment of 2 is after its assignment of 1 and nobody else writes 2:
        // it always finds something else there, so it always stores.
        assert!(w1_two, "2 was never in the cell before writer 1 stored it");
        // Somebody stored 1 (it was not the initial value): at least one of the two calls
        // assigning 1 wrote.
        assert!(w1_one || w2_one, "1 became visible without a store");
        // The final value is either 2 (writer 1's last store) or 1 stored by writer 2 after
        // it; in the latter case writer 2 must report that it wrote.
        match last {
            2 => {}
            1 => assert!(w2_one, "final 1 came from a call that reported no write"),
            v => panic!("final value {v} was never written"),
        }
    });
}

/// A writer that keeps assigning the value already present never stores: a reader racing
/// with it only ever sees that value, and every call reports no write.
#[test]
fn unchanged_value_is_never_rewritten() {
    loom::model(|| {
        let cell = Arc::new(AtomicU64::new(7));
        let w = {
            let cell = Arc::clone(&cell);
            thread::spawn(move || (0..3).any(|_| cell.assign_unless_equal(7, Ordering::Release)))
        };
        assert_eq!(cell.load(Ordering::Acquire), 7);
        assert!(!w.join().unwrap());
        assert_eq!(cell.load(Ordering::Relaxed), 7);
    });
}
