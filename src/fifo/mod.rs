//! Bounded packet FIFOs: one cache-line transfer moves many packets.
//!
//! * [`spsc`]: single producer, single consumer.
//! * [`mpsc`]: many producers (cloned handles), one consumer; a stalled producer blocks
//!   no other producer.
//! * [`niche`]: single producer, single consumer, for items that travel as one non-null
//!   pointer (packet pointers, non-zero handles): no shared index, the slots themselves
//!   say full or empty (FastForward).
//!
//! Shared by the index rings (`spsc`, `mpsc`): capacity is fixed at creation and rounded up to a power of two
//! (every slot usable); the producer's and the consumer's indices live on separate
//! `CachePadded` lines; each side keeps a private copy of the other side's index and
//! reloads it only when that copy says full (producer) or empty (consumer), so a burst
//! costs one read of the remote line at most, and usually none. Burst operations take as
//! many items as fit; bulk operations all or nothing; chunks hand out slots to fill or read
//! in place.
//!
//! # Which ring has what
//!
//! | operation | `spsc` | `mpsc` | `niche` |
//! | --- | --- | --- | --- |
//! | `push`, `pop`, `try_pop`, `capacity`, `is_abandoned` | yes | yes | yes |
//! | bursts and bulk (`push_burst`, `push_burst_iter`, `pop_burst`, `pop_burst_into`, `push_bulk`, `pop_bulk`, ...) | yes | yes | yes |
//! | `push_burst_from` (moves out of a `Vec`) | yes | yes | yes |
//! | `pop_burst_with` (a closure per item) | yes | yes | yes |
//! | `write_chunk`, `read_chunk` (in place) | yes | yes | no: a slot holds an item's pointer form, which only `push` and `pop` convert |
//! | a read chunk's `into_iter` (moves items out one at a time) | yes | yes | no (no chunks) |
//! | `peek` | yes | yes | no: a reference to an item needs its pointer form converted, which moves it |
//! | `len`, `free` | yes | yes | no: there is no shared index to count with |
//! | `is_empty`, `is_full` | both ends | both ends | the consumer says empty, the producer full: each end sees only its own next slot |
//! | lazy release of single pops (`set_lazy_release`, `release_pending`; off by default) | yes | yes | no: a pop frees its slot by writing it |
//! | `io::Write` / `io::Read` for rings of `u8` (`std`; blocking on `waitable` rings) | yes | yes | no: `u8` cannot travel as a pointer |
//! | polite polling (`set_polite`; off by default) | yes | no: measured for the SPSC ring only | no |
//! | waits (`push_wait`, `pop_wait`, ...), async, `Stream` | `waitable` rings | `waitable` rings | not yet: it has no sleepers |

use core::fmt;

#[cfg(any(feature = "futures-io", feature = "tokio-io"))]
mod async_io;
#[cfg(feature = "std")]
mod ends;
#[cfg(feature = "async")]
#[cfg_attr(docsrs, doc(cfg(feature = "async")))]
pub mod futures;
mod lines;
pub mod mpsc;
pub mod niche;
mod polite;
mod raw;
mod speculation;
pub mod spsc;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::NoWait {}
    #[cfg(feature = "std")]
    impl Sealed for super::Wait {}
}

/// Whether the ends of a ring can wait (sleep) for each other: the second type parameter of
/// the ring handles, chosen when the ring is made, [`NoWait`] unless asked.
///
/// A ring made with `channel` ([`spsc::channel`], [`mpsc::channel`]) is [`NoWait`]: its
/// publications pay nothing for waiting, not even the load of a sleeper count, and its ends
/// have no blocking operations. A ring made with `waitable` ([`spsc::waitable`],
/// [`mpsc::waitable`], `std` only) is [`Wait`]: its ends also have `pop_wait`, `push_wait`
/// and their burst forms, and every publication (one per push, burst or chunk commit) checks
/// whether the other end sleeps (see [`crate::wait`] for that cost).
///
/// ```
/// use flowline::fifo::{spsc, NoWait, WaitMode};
/// let (tx, _rx): (spsc::Producer<u8, NoWait>, _) = spsc::channel(4).unwrap();
/// assert!(!NoWait::WAITS);
/// # drop(tx);
/// ```
pub trait WaitMode: sealed::Sealed + 'static {
    /// Whether publications check for a sleeping other end.
    const WAITS: bool;
}

