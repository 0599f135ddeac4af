//! Waiting without burning a core: wait strategies, and the sleeper / notify protocol the
//! rings use for their blocking operations (`pop_wait`, `push_wait`, ...).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use flowline::fifo::spsc;
//! use flowline::wait::{WaitError, WaitStrategy};
//!
//! let (mut tx, mut rx) = spsc::waitable::<u64>(64).unwrap();
//! rx.set_wait_strategy(WaitStrategy::SpinPark { spins: 64, yields: 4 });
//! let t = std::thread::spawn(move || {
//!     for i in 0..1000 {
//!         tx.push_wait(i, Duration::from_secs(10)).unwrap();
//!     }
//! });
//! for i in 0..1000 {
//!     assert_eq!(rx.pop_wait(Duration::from_secs(10)), Ok(i));
//! }
//! t.join().unwrap();
//! // The producer is gone and the ring is empty: the wait ends at once.
//! assert_eq!(rx.pop_wait(Duration::from_secs(10)), Err(WaitError::Disconnected));
//! ```
//!
//! # What a busy ring pays
//!
//! Only rings made waitable pay anything: [`spsc::waitable`](crate::fifo::spsc::waitable)
//! and [`mpsc::waitable`](crate::fifo::mpsc::waitable) give ends of
//! [`WaitMode`](crate::fifo::WaitMode) [`Wait`](crate::fifo::Wait), which have the blocking
//! operations; `channel` gives [`NoWait`](crate::fifo::NoWait) ends, whose publications
//! compile the check below out entirely (the mode is a type parameter). The distributor
//! uses the same check once more: its workers' hand-backs notify one sleeper slot of the
//! distributor's own, where a sleeping `flush` waits.
//!
//! Each direction of a waitable ring (items for the consumer, room for the producer) has a
//! sleeper count on a line that is written only when a thread goes to sleep or wakes. After
//! every index publication the publishing side runs a *light barrier* and loads that count;
//! while nobody sleeps the line stays shared in both caches, so the check is an L1 hit and a
//! predictable branch: no shared write, no atomic read-modify-write. Only when the count is
//! non-zero does the publisher take the sleepers' mutex and notify.
//!
//! # No lost wake-ups
//!
//! The sleeper announces itself (increments the count), runs a *heavy barrier*, takes the
//! mutex, re-checks the ring, and only then waits on a condition variable, holding the
//! mutex from the re-check to the wait. The publisher stores its index, runs the light
//! barrier, then loads the count. The two barriers order each side's store before its load
//! (the store-load case that plain release / acquire does not cover): either the publisher
//! sees the announcement and wakes the sleeper, or the sleeper's re-check sees the new
//! index. The wake takes and releases the mutex, then notifies: that lock either comes
//! before the sleeper's re-check, which then sees the index, or after the sleeper entered
//! its wait, which the notify then ends.
//!
//! On Linux the barriers are asymmetric: the light one only keeps the compiler from
//! moving the load before the store (on x86_64 the load is an `asm!` block that may read
//! memory and writes none, so the ring end's fields stay in registers across it; elsewhere
//! a compiler fence), the heavy one the `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`
//! system call, which makes every CPU
//! running a thread of this process execute a full memory barrier before it returns (a few
//! microseconds, paid by the thread about to sleep). Where that call is unavailable (other
//! systems, old kernels, seccomp filters), under Miri and under loom, both barriers are
//! `fence(SeqCst)`: the ring's sleeper word then carries a flag, set when the ring is
//! made, that sends the publisher to a slow path with the fence (its first load proves
//! nothing; it loads the count again after the fence). The loom models (`tests/loom/wait.rs`) check the protocol with the
//! fences; Miri checks it with the fences; the asymmetric pair relies on the kernel's
//! documented guarantee. The x86_64 `asm!` form of the publisher's check, which is what
//! runs there natively, is seen by neither (nor by ThreadSanitizer): `tests/stress/wait.rs`
//! checks it, with membarrier and without (`FLOWLINE_NO_MEMBARRIER=1` in CI).
//!
//! Costs to know about:
//! - the publisher's check is one load, one test and one branch on a word that nobody
//!   writes while both sides run: the sleeper count, with a flag folded in where the
//!   barriers are symmetric (no membarrier), which sends every publication to the slow
//!   path that fences and loads again. The check is an `asm!` load on x86_64: a compiler
//!   fence as the light barrier made the compiler reload the ring end's fields after every
//!   publication (the measurements are in `docs/performance-notes.md` in the repository,
//!   "Waitable rings").
//! - each sleep runs the heavy barrier: on Linux it interrupts every CPU that is running a
//!   thread of this process (an IPI; microseconds), busy pollers on isolated cores
//!   included. Threads that sleep often (a consumer whose producer trickles) make the
//!   process's busy threads pay that; a strategy with more spins, or `SpinYield`, avoids it.
//! - where membarrier is unavailable (other systems, kernels before 4.14, a seccomp filter
//!   when the first waitable ring or distributor is made), the light barrier is a full
//!   fence on every publication (an `mfence` on x86, in an out-of-line slow path: tens of
//!   cycles per push or burst). Not measured here; the figures in the README are Linux
//!   with membarrier.
//! - if the barrier call fails after registration (a seccomp filter installed later,
//!   `ENOMEM`), waits stop sleeping for the rest of the process and poll with
//!   `yield_now` instead: still correct, no longer free while idle.
//!
//! # User code
//!
//! A task's waker is user code: its `wake`, `wake_by_ref`, `clone` and `drop` may do
//! anything, panic included. The rings run a waker only where their state is final (the
//! index and the flags it wakes for are published, no lock is held), and every `wake`
//! and `drop` of a waker registered on a ring runs through one function that
//! **contains** a panic: it is caught, counted in [`waker_panics`], and the operation
//! that ran the waker completes as if the waker had returned (the panic hook has
//! reported it, as for any panic). Such a waker belongs to another task than the caller,
//! and the operation may hold an item that unwinding would lose: a `pop` whose release of
//! the slot wakes a producer task still returns its item; an end's `Drop` still marks the
//! end gone. Other wakers registered on the same ring are all woken.
//!
//! The polling task's own waker is not contained: its `clone` (when a future registers)
//! and its `wake_by_ref` (when a future yields to its executor and asks to be polled
//! again) run before anything is taken or counted, and a panic there comes out of that
//! poll, leaving the ring and the future's item as they were. Containing it would leave
//! the task pending with no wake to come.

