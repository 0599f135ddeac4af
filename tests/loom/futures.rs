//! loom models of the async waits (feature `async`): a future that waits because the ring
//! is empty (or full) registers its task's waker on the sleeper slot, re-checks, and
//! returns `Pending`; the other side's publication or drop must wake it. The futures run
//! under `loom::future::block_on`, which parks the thread while the future is pending, so
//! a lost wake-up is a deadlock that loom reports. Under loom both barriers are
//! `fence(SeqCst)`.
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom -- futures::`.
#![cfg(all(loom, feature = "async"))]

use flowline::fifo::{mpsc, spsc};
use flowline::wait::{waker_panics, WaitError, WaitStrategy};

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

/// As [`block_on`], with a waker whose clones (the ones the rings keep for a registered
/// task) panic after they unpark the thread, in `wake`, and in `drop`: the rings contain
/// each panic, so every wait still ends and nothing is lost. The original (the polling
/// task's own waker, whose self-wakes are not contained) only unparks.
fn block_on_panicking<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
    // The data is a `Box<thread::Thread>`; the original's drop (the executor's, here) is
    // quiet, the clones' panics.
    fn raw(t: thread::Thread, vtable: &'static RawWakerVTable) -> RawWaker {
        RawWaker::new(Box::into_raw(Box::new(t)).cast(), vtable)
    }
    // SAFETY (all four): `p` is a `Box<thread::Thread>` made by `raw`, freed only by
    // `wake` or `drop`, each of which consumes the waker.
    unsafe fn clone(p: *const ()) -> RawWaker {
        raw(unsafe { &*p.cast::<thread::Thread>() }.clone(), &CLONE)
    }
    unsafe fn wake(p: *const ()) {
        let t = unsafe { Box::from_raw(p.cast_mut().cast::<thread::Thread>()) };
        t.unpark();
        drop(t);
        panic!("waker panics in wake");
    }
    unsafe fn wake_by_ref(p: *const ()) {
        unsafe { &*p.cast::<thread::Thread>() }.unpark();
    }
    unsafe fn drop_quietly(p: *const ()) {
        drop(unsafe { Box::from_raw(p.cast_mut().cast::<thread::Thread>()) });
    }
    unsafe fn drop_panics(p: *const ()) {
        drop(unsafe { Box::from_raw(p.cast_mut().cast::<thread::Thread>()) });
        panic!("waker panics in drop");
    }
    static ORIGINAL: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_quietly);
    static CLONE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_panics);
    quiet_waker_panics();
    let mut future = std::pin::pin!(future);
    // SAFETY: the vtable functions keep the contract above.
    let waker = unsafe { Waker::from_raw(raw(thread::current(), &ORIGINAL)) };
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

/// Keeps the panic hook from printing the models' own waker panics (thousands of
/// executions); every other panic is reported as before.
fn quiet_waker_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info.payload().downcast_ref::<&str>().copied();
            if !msg.is_some_and(|m| m.starts_with("waker panics")) {
                default(info);
            }
        }));
    });
}

/// Wake points with a panicking waker, items direction: the consumer task's registered
/// waker panics when the producer's pushes and its drop wake it, and when it is dropped;
/// every item still arrives, then `Disconnected`.
#[test]
fn spsc_pop_async_with_a_panicking_waker_loses_nothing() {
    let before = waker_panics();
    loom::model(|| {
        let (mut tx, mut rx) = spsc::waitable::<u32>(2).unwrap();
        rx.set_wait_strategy(WaitStrategy::SpinPark {
            spins: 0,
            yields: 1,
        });
        let p = thread::spawn(move || {
            tx.push(1).unwrap();
            tx.push(2).unwrap();
        });
        assert_eq!(block_on_panicking(rx.pop_async()), Ok(1));
        assert_eq!(block_on_panicking(rx.pop_async()), Ok(2));
        assert_eq!(
            block_on_panicking(rx.pop_async()),
            Err(WaitError::Disconnected)
        );
        p.join().unwrap();
    });
    assert!(
        waker_panics() > before,
        "some execution ran a panicking waker"
    );
}

/// Wake points with a panicking waker, room direction, on both rings: the producer task's
/// waker panics when the consumer's pop frees a slot (the pop still returns its item) and
/// when the consumer's drop wakes it; the wait ends (the consumer-gone flag is set before
/// any waker runs).
macro_rules! push_async_with_a_panicking_waker {
    ($name:ident, $ring:ident) => {
        #[test]
        fn $name() {
            let before = waker_panics();
            loom::model(|| {
                let (mut tx, mut rx) = $ring::waitable::<u32>(1).unwrap();
                tx.set_wait_strategy(REGISTER_AT_ONCE);
                tx.push(1).unwrap();
                let c = thread::spawn(move || loop {
                    if let Some(v) = rx.pop() {
                        assert_eq!(v, 1);
                        break;
                    }
                    thread::yield_now();
                });
                let r = block_on_panicking(tx.push_async(2));
                assert!(r.is_ok() || r.unwrap_err().error == WaitError::Disconnected);
                c.join().unwrap();
            });
            assert!(
                waker_panics() > before,
                "some execution ran a panicking waker"
            );
        }
    };
}

push_async_with_a_panicking_waker!(spsc_push_async_with_a_panicking_waker_loses_no_pop, spsc);
push_async_with_a_panicking_waker!(
    mpsc_push_async_with_a_panicking_waker_sees_the_consumer_go,
    mpsc
);