/// Ring ends that never sleep (the default): see [`WaitMode`].
///
/// ```
/// use flowline::fifo::{spsc, NoWait};
/// let (mut tx, mut rx): (spsc::Producer<u32, NoWait>, spsc::Consumer<u32>) =
///     spsc::channel(2).unwrap();
/// tx.push(1).unwrap();
/// assert_eq!(rx.pop(), Some(1));
/// ```
#[derive(Debug)]
pub enum NoWait {}

impl WaitMode for NoWait {
    const WAITS: bool = false;
}

/// Ring ends that can sleep in blocking operations: see [`WaitMode`] and [`crate::wait`].
///
/// ```
/// use std::time::Duration;
/// use flowline::fifo::{spsc, Wait};
/// let (mut tx, mut rx): (spsc::Producer<u32, Wait>, _) = spsc::waitable(2).unwrap();
/// tx.push_wait(1, Duration::from_secs(1)).unwrap();
/// assert_eq!(rx.pop_wait(Duration::from_secs(1)), Ok(1));
/// ```
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
#[derive(Debug)]
pub enum Wait {}

#[cfg(feature = "std")]
impl WaitMode for Wait {
    const WAITS: bool = true;
}

/// A ring capacity that cannot be honoured.
///
/// ```
/// use flowline::fifo::{spsc, CapacityError};
/// assert_eq!(spsc::channel::<u64>(0).unwrap_err(), CapacityError::Zero);
/// assert!(matches!(spsc::channel::<u64>(usize::MAX), Err(CapacityError::TooLarge { .. })));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityError {
    /// A capacity of zero: a ring that can hold nothing would make every push fail.
    Zero,
    /// The capacity, rounded up to a power of two, exceeds what the index arithmetic or the
    /// address space allows for this element type.
    TooLarge {
        /// The capacity asked for.
        requested: usize,
        /// The largest capacity this element type allows.
        max: usize,
    },
    /// The allocator could not provide the slots.
    AllocFailed {
        /// Slots asked for (the rounded capacity).
        slots: usize,
        /// Bytes asked for.
        bytes: usize,
    },
}