use core::fmt;
use std::time::{Duration, Instant};

use crate::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};
use crate::sync::{Condvar, Mutex};

mod barrier;
mod blocking;
#[cfg(feature = "async")]
mod futures;
mod sleepers;
#[cfg(all(test, not(loom), feature = "async"))]
mod tests;
mod wake_call;

pub use barrier::*;
pub(crate) use blocking::*;
#[cfg(feature = "async")]
pub use futures::*;
#[cfg(feature = "async")]
pub use sleepers::waker_panics;
pub(crate) use sleepers::*;

/// How a blocking operation waits while it cannot go on.
///
/// ```
/// use flowline::wait::WaitStrategy;
/// assert_eq!(WaitStrategy::default(), WaitStrategy::SpinPark { spins: 128, yields: 8 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStrategy {
    /// Poll in a loop with a spin-loop hint: the lowest latency, a whole core while waiting.
    Spin,
    /// Poll `spins` times with a spin-loop hint, then yield the CPU between polls (other
    /// threads run; the core stays busy when nothing else wants it).
    SpinYield {
        /// Polls before the first yield.
        spins: u32,
    },
    /// Poll `spins` times, yield `yields` times, then sleep until the other side publishes
    /// (or closes, or the timeout passes). Costs nothing while sleeping; waking takes the
    /// scheduler's time (microseconds).
    SpinPark {
        /// Polls before the first yield.
        spins: u32,
        /// Yields before sleeping.
        yields: u32,
    },
}

impl Default for WaitStrategy {
    /// `SpinPark { spins: 128, yields: 8 }`: a burst that arrives within about a
    /// microsecond is taken without a system call; a longer wait sleeps.
    fn default() -> Self {
        WaitStrategy::SpinPark {
            spins: 128,
            yields: 8,
        }
    }
}

/// Why a blocking operation gave up.
///
/// ```
/// use std::time::Duration;
/// use flowline::wait::WaitError;
/// let (_tx, mut rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
/// assert_eq!(rx.pop_wait(Duration::from_millis(1)), Err(WaitError::Timeout));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// The timeout passed first.
    Timeout,
    /// The other end was dropped: no item will come (the ring is empty), or no item will
    /// ever be taken.
    Disconnected,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Timeout => write!(f, "the wait timed out"),
            WaitError::Disconnected => write!(f, "the other end of the ring was dropped"),
        }
    }
}

impl std::error::Error for WaitError {}

/// A blocking push that gave up, with the item it could not place.
///
/// ```
/// use std::time::Duration;
/// use flowline::wait::WaitError;
/// let (mut tx, rx) = flowline::fifo::spsc::waitable::<u8>(1).unwrap();
/// tx.push(1).unwrap();
/// let e = tx.push_wait(2, Duration::from_millis(1)).unwrap_err();
/// assert_eq!((e.error, e.value), (WaitError::Timeout, 2));
/// drop(rx);
/// assert_eq!(tx.push_wait(3, Duration::ZERO).unwrap_err().error, WaitError::Disconnected);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PushWaitError<T> {
    /// Why.
    pub error: WaitError,
    /// The item, given back.
    pub value: T,
}

impl<T> fmt::Debug for PushWaitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushWaitError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for PushWaitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> std::error::Error for PushWaitError<T> {}
