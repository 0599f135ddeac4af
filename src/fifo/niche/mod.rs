//! Index-free single-producer single-consumer ring for items that travel as one non-null
//! pointer: packet pointers (`Box<T>`, `NonNull<T>`, `&T`, `Arc<T>`) and non-zero
//! integers (handles, buffer indices plus one).
//!
//! # Example
//!
//! ```
//! use flowline::fifo::niche;
//!
//! struct Packet { flow: u32, len: u16 }
//! let (mut tx, mut rx) = niche::channel::<Box<Packet>>(1024).unwrap();
//! let t = std::thread::spawn(move || {
//!     for flow in 0..10_000u32 {
//!         let mut p = Box::new(Packet { flow, len: 64 });
//!         while let Err(back) = tx.push(p) {
//!             p = back.into_inner(); // full: try again
//!             std::hint::spin_loop();
//!         }
//!     }
//! });
//! let mut next = 0;
//! while next < 10_000 {
//!     if let Some(p) = rx.pop() {
//!         assert_eq!((p.flow, p.len), (next, 64));
//!         next += 1;
//!     }
//! }
//! t.join().unwrap();
//! ```
//!
//! [`channel`] makes a ring and returns its two ends, a [`Producer`] and a [`Consumer`]:
//! each `Send` when the item type is (so a ring of `NonNull<T>`, which is not `Send`,
//! crosses threads only inside a wrapper of your own that promises it may), neither
//! `Sync`, as in [`spsc`](super::spsc).
//!
//! # How it differs from `spsc`
//!
//! There are no shared indices at all (the FastForward design). Each slot is one atomic
//! pointer-sized word, and a null word means "empty": the producer writes an item into the
//! slot at its private position if that slot is null, and the consumer takes the item at
//! its private position if that slot is not null, then writes null back. The only lines
//! the two ends share are the slot lines themselves, and a line moves between the cores
//! only when both ends work on it: a producer that is ahead of the consumer never reads a
//! line the consumer writes, and neither end polls an index line the other end is
//! rewriting. This is why single items move faster than through an index ring in every
//! placement of the handles, and the round trip of one item is no slower (the
//! `spsc_pingpong` row of the repository's BENCHMARKS.md).
//!
//! What the design cannot do: items must have a niche (the [`Niche`] trait: zero is the
//! empty mark), and neither end can know how many items are in the ring without reading
//! the slots, so there is no `len` or `free`; [`Consumer::is_empty`] and
//! [`Producer::is_full`] look at one slot. Each slot holds one word: 8 items per 64-byte
//! line on 64-bit targets.
//!
//! # Operations
//!
//! | | producer | consumer |
//! | --- | --- | --- |
//! | single | [`push`](Producer::push) | [`pop`](Consumer::pop) |
//! | burst (as many as fit) | [`push_burst`](Producer::push_burst) (`T: Copy`), [`push_burst_iter`](Producer::push_burst_iter) | [`pop_burst`](Consumer::pop_burst) (`T: Copy`), [`pop_burst_into`](Consumer::pop_burst_into), [`pop_burst_with`](Consumer::pop_burst_with) |
//! | bulk (all or nothing) | [`push_bulk`](Producer::push_bulk) (`T: Copy`), [`push_bulk_iter`](Producer::push_bulk_iter) | [`pop_bulk`](Consumer::pop_bulk) (`T: Copy`), [`pop_bulk_into`](Consumer::pop_bulk_into) |
//!
//! Every item is visible to the consumer as soon as its `push` (or burst) returns, and
//! every slot is free for the producer as soon as its `pop` returns: nothing is published
//! lazily, so nothing needs a flush call. A burst is written as a run whose first slot is
//! written last, so a consumer polling for the next item sees the whole burst at once
//! instead of taking its items one by one from lines the producer is still writing (which
//! would move each line back and forth several times). A bulk push of `n` items reads one
//! slot (the `n`th) to decide; a bulk pop reads the `n` slots it would take. Items still
//! in the ring when both ends are gone are dropped exactly once (only the slots between
//! the ends' final positions are read). Positions are private counters that are only
//! ever masked, never compared, so their wrapping (on 32-bit as on 64-bit) changes
//! nothing.
//!
//! When to use which: this ring for single items handed over one at a time (the common
//! case of a pipeline stage passing packet pointers), where it is faster than an index
//! ring in every placement; [`spsc`](super::spsc) for bursts of plain values, chunks, and
//! items without a niche (see the README's results for both).