impl CapacityError {
    /// Validates `requested` for elements of `elem_size` bytes and returns the number of
    /// slots (the next power of two).
    pub(crate) fn slots_for(requested: usize, elem_size: usize) -> Result<usize, CapacityError> {
        // Indices run freely and wrap; tail - head must stay unambiguous, so at most half the
        // index space. Bytes must fit in isize for the allocation.
        let index_max = 1usize << (usize::BITS - 1);
        let byte_max = (isize::MAX as usize)
            .checked_div(elem_size)
            .map_or(index_max, |m| m.min(index_max));
        // The largest power of two not above byte_max.
        let max = 1usize << (usize::BITS - 1 - byte_max.leading_zeros());
        if requested == 0 {
            return Err(CapacityError::Zero);
        }
        match requested.checked_next_power_of_two() {
            Some(slots) if slots <= max => Ok(slots),
            _ => Err(CapacityError::TooLarge { requested, max }),
        }
    }
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapacityError::Zero => write!(f, "ring capacity 0: ask for at least 1 slot"),
            CapacityError::TooLarge { requested, max } => write!(
                f,
                "ring capacity {requested} is too large: at most {max} slots for this element \
                 type (capacities round up to a power of two)"
            ),
            CapacityError::AllocFailed { slots, bytes } => write!(
                f,
                "could not allocate {slots} ring slots ({bytes} bytes): ask for a smaller capacity"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CapacityError {}

/// Why [`try_pop`](spsc::Consumer::try_pop) took nothing: the ring is empty for now, or it
/// is empty for good because the producers are gone.
///
/// ```
/// use flowline::fifo::{spsc, PopError};
/// let (tx, mut rx) = spsc::channel::<u32>(4).unwrap();
/// assert_eq!(rx.try_pop(), Err(PopError::Empty));
/// drop(tx);
/// assert_eq!(rx.try_pop(), Err(PopError::Disconnected));
/// assert_eq!(PopError::Disconnected.to_string(), "the ring is empty and its producers are gone");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PopError {
    /// Nothing to take now; the producers may push more.
    Empty,
    /// Nothing to take, and nothing will come: every producer is gone.
    Disconnected,
}

impl fmt::Display for PopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PopError::Empty => write!(f, "the ring is empty"),
            PopError::Disconnected => write!(f, "the ring is empty and its producers are gone"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for PopError {}

/// Why a [`push`](spsc::Producer::push) did not place its item: the ring is full. The
/// item is given back ([`into_inner`](PushError::into_inner)). A push does not look
/// whether the consumer is gone (that would cost every push a load): while there is room
/// it succeeds, and the item is dropped with the ring; `is_abandoned` tells.
///
/// ```
/// use flowline::fifo::{spsc, PushError};
/// let (mut tx, _rx) = spsc::channel::<String>(1).unwrap();
/// tx.push("a".to_string())?;
/// let e = tx.push("b".to_string()).unwrap_err();
/// assert_eq!(e, PushError::Full("b".to_string()));
/// assert_eq!(e.to_string(), "the ring is full");
/// assert_eq!(e.into_inner(), "b");
/// # Ok::<(), PushError<String>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum PushError<T> {
    /// No free slot now; the item is here.
    Full(T),
}

impl<T> PushError<T> {
    /// The item the push gave back.
    #[must_use]
    pub fn into_inner(self) -> T {
        match self {
            PushError::Full(v) => v,
        }
    }
}

impl<T> fmt::Debug for PushError<T> {
    /// Names the error, not the item (which need not be `Debug`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Full(_) => f.write_str("Full(..)"),
        }
    }
}

impl<T> fmt::Display for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Full(_) => write!(f, "the ring is full"),
        }
    }
}

#[cfg(feature = "std")]
impl<T> std::error::Error for PushError<T> {}

/// The ends move to their threads with their items and are never shared between threads
/// (the MPSC producer is `Clone` and `Sync` instead): checked at compile time, so that a
/// change to the handles' fields (their share of the ring is a `sync::HandleArc`) cannot
/// loosen or tighten these bounds unnoticed.
#[cfg(test)]
mod auto_traits {
    use super::{mpsc, niche, spsc};
    use alloc::{boxed::Box, rc::Rc};
    use core::ptr::NonNull;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(spsc::Producer<u8>: Send);
    assert_impl_all!(spsc::Consumer<u8>: Send);
    assert_not_impl_any!(spsc::Producer<u8>: Sync);
    assert_not_impl_any!(spsc::Consumer<u8>: Sync);
    assert_not_impl_any!(spsc::Producer<Rc<u8>>: Send);
    assert_not_impl_any!(spsc::Consumer<Rc<u8>>: Send);
    assert_impl_all!(mpsc::Producer<u8>: Send, Sync, Clone);
    assert_impl_all!(mpsc::Consumer<u8>: Send);
    assert_not_impl_any!(mpsc::Producer<Rc<u8>>: Send, Sync);
    assert_not_impl_any!(mpsc::Consumer<Rc<u8>>: Send);
    assert_impl_all!(niche::Producer<Box<u8>>: Send);
    assert_impl_all!(niche::Consumer<Box<u8>>: Send);
    assert_not_impl_any!(niche::Producer<Box<u8>>: Sync);
    assert_not_impl_any!(niche::Consumer<Box<u8>>: Sync);
    assert_not_impl_any!(niche::Producer<NonNull<u8>>: Send);
    assert_not_impl_any!(niche::Consumer<NonNull<u8>>: Send);
}
