//! `push_burst_wait` on both rings: every way it ends. The fast path (a burst that fits at
//! once) and the slow path (a wait after a full ring) are separate code, so each ending is
//! checked on the path that can produce it.
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