use core::fmt;
use core::marker::PhantomData;
use core::num::{NonZeroU16, NonZeroU32, NonZeroU8, NonZeroUsize};
use core::ptr::{self, NonNull};

use super::raw::{slot_at, SlotArray};
use super::{CapacityError, PopError};
use crate::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use crate::sync::{Arc, HandleArc};
use alloc::boxed::Box;
use alloc::vec::Vec;

mod consumer;
mod item;
mod producer;
#[cfg(all(test, not(loom)))]
mod tests;

pub use item::Niche;

/// Owns `T` (for drop checking) and is invariant in it (see `Shared::_owns`).
type Invariant<T> = (T, fn(T) -> T);

/// What both ends share: the slots and the two "gone" flags.
struct Shared<T: Niche> {
    slots: SlotArray,
    /// The slot count (a power of two) less one.
    mask: usize,
    producer_gone: AtomicBool,
    consumer_gone: AtomicBool,
    /// The producer's position when it was dropped (its drop happens before the last
    /// `Arc` drop, which reads it): with `final_head`, the slots that still hold items.
    final_tail: AtomicUsize,
    /// The consumer's position when it was dropped.
    final_head: AtomicUsize,
    /// The slots own `T`s; `fn(T) -> T` makes the ring invariant in `T`, so that neither
    /// end can be converted to a shorter lifetime than the other (a `Producer<&'a U>` fed
    /// to a `Consumer<&'static U>` would turn a short borrow into a `'static` one).
    _owns: PhantomData<Invariant<T>>,
}

impl<T: Niche> Drop for Shared<T> {
    fn drop(&mut self) {
        /// Drops the items of positions `next..end`; on unwind (an item's `Drop`
        /// panicked) the guard's own drop goes on with the rest.
        struct Rest<'a, T: Niche> {
            slots: &'a SlotArray,
            mask: usize,
            next: usize,
            end: usize,
            _t: PhantomData<T>,
        }
        impl<T: Niche> Rest<'_, T> {
            fn run(&mut self) {
                while self.next != self.end {
                    // SAFETY: `slots` is live (borrowed from `Shared`) with `mask + 1` slots.
                    let slot = unsafe { slot_at(self.slots.first, self.mask, self.next) };
                    self.next = self.next.wrapping_add(1);
                    // Relaxed: both ends are gone (this is the last `Arc`, whose drop
                    // synchronises with their last uses), so every store is visible.
                    let raw = slot.load(Ordering::Relaxed);
                    if let Some(raw) = NonNull::new(raw) {
                        // SAFETY: a slot between the final positions holds an item that
                        // was pushed and not popped; each position is visited once.
                        drop(unsafe { T::from_raw(raw) });
                    }
                }
            }
        }
        impl<T: Niche> Drop for Rest<'_, T> {
            fn drop(&mut self) {
                self.run();
            }
        }
        // Only the positions between the ends hold items: the other slots (of a ring
        // that may be huge and mostly never touched) are not read.
        let mut rest = Rest::<T> {
            slots: &self.slots,
            mask: self.mask,
            next: self.final_head.load(Ordering::Relaxed),
            end: self.final_tail.load(Ordering::Relaxed),
            _t: PhantomData,
        };
        rest.run();
    }
}

