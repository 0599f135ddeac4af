//! Test scaffolding shared by the async tests: a waker that counts its wakes, and the
//! wait strategy that registers at the first poll that finds nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

use flowline::wait::WaitStrategy;

/// Registers at the first poll that finds nothing (no yields to the executor first).
pub const REGISTER_AT_ONCE: WaitStrategy = WaitStrategy::SpinPark {
    spins: 0,
    yields: 0,
};

/// A waker's wake count.
pub struct Counter(pub AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waker that counts its wakes, and its count.
pub fn counting() -> (Arc<Counter>, Waker) {
    let c = Arc::new(Counter(AtomicUsize::new(0)));
    (c.clone(), Waker::from(c))
}
