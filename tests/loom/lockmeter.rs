//! loom model of the lockmeter's spinlock: mutual exclusion (loom flags any two accesses
//! to the protected value that the lock does not order) and no lost update.
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom -- lockmeter::`.
#![cfg(loom)]

use flowline::lockmeter::SpinLock;
use loom::sync::Arc;
use loom::thread;

/// A spawned thread and the main thread each add to the value under the lock, one with
/// `lock`, the other with `try_lock` until it succeeds. Every interleaving keeps both
/// updates, and the value is never accessed by two threads without the lock between.
#[test]
fn spinlock_excludes_and_loses_no_update() {
    loom::model(|| {
        let l = Arc::new(SpinLock::new(0u32));
        let a = {
            let l = Arc::clone(&l);
            thread::spawn(move || {
                *l.lock() += 1;
            })
        };
        loop {
            if let Some(mut g) = l.try_lock() {
                *g += 10;
                break;
            }
            thread::yield_now();
        }
        a.join().unwrap();
        assert_eq!(*l.lock(), 11);
        assert!(!l.is_locked());
    });
}

/// Both contenders through `lock` (the spinning path waits inside the library).
#[test]
fn spinlock_lock_against_lock() {
    loom::model(|| {
        let l = Arc::new(SpinLock::new(0u32));
        let a = {
            let l = Arc::clone(&l);
            thread::spawn(move || {
                *l.lock() += 1;
            })
        };
        *l.lock() += 10;
        a.join().unwrap();
        assert_eq!(l.try_lock().map(|g| *g), Some(11));
    });
}