/// Makes a ring of at least `capacity` slots (rounded up to a power of two).
///
/// # Errors
///
/// [`CapacityError::Zero`] for 0, [`CapacityError::TooLarge`] when the rounded capacity
/// overflows the address space, and [`CapacityError::AllocFailed`] when the allocator
/// refuses (no abort on huge requests).
///
/// ```
/// use flowline::fifo::{niche, CapacityError};
/// let (tx, rx) = niche::channel::<Box<u64>>(3).unwrap();
/// assert_eq!((tx.capacity(), rx.capacity()), (4, 4));
/// assert_eq!(niche::channel::<Box<u64>>(0).unwrap_err(), CapacityError::Zero);
/// ```
#[doc(alias = "bounded")]
pub fn channel<T: Niche>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    let slots = CapacityError::slots_for(capacity, core::mem::size_of::<AtomicPtr<()>>())?;
    let array = SlotArray::new(slots).ok_or(CapacityError::AllocFailed {
        slots,
        bytes: slots.saturating_mul(core::mem::size_of::<AtomicPtr<()>>()),
    })?;
    let first = array.first;
    let shared = Arc::new(Shared::<T> {
        slots: array,
        mask: slots - 1,
        producer_gone: AtomicBool::new(false),
        consumer_gone: AtomicBool::new(false),
        final_tail: AtomicUsize::new(0),
        final_head: AtomicUsize::new(0),
        _owns: PhantomData,
    });
    Ok((
        Producer {
            slots: first,
            mask: slots - 1,
            tail: 0,
            shared: HandleArc::new(shared.clone()),
        },
        Consumer {
            slots: first,
            mask: slots - 1,
            head: 0,
            shared: HandleArc::new(shared),
        },
    ))
}

/// The writing end of a [`niche`](self) ring.
///
/// ```
/// let (mut tx, _rx) = flowline::fifo::niche::channel::<&u8>(1).unwrap();
/// assert_eq!(tx.push(&1), Ok(()));
/// assert_eq!(tx.push(&2), Err(flowline::fifo::PushError::Full(&2)));
/// ```
///
/// The ring is invariant in its item type: an end cannot be converted to a shorter
/// lifetime than its other end, so a short borrow cannot come out as a longer one.
///
/// ```compile_fail
/// use flowline::fifo::niche::{self, Producer};
/// fn launder<'a>(r: &'a str) -> &'static str {
///     let (tx, mut rx) = niche::channel::<&'static &'static str>(1).unwrap();
///     let mut tx: Producer<&'a &'a str> = tx; // refused: the ends are invariant
///     let boxed: &'a &'a str = Box::leak(Box::new(r));
///     tx.push(boxed).unwrap();
///     rx.pop().map(|s| *s).unwrap()
/// }
/// ```
///
/// The same code with the producer's type left alone compiles (the control for the
/// `compile_fail` example above):
///
/// ```
/// use flowline::fifo::niche::{self, Producer};
/// fn keep(r: &'static str) -> &'static str {
///     let (tx, mut rx) = niche::channel::<&'static &'static str>(1).unwrap();
///     let mut tx: Producer<&'static &'static str> = tx;
///     let boxed: &'static &'static str = Box::leak(Box::new(r));
///     tx.push(boxed).unwrap();
///     rx.pop().map(|s| *s).unwrap()
/// }
/// assert_eq!(keep("x"), "x");
/// ```
// Aligned to its own lines, as the `spsc` ends, so that a producer and a consumer stored
// side by side never share the line each rewrites on every call.
#[repr(align(128))]
pub struct Producer<T: Niche> {
    /// The first slot (the array is kept alive by `shared`), copied here to save a load
    /// per call.
    slots: NonNull<AtomicPtr<()>>,
    mask: usize,
    /// Position of the next push (private: never published).
    tail: usize,
    /// The ring's shared state (a [`HandleArc`]: see why there).
    shared: HandleArc<Shared<T>>,
}

// SAFETY: the producer hands `T`s to the consumer's thread, so `T: Send` suffices; it is
// not `Sync` (the raw pointer), so one thread uses it at a time.
unsafe impl<T: Niche + Send> Send for Producer<T> {}

/// The reading end of a [`niche`](self) ring.
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::niche::channel::<Box<u8>>(2).unwrap();
/// tx.push(Box::new(7)).unwrap();
/// assert_eq!(rx.pop().as_deref(), Some(&7));
/// assert_eq!(rx.pop(), None);
/// ```
#[repr(align(128))]
pub struct Consumer<T: Niche> {
    /// As in `Producer`.
    slots: NonNull<AtomicPtr<()>>,
    mask: usize,
    /// Position of the next pop (private: never published).
    head: usize,
    /// The ring's shared state (a [`HandleArc`]: see why there).
    shared: HandleArc<Shared<T>>,
}

// SAFETY: as for `Producer`.
unsafe impl<T: Niche + Send> Send for Consumer<T> {}
