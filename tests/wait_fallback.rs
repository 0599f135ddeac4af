//! The fallback when the heavy barrier fails after registration (a membarrier call refused
//! by a seccomp filter installed later, `ENOMEM`): waits must stop sleeping (publishers of
//! this process order their side in the compiler only, no CPU fence) and poll with
//! `yield_now`, and still end correctly: items arrive, timeouts expire, disconnection is
//! seen.
//!
//! In its own test binary: the failure is simulated for the whole process.
#![cfg(all(not(loom), feature = "std"))]

use std::time::{Duration, Instant};

use flowline::fifo::{mpsc, spsc};
use flowline::wait::{self, WaitError, WaitStrategy};

#[test]
fn waits_fall_back_to_polling_and_still_end_correctly() {
    assert!(
        !wait::simulate_barrier_failure(),
        "sleeping was already off"
    );
    // The first registration of a task finds the barrier failing: nothing is registered,
    // the clone kept for it is dropped (its panic contained), and the task's own waker is
    // asked to poll again (its panic comes out of the poll; contained, the task would
    // wait for a wake that never comes).
    #[cfg(feature = "async")]
    {
        use std::future::Future;
        use std::task::{Context, RawWaker, RawWakerVTable, Waker};
        static V: RawWakerVTable = RawWakerVTable::new(
            |p| RawWaker::new(p, &V),
            |_| panic!("waker panics in wake"),
            |_| panic!("waker panics in wake_by_ref"),
            |_| panic!("waker panics in drop"),
        );
        let (_tx, mut rx) = spsc::waitable::<u32>(2).unwrap();
        rx.set_wait_strategy(WaitStrategy::SpinPark {
            spins: 0,
            yields: 0,
        });
        // SAFETY: the vtable never dereferences the data pointer; the original is never
        // dropped (its drop panics).
        let w = std::mem::ManuallyDrop::new(unsafe {
            Waker::from_raw(RawWaker::new(std::ptr::null(), &V))
        });
        let before = wait::waker_panics();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = std::pin::pin!(rx.pop_async()).poll(&mut Context::from_waker(&w));
        }));
        let payload = r.expect_err("the task's own wake_by_ref panicked");
        let msg = payload.downcast_ref::<&str>().copied();
        assert_eq!(msg, Some("waker panics in wake_by_ref"));
        assert_eq!(wait::waker_panics() - before, 1, "the kept clone's drop");
    }
    // Park after one spin and one yield: the first wait below tries to sleep at once.
    let park = WaitStrategy::SpinPark {
        spins: 1,
        yields: 1,
    };

    // An item pushed while the consumer would be asleep still arrives.
    let (mut tx, mut rx) = spsc::waitable::<u32>(2).unwrap();
    rx.set_wait_strategy(park);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        tx.push(7).unwrap();
        tx
    });
    assert_eq!(rx.pop_wait(Duration::from_secs(30)), Ok(7));
    assert!(
        wait::sleeping_disabled(),
        "the failed barrier must disable sleeping"
    );
    let tx = t.join().unwrap();

    // A timeout still expires (polling, not sleeping, until the deadline).
    let t0 = Instant::now();
    assert_eq!(
        rx.pop_wait(Duration::from_millis(20)),
        Err(WaitError::Timeout)
    );
    assert!(t0.elapsed() >= Duration::from_millis(20));

    // Disconnection ends a wait without a deadline.
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        drop(tx);
    });
    assert_eq!(rx.pop_wait(Duration::MAX), Err(WaitError::Disconnected));
    t.join().unwrap();

    // The producer side of the MPSC ring: waiting for room, woken by a pop.
    let (mut tx, mut rx) = mpsc::waitable::<u32>(1).unwrap();
    tx.set_wait_strategy(park);
    tx.push(1).unwrap();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(rx.pop(), Some(1));
        rx
    });
    tx.push_wait(2, Duration::from_secs(30)).unwrap();
    let mut rx = t.join().unwrap();
    assert_eq!(rx.pop(), Some(2));
}
