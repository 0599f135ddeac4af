//! `push_burst_wait` and `pop_burst_wait` on both rings: every way they end. The fast path
//! (a burst that fits, or items there, at once) and the slow path (a wait after a full or
//! empty ring) are separate code, so each ending is checked on the path that can produce it.
#![cfg(all(not(loom), feature = "std"))]

use std::time::Duration;

use flowline::fifo::{mpsc, spsc};
use flowline::wait::WaitError;

const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(20);

/// The two rings' producers, seen through what the checks below need.
trait BurstWait: Send + 'static {
    fn burst_wait(&mut self, items: &[u32], timeout: Duration) -> Result<usize, WaitError>;
}

impl BurstWait for spsc::Producer<u32, flowline::fifo::Wait> {
    fn burst_wait(&mut self, items: &[u32], timeout: Duration) -> Result<usize, WaitError> {
        self.push_burst_wait(items, timeout)
    }
}

impl BurstWait for mpsc::Producer<u32, flowline::fifo::Wait> {
    fn burst_wait(&mut self, items: &[u32], timeout: Duration) -> Result<usize, WaitError> {
        self.push_burst_wait(items, timeout)
    }
}

/// The checks, for a ring of 4 slots made by `make`; `pop` takes one item.
fn check<P: BurstWait, C: Send + 'static>(
    make: impl Fn() -> (P, C),
    pop: fn(&mut C) -> Option<u32>,
) {
    // Fast path: as many as fit, in order; an empty burst is Ok(0).
    let (mut tx, mut rx) = make();
    assert_eq!(tx.burst_wait(&[], LONG), Ok(0));
    assert_eq!(tx.burst_wait(&[1, 2, 3, 4, 5], LONG), Ok(4));
    assert_eq!((pop(&mut rx), pop(&mut rx)), (Some(1), Some(2)));

    // Slow path, timeout: the ring stays full.
    let (mut tx, _rx) = make();
    assert_eq!(tx.burst_wait(&[0; 4], LONG), Ok(4));
    assert_eq!(tx.burst_wait(&[9], SHORT), Err(WaitError::Timeout));

    // Slow path, room appears: a consumer on another thread takes one item later.
    let (mut tx, mut rx) = make();
    assert_eq!(tx.burst_wait(&[0, 1, 2, 3], LONG), Ok(4));
    let t = std::thread::spawn(move || {
        std::thread::sleep(SHORT);
        let first = pop(&mut rx);
        (first, rx)
    });
    assert_eq!(tx.burst_wait(&[4, 5], LONG), Ok(1), "one slot came free");
    let (first, mut rx) = t.join().unwrap();
    assert_eq!(first, Some(0));
    let rest: Vec<_> = std::iter::from_fn(|| pop(&mut rx)).collect();
    assert_eq!(rest, [1, 2, 3, 4]);

    // Slow path, the consumer goes away during the wait: Disconnected, nothing pushed.
    let (mut tx, rx) = make();
    assert_eq!(tx.burst_wait(&[0; 4], LONG), Ok(4));
    let t = std::thread::spawn(move || {
        std::thread::sleep(SHORT);
        drop(rx);
    });
    assert_eq!(tx.burst_wait(&[9], LONG), Err(WaitError::Disconnected));
    t.join().unwrap();

    // Fast path, the consumer is already gone: Disconnected even with room (checked
    // first, so nothing is pushed into a ring nobody will read).
    let (mut tx, rx) = make();
    drop(rx);
    assert_eq!(tx.burst_wait(&[1], LONG), Err(WaitError::Disconnected));
}

#[test]
fn spsc_push_burst_wait_ends_every_way() {
    check(|| spsc::waitable::<u32>(4).unwrap(), |rx| rx.pop());
}

#[test]
fn mpsc_push_burst_wait_ends_every_way() {
    check(|| mpsc::waitable::<u32>(4).unwrap(), |rx| rx.pop());
}

/// The two rings' consumers, for `pop_burst_wait`.
trait BurstTake: Send + 'static {
    fn take_wait(
        &mut self,
        out: &mut Vec<u32>,
        max: usize,
        t: Duration,
    ) -> Result<usize, WaitError>;
}

impl BurstTake for spsc::Consumer<u32, flowline::fifo::Wait> {
    fn take_wait(
        &mut self,
        out: &mut Vec<u32>,
        max: usize,
        t: Duration,
    ) -> Result<usize, WaitError> {
        self.pop_burst_wait(out, max, t)
    }
}

impl BurstTake for mpsc::Consumer<u32, flowline::fifo::Wait> {
    fn take_wait(
        &mut self,
        out: &mut Vec<u32>,
        max: usize,
        t: Duration,
    ) -> Result<usize, WaitError> {
        self.pop_burst_wait(out, max, t)
    }
}

/// `pop_burst_wait`'s endings, for a ring of 4 slots made by `make`; `push` sends one item.
/// The fast path (items there at once) and the out-of-line wait are separate code.
fn check_take<P: Send + 'static, C: BurstTake>(
    make: impl Fn() -> (P, C),
    push: fn(&mut P, u32) -> bool,
) {
    // Fast path: up to `max`, in order; `max` 0 takes nothing and never waits.
    let (mut tx, mut rx) = make();
    let mut out = Vec::new();
    assert_eq!(rx.take_wait(&mut out, 0, LONG), Ok(0));
    assert!(push(&mut tx, 1) && push(&mut tx, 2) && push(&mut tx, 3));
    assert_eq!(rx.take_wait(&mut out, 2, LONG), Ok(2));
    assert_eq!(out, [1, 2]);

    // Slow path, timeout: nothing arrives, `out` is unchanged.
    let (_tx, mut rx) = make();
    let mut out = vec![7];
    assert_eq!(rx.take_wait(&mut out, 4, SHORT), Err(WaitError::Timeout));
    assert_eq!(out, [7]);

    // Slow path, an item arrives from another thread during the wait.
    let (mut tx, mut rx) = make();
    let t = std::thread::spawn(move || {
        std::thread::sleep(SHORT);
        assert!(push(&mut tx, 5));
        tx
    });
    let mut out = Vec::new();
    assert_eq!(rx.take_wait(&mut out, 4, LONG), Ok(1));
    assert_eq!(out, [5]);
    drop(t.join().unwrap());

    // The producer goes away during the wait: Disconnected.
    let (tx, mut rx) = make();
    let t = std::thread::spawn(move || {
        std::thread::sleep(SHORT);
        drop(tx);
    });
    assert_eq!(
        rx.take_wait(&mut Vec::new(), 4, LONG),
        Err(WaitError::Disconnected)
    );
    t.join().unwrap();

    // The producer is already gone: what it left comes first, then Disconnected.
    let (mut tx, mut rx) = make();
    assert!(push(&mut tx, 8));
    drop(tx);
    let mut out = Vec::new();
    assert_eq!(rx.take_wait(&mut out, 4, LONG), Ok(1));
    assert_eq!(
        rx.take_wait(&mut out, 4, LONG),
        Err(WaitError::Disconnected)
    );
    assert_eq!(out, [8]);
}

#[test]
fn spsc_pop_burst_wait_ends_every_way() {
    check_take(
        || spsc::waitable::<u32>(4).unwrap(),
        |tx, v| tx.push(v).is_ok(),
    );
}

#[test]
fn mpsc_pop_burst_wait_ends_every_way() {
    check_take(
        || mpsc::waitable::<u32>(4).unwrap(),
        |tx, v| tx.push(v).is_ok(),
    );
}
