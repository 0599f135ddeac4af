//! loom models of the sleeper / notify protocol (`flowline::wait`): a side that sleeps
//! because the ring is empty (or full) is always woken by the other side's publication or
//! drop. Every model sleeps at once (`SpinPark { spins: 0, yields: 0 }`) and without a
//! deadline, and loom's condition variable never times out, so a lost wake-up is a
//! deadlock that loom reports. Under loom both barriers are `fence(SeqCst)`.
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom -- wait::`.
#![cfg(all(loom, feature = "std"))]

use std::time::Duration;

use flowline::fifo::{mpsc, spsc};
use flowline::wait::{WaitError, WaitStrategy};
use loom::thread;

const SLEEP_AT_ONCE: WaitStrategy = WaitStrategy::SpinPark {
    spins: 0,
    yields: 0,
};

/// Consumer waits for items on an empty ring; the producer pushes two, then drops.
#[test]
fn spsc_consumer_sleeping_for_items_is_woken() {
    loom::model(|| {
        let (mut tx, mut rx) = spsc::waitable::<u32>(2).unwrap();
        rx.set_wait_strategy(SLEEP_AT_ONCE);
        let p = thread::spawn(move || {
            tx.push(1).unwrap();
            tx.push(2).unwrap();
        });
        assert_eq!(rx.pop_wait(Duration::MAX), Ok(1));
        assert_eq!(rx.pop_wait(Duration::MAX), Ok(2));
        assert_eq!(rx.pop_wait(Duration::MAX), Err(WaitError::Disconnected));
        p.join().unwrap();
    });
}

/// Producer waits for room on a full ring; the consumer takes one item (a burst pop, which
/// releases at once), then drops.
#[test]
fn spsc_producer_sleeping_for_room_is_woken() {
    loom::model(|| {
        let (mut tx, mut rx) = spsc::waitable::<u32>(1).unwrap();
        tx.set_wait_strategy(SLEEP_AT_ONCE);
        tx.push(1).unwrap();
        let c = thread::spawn(move || {
            let mut v = Vec::new();
            while v.is_empty() {
                rx.pop_burst_into(&mut v, 1);
                thread::yield_now();
            }
            assert_eq!(v, [1]);
        });
        // Either the room (the consumer took one) or the drop after it wakes the wait.
        match tx.push_wait(2, Duration::MAX) {
            Ok(()) => {}
            Err(e) => assert_eq!(e.error, WaitError::Disconnected),
        }
        c.join().unwrap();
    });
}

/// A single pop released lazily still wakes the producer: the consumer's pop of the last
/// item it has seen releases the slot (and notifies).
#[test]
fn spsc_lazy_single_pop_wakes_a_producer_waiting_for_room() {
    loom::model(|| {
        let (mut tx, mut rx) = spsc::build::<u32, flowline::fifo::Wait>(2, 0, Some(2)).unwrap();
        tx.set_wait_strategy(SLEEP_AT_ONCE);
        tx.push(1).unwrap();
        tx.push(2).unwrap();
        let c = thread::spawn(move || {
            rx.set_wait_strategy(SLEEP_AT_ONCE);
            let a = rx.pop_wait(Duration::MAX).unwrap();
            let b = rx.pop_wait(Duration::MAX).unwrap();
            let c = rx.pop_wait(Duration::MAX).unwrap();
            (a, b, c)
        });
        tx.push_wait(3, Duration::MAX).unwrap();
        assert_eq!(c.join().unwrap(), (1, 2, 3));
    });
}

/// MPSC: the consumer sleeps for items; two producers publish one each and drop.
#[test]
fn mpsc_consumer_sleeping_for_items_is_woken() {
    loom::model(|| {
        let (mut tx, mut rx) = mpsc::waitable::<u32>(2).unwrap();
        rx.set_wait_strategy(SLEEP_AT_ONCE);
        let mut tx2 = tx.clone();
        let a = thread::spawn(move || tx.push(1).unwrap());
        let b = thread::spawn(move || tx2.push(2).unwrap());
        let mut got = [
            rx.pop_wait(Duration::MAX).unwrap(),
            rx.pop_wait(Duration::MAX).unwrap(),
        ];
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        assert_eq!(rx.pop_wait(Duration::MAX), Err(WaitError::Disconnected));
        a.join().unwrap();
        b.join().unwrap();
    });
}

/// MPSC: a producer sleeps for room on a full ring; the consumer takes the item.
#[test]
fn mpsc_producer_sleeping_for_room_is_woken() {
    loom::model(|| {
        let (mut tx, mut rx) = mpsc::waitable::<u32>(1).unwrap();
        tx.set_wait_strategy(SLEEP_AT_ONCE);
        tx.push(1).unwrap();
        let c = thread::spawn(move || {
            rx.set_wait_strategy(SLEEP_AT_ONCE);
            let a = rx.pop_wait(Duration::MAX).unwrap();
            let b = rx.pop_wait(Duration::MAX).unwrap();
            (a, b)
        });
        tx.push_wait(2, Duration::MAX).unwrap();
        assert_eq!(c.join().unwrap(), (1, 2));
    });
}

/// A producer sleeping for room on a full ring learns of the consumer's drop (nothing
/// popped, so only the drop can wake it), and gets its item back.
#[test]
fn spsc_consumer_drop_wakes_a_producer_waiting_for_room() {
    loom::model(|| {
        let (mut tx, rx) = spsc::waitable::<u32>(1).unwrap();
        tx.set_wait_strategy(SLEEP_AT_ONCE);
        tx.push(1).unwrap();
        let c = thread::spawn(move || drop(rx));
        let e = tx.push_wait(2, Duration::MAX).unwrap_err();
        assert_eq!((e.error, e.value), (WaitError::Disconnected, 2));
        c.join().unwrap();
    });
}

/// MPSC: the same, and the consumer's drop wakes every producer sleeping for room.
#[test]
fn mpsc_consumer_drop_wakes_producers_waiting_for_room() {
    loom::model(|| {
        let (mut tx, rx) = mpsc::waitable::<u32>(1).unwrap();
        tx.set_wait_strategy(SLEEP_AT_ONCE);
        tx.push(1).unwrap();
        let mut tx2 = tx.clone();
        let p = thread::spawn(move || tx2.push_wait(3, Duration::MAX).unwrap_err().error);
        let c = thread::spawn(move || drop(rx));
        let e = tx.push_wait(2, Duration::MAX).unwrap_err();
        assert_eq!((e.error, e.value), (WaitError::Disconnected, 2));
        assert_eq!(p.join().unwrap(), WaitError::Disconnected);
        c.join().unwrap();
    });
}
