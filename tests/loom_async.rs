//! loom models of the async waits (feature `async`): a future that waits because the ring
//! is empty (or full) registers its task's waker on the sleeper slot, re-checks, and
//! returns `Pending`; the other side's publication or drop must wake it. The futures run
//! under `loom::future::block_on`, which parks the thread while the future is pending, so
//! a lost wake-up is a deadlock that loom reports. Under loom both barriers are
//! `fence(SeqCst)`.
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom_async`.
#![cfg(all(loom, feature = "async"))]

use flowline::fifo::{mpsc, spsc};
use flowline::wait::{WaitError, WaitStrategy};

/// Registers at the first poll that finds nothing (the default strategy first yields to
/// the executor 136 times, each a self-wake: more states, and the same registration after).
const REGISTER_AT_ONCE: WaitStrategy = WaitStrategy::SpinPark {
    spins: 0,
    yields: 0,
};
use loom::thread;

/// Runs a future on the calling loom thread, parking it (in the model) while the future
/// is pending; the waker unparks it. A wake that never comes leaves every thread parked:
/// loom reports the deadlock.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake};
    struct Unpark(thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let mut future = std::pin::pin!(future);
    let waker = Arc::new(Unpark(thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

/// The consumer awaits items on an empty ring; the producer pushes two, then drops: both
/// come, then the wait ends with `Disconnected`.
#[test]
fn spsc_pop_async_is_woken_by_pushes_and_drop() {
    loom::model(|| {
        let (mut tx, mut rx) = spsc::waitable::<u32>(2).unwrap();
        // One yield before registering: the self-wake path and the registration both run.
        rx.set_wait_strategy(WaitStrategy::SpinPark {
            spins: 0,
            yields: 1,
        });
        let p = thread::spawn(move || {
            tx.push(1).unwrap();
            tx.push(2).unwrap();
        });
        assert_eq!(block_on(rx.pop_async()), Ok(1));
        assert_eq!(block_on(rx.pop_async()), Ok(2));
        assert_eq!(block_on(rx.pop_async()), Err(WaitError::Disconnected));
        p.join().unwrap();
    });
}

/// The producer awaits room in a full one-slot ring; the consumer pops and then drops.
#[test]
fn spsc_push_async_is_woken_by_pops_and_drop() {
    loom::model(|| {
        let (mut tx, mut rx) = spsc::waitable::<u32>(1).unwrap();
        tx.set_wait_strategy(REGISTER_AT_ONCE);
        tx.push(1).unwrap();
        let c = thread::spawn(move || {
            while rx.pop().is_none() {
                thread::yield_now();
            }
            // Drops with the second item maybe in: the future ends either way.
        });
        let r = block_on(tx.push_async(2));
        assert!(r.is_ok() || r.unwrap_err().error == WaitError::Disconnected);
        c.join().unwrap();
    });
}

/// A burst wait on the MPSC ring, fed by two producers.
#[test]
fn mpsc_pop_burst_async_is_woken_by_two_producers() {
    loom::model(|| {
        let (tx, mut rx) = mpsc::waitable::<u32>(2).unwrap();
        rx.set_wait_strategy(REGISTER_AT_ONCE);
        let mut tx2 = tx.clone();
        let mut tx1 = tx;
        let a = thread::spawn(move || tx1.push(1).unwrap());
        let b = thread::spawn(move || tx2.push(2).unwrap());
        let mut got = Vec::new();
        while got.len() < 2 {
            block_on(rx.pop_burst_async(&mut got, 2)).unwrap();
        }
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        a.join().unwrap();
        b.join().unwrap();
    });
}
