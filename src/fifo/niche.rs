//! Index-free single-producer single-consumer ring for items that travel as one non-null
//! pointer: packet pointers (`Box<T>`, `NonNull<T>`, `&T`, `Arc<T>`) and non-zero
//! integers (handles, buffer indices plus one).
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
//! placement of the handles, and the round trip of one item is the same (see the README's
//! results).
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
//!             p = back; // full: try again
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

use core::fmt;
use core::marker::PhantomData;
use core::num::{NonZeroU16, NonZeroU32, NonZeroU8, NonZeroUsize};
use core::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use super::CapacityError;
use crate::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use crate::sync::{Arc, HandleArc};
use alloc::boxed::Box;
use alloc::vec::Vec;

/// An item that travels through a slot as one non-null pointer: the null pointer is free
/// to mark an empty slot.
///
/// Implemented for `Box<T>`, `alloc::sync::Arc<T>`, `NonNull<T>`, `&T`, `&mut T` (sized
/// `T`) and the non-zero integers that fit in a pointer (`NonZeroUsize`, `NonZeroU8`,
/// `NonZeroU16`, `NonZeroU32`, and `NonZeroU64` on 64-bit targets). Implement it for a
/// packet handle of your own by converting to and from one of those.
///
/// ```
/// use core::ptr::NonNull;
/// use flowline::fifo::niche::{self, Niche};
///
/// /// A buffer index, sent as index + 1 (so that index 0 has a non-zero form).
/// #[derive(Debug, PartialEq)]
/// struct BufId(u32);
///
/// // SAFETY: `from_raw` rebuilds exactly the value `into_raw` took apart (it goes through
/// // `NonZeroU32`'s own implementation), and neither panics.
/// unsafe impl Niche for BufId {
///     fn into_raw(self) -> NonNull<()> {
///         core::num::NonZeroU32::new(self.0 + 1).expect("BufId u32::MAX").into_raw()
///     }
///     unsafe fn from_raw(raw: NonNull<()>) -> Self {
///         // SAFETY: `raw` came from `into_raw` above, through the ring.
///         BufId(unsafe { core::num::NonZeroU32::from_raw(raw) }.get() - 1)
///     }
/// }
///
/// let (mut tx, mut rx) = niche::channel::<BufId>(4).unwrap();
/// tx.push(BufId(0)).unwrap();
/// assert_eq!(rx.pop(), Some(BufId(0)));
/// ```
///
/// # Safety
///
/// `from_raw(into_raw(x))` must give back `x` (or a value the implementer treats as the
/// same item: ownership moves through the ring, so an owning type must not be duplicated
/// or leaked by the round trip), and `from_raw` must not panic (a panic there leaks the
/// item). The ring calls `from_raw` only with a pointer that `into_raw` returned, once per
/// `into_raw`. `into_raw` may panic: `push` calls it before it changes anything, and a
/// burst or bulk push that it interrupts keeps the items it had already moved in the
/// ring (so a bulk push may then be partly in).
pub unsafe trait Niche: Sized {
    /// Takes the item apart into one non-null pointer (for an integer, its value as an
    /// address with no provenance).
    fn into_raw(self) -> NonNull<()>;

    /// Rebuilds the item from what [`into_raw`](Niche::into_raw) returned.
    ///
    /// # Safety
    ///
    /// `raw` came from `into_raw` of this type and is used once.
    unsafe fn from_raw(raw: NonNull<()>) -> Self;
}

/// A non-zero address as a pointer without provenance (never dereferenced).
#[inline(always)]
fn addr_ptr(addr: NonZeroUsize) -> NonNull<()> {
    let p = ptr::null_mut::<u8>().wrapping_add(addr.get()).cast::<()>();
    // SAFETY: the address is `addr`, which is not zero.
    unsafe { NonNull::new_unchecked(p) }
}

/// The address of a pointer that `addr_ptr` made.
#[inline(always)]
fn ptr_addr(raw: NonNull<()>) -> NonZeroUsize {
    // SAFETY: a `NonNull` has a non-zero address.
    unsafe { NonZeroUsize::new_unchecked(raw.as_ptr() as usize) }
}

// SAFETY: the address round-trips unchanged and nothing panics.
unsafe impl Niche for NonZeroUsize {
    #[inline(always)]
    fn into_raw(self) -> NonNull<()> {
        addr_ptr(self)
    }
    #[inline(always)]
    unsafe fn from_raw(raw: NonNull<()>) -> Self {
        ptr_addr(raw)
    }
}

/// Non-zero integers no wider than a pointer, widened to an address and narrowed back.
macro_rules! niche_int {
    ($($t:ty),*) => {$(
        // SAFETY: the value fits in a pointer (the width is checked where the impl is
        // compiled), so widening and narrowing give it back unchanged; nothing panics.
        unsafe impl Niche for $t {
            #[inline(always)]
            fn into_raw(self) -> NonNull<()> {
                // SAFETY: a non-zero value widened without loss stays non-zero.
                addr_ptr(unsafe { NonZeroUsize::new_unchecked(self.get() as usize) })
            }
            #[inline(always)]
            unsafe fn from_raw(raw: NonNull<()>) -> Self {
                // SAFETY: `raw` came from `into_raw` of this type, so its address is a
                // non-zero value of this width.
                unsafe { <$t>::new_unchecked(ptr_addr(raw).get() as _) }
            }
        }
    )*};
}
niche_int!(NonZeroU8, NonZeroU16);
#[cfg(any(target_pointer_width = "32", target_pointer_width = "64"))]
niche_int!(NonZeroU32);
#[cfg(target_pointer_width = "64")]
niche_int!(core::num::NonZeroU64);

// SAFETY: `cast` keeps the address and the provenance; nothing panics.
unsafe impl<T> Niche for NonNull<T> {
    #[inline(always)]
    fn into_raw(self) -> NonNull<()> {
        self.cast()
    }
    #[inline(always)]
    unsafe fn from_raw(raw: NonNull<()>) -> Self {
        raw.cast()
    }
}

// SAFETY: `Box::into_raw` gives up ownership without freeing, `Box::from_raw` of the same
// pointer takes it back; nothing panics.
unsafe impl<T> Niche for Box<T> {
    #[inline(always)]
    fn into_raw(self) -> NonNull<()> {
        // SAFETY: `Box::into_raw` never returns null.
        unsafe { NonNull::new_unchecked(Box::into_raw(self).cast()) }
    }
    #[inline(always)]
    unsafe fn from_raw(raw: NonNull<()>) -> Self {
        // SAFETY: `raw` came from `Box::into_raw` of a `Box<T>` and is used once.
        unsafe { Box::from_raw(raw.as_ptr().cast()) }
    }
}

// SAFETY: as for `Box`: the reference count the `Arc` held travels with the pointer.
unsafe impl<T> Niche for alloc::sync::Arc<T> {
    #[inline(always)]
    fn into_raw(self) -> NonNull<()> {
        // SAFETY: `Arc::into_raw` never returns null.
        unsafe { NonNull::new_unchecked(alloc::sync::Arc::into_raw(self).cast_mut().cast()) }
    }
    #[inline(always)]
    unsafe fn from_raw(raw: NonNull<()>) -> Self {
        // SAFETY: `raw` came from `Arc::into_raw` of an `Arc<T>` and is used once.
        unsafe { alloc::sync::Arc::from_raw(raw.as_ptr().cast_const().cast()) }
    }
}

// SAFETY: a shared reference round-trips through its address with its provenance; the
// lifetime is part of the ring's item type, so the referent outlives the ring.
unsafe impl<T> Niche for &T {
    #[inline(always)]
    fn into_raw(self) -> NonNull<()> {
        NonNull::from(self).cast()
    }
    #[inline(always)]
    unsafe fn from_raw(raw: NonNull<()>) -> Self {
        // SAFETY: `raw` came from a `&T` of this lifetime.
        unsafe { raw.cast::<T>().as_ref() }
    }
}

// SAFETY: as for `&T`; the unique reference is used once, so it stays unique.
unsafe impl<T> Niche for &mut T {
    #[inline(always)]
    fn into_raw(self) -> NonNull<()> {
        NonNull::from(self).cast()
    }
    #[inline(always)]
    unsafe fn from_raw(raw: NonNull<()>) -> Self {
        // SAFETY: `raw` came from a `&mut T` of this lifetime that was given up in `into_raw`.
        unsafe { raw.cast::<T>().as_mut() }
    }
}

/// The line size the slots are aligned to: one `CachePadded` unit (128 bytes on x86_64,
/// 16 slots). On targets where `CachePadded` is smaller than the hardware line (32-bit ARM:
/// 32 bytes) the ring's first line may be shared with other data: slower, not wrong.
const LINE_BYTES: usize = core::mem::align_of::<CachePadded<u8>>();

#[cfg(not(loom))]
static_assertions::const_assert!(LINE_BYTES % core::mem::size_of::<AtomicPtr<()>>() == 0);

/// The slot array: zeroed (null: empty) atomic words, the first on a line boundary.
///
/// Allocated with `alloc_zeroed` at the word's own alignment, which the system allocator
/// serves with `calloc` (fresh pages of a large ring are mapped zero pages, not touched
/// until used; an over-aligned `alloc_zeroed` would be `malloc` plus a `memset` of every
/// byte), with one line of slack to start on a line boundary.
struct SlotArray {
    /// The first slot.
    first: NonNull<AtomicPtr<()>>,
    /// The allocation, freed in `Drop`.
    #[cfg(not(loom))]
    alloc: (NonNull<u8>, core::alloc::Layout),
    /// Under loom the atomics are loom's models, which must be constructed.
    #[cfg(loom)]
    _boxed: Box<[AtomicPtr<()>]>,
}

impl SlotArray {
    /// `slots` empty slots, or `None` if the allocator refuses.
    #[cfg(not(loom))]
    fn new(slots: usize) -> Option<Self> {
        let word = core::mem::size_of::<AtomicPtr<()>>();
        let layout =
            core::alloc::Layout::array::<AtomicPtr<()>>(slots.checked_add(LINE_BYTES / word)?)
                .ok()?;
        // SAFETY: the layout's size is not zero (at least a line of slack).
        let base = NonNull::new(unsafe { alloc::alloc::alloc_zeroed(layout) })?;
        // A multiple of the word size below LINE_BYTES (the base is word-aligned); an
        // implementation that cannot say gives usize::MAX, and then the slots start
        // unaligned (slower, not wrong).
        let offset = match base.as_ptr().align_offset(LINE_BYTES) {
            o if o < LINE_BYTES => o,
            _ => 0,
        };
        // SAFETY: `offset` is below the line of slack, so `slots` words from it are in the
        // allocation; all-zero bytes are valid `AtomicPtr`s (it has the representation
        // of a raw pointer), and they are null: every slot starts empty.
        let first = unsafe { NonNull::new_unchecked(base.as_ptr().add(offset)) }.cast();
        Some(SlotArray {
            first,
            alloc: (base, layout),
        })
    }

    #[cfg(loom)]
    fn new(slots: usize) -> Option<Self> {
        let mut v = Vec::new();
        v.try_reserve_exact(slots).ok()?;
        v.extend((0..slots).map(|_| AtomicPtr::new(ptr::null_mut())));
        let mut boxed = v.into_boxed_slice();
        let first = NonNull::new(boxed.as_mut_ptr())?;
        Some(SlotArray {
            first,
            _boxed: boxed,
        })
    }
}

#[cfg(not(loom))]
impl Drop for SlotArray {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout and freed only here. `AtomicPtr`
        // needs no drop; the items the slots held are dropped by `Shared` before.
        unsafe { alloc::alloc::dealloc(self.alloc.0.as_ptr(), self.alloc.1) };
    }
}

// SAFETY: the array is plain atomics reached through a pointer it owns.
unsafe impl Send for SlotArray {}
// SAFETY: as above: shared access is only through the atomics.
unsafe impl Sync for SlotArray {}

/// The slot of position `index` in the array that starts at `first`.
///
/// # Safety
///
/// `first` is the first slot of a live `SlotArray` of `mask + 1` slots.
#[inline(always)]
unsafe fn slot_at<'a>(
    first: NonNull<AtomicPtr<()>>,
    mask: usize,
    index: usize,
) -> &'a AtomicPtr<()> {
    // SAFETY: `index & mask` is below the slot count (the caller's guarantee).
    unsafe { &*first.as_ptr().add(index & mask) }
}

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
/// assert_eq!(tx.push(&2), Err(&2));
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

impl<T: Niche> Producer<T> {
    #[inline(always)]
    fn slot(&self, index: usize) -> &AtomicPtr<()> {
        // SAFETY: `slots` and `mask` describe the array `shared` keeps alive.
        unsafe { slot_at(self.slots, self.mask, index) }
    }

    /// Whether the slot `ahead` positions after the next push is empty; if so, so are all
    /// the slots before it, and this end may write them (`ahead` below the capacity).
    #[inline(always)]
    fn is_free(&self, ahead: usize) -> bool {
        // Acquire: pairs with the consumer's Release store of null into this slot. The
        // consumer empties slots in order, so that store comes after its takes (and
        // clears) of every slot before it, and all of them happen before this end
        // writes there (so no clear can land after, and erase, a new item).
        self.slot(self.tail.wrapping_add(ahead))
            .load(Ordering::Acquire)
            .is_null()
    }

    /// How many of the next `want` slots are free (`want` at most the capacity): they are
    /// a prefix, since the consumer empties slots in order.
    #[inline(always)]
    fn free_upto(&self, want: usize) -> usize {
        let mut k = 0;
        while k < want && self.is_free(k) {
            k += 1;
        }
        k
    }

    /// Stores an item into the next slot, which `is_free` said is empty.
    #[inline(always)]
    fn put(&mut self, raw: NonNull<()>) {
        // Release: pairs with the consumer's Acquire load of this slot, so the item's
        // contents (the writes behind the pointer) are visible to it.
        self.slot(self.tail).store(raw.as_ptr(), Ordering::Release);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Writes a run of up to `room` items (`room` at most the capacity) into the slots
    /// from `tail`, taking item `k` from `next(self, k)` until it returns `None`; returns
    /// how many. Slot `k` must be free when `next` returns an item for it.
    ///
    /// The run's first slot is written last: a consumer polling for the next item sees
    /// nothing until the whole run is in, then takes it without fighting this end for
    /// lines it is still writing (it reads the other slots of a run only after taking the
    /// first). If `next` or an item's `into_raw` panics, the items already written are
    /// published, first slot last, on the way out.
    #[inline(always)]
    fn write_run(&mut self, room: usize, mut next: impl FnMut(&Self, usize) -> Option<T>) -> usize {
        /// Publishes the run (its first slot) when it ends, also on unwind.
        struct Run<'a, T: Niche> {
            producer: &'a mut Producer<T>,
            first: NonNull<()>,
            n: usize,
        }
        impl<T: Niche> Drop for Run<'_, T> {
            fn drop(&mut self) {
                let p = &mut *self.producer;
                // Release: pairs with the consumer's Acquire load of this slot, so this
                // item's contents, and the run's other slots (stored before, Relaxed)
                // with their items' contents, are visible to a consumer that takes it:
                // it reads those slots only after this one.
                p.slot(p.tail).store(self.first.as_ptr(), Ordering::Release);
                p.tail = p.tail.wrapping_add(self.n);
            }
        }
        if room == 0 {
            return 0;
        }
        let Some(first) = next(self, 0) else {
            return 0;
        };
        let mut run = Run {
            first: first.into_raw(),
            producer: self,
            n: 1,
        };
        while run.n < room {
            let p = &*run.producer;
            let Some(v) = next(p, run.n) else { break };
            let raw = v.into_raw();
            // Relaxed: published by the Release store of the run's first slot (above).
            p.slot(p.tail.wrapping_add(run.n))
                .store(raw.as_ptr(), Ordering::Relaxed);
            run.n += 1;
        }
        let n = run.n;
        drop(run);
        n
    }

    /// Appends `value`, or gives it back if the ring is full.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<NonZeroU32>(1).unwrap();
    /// let one = NonZeroU32::new(1).unwrap();
    /// assert_eq!(tx.push(one), Ok(()));
    /// assert_eq!(tx.push(one), Err(one));
    /// ```
    #[inline]
    pub fn push(&mut self, value: T) -> Result<(), T> {
        if !self.is_free(0) {
            return Err(value);
        }
        self.put(value.into_raw());
        Ok(())
    }

    /// Burst: appends as many items from the front of `items` as fit, in order, and
    /// returns how many. The consumer sees them all at once, when the call returns.
    ///
    /// ```
    /// use std::num::NonZeroU16;
    /// let v: Vec<NonZeroU16> = (1..=5).map(|i| NonZeroU16::new(i).unwrap()).collect();
    /// let (mut tx, _rx) = flowline::fifo::niche::channel(4).unwrap();
    /// assert_eq!(tx.push_burst(&v), 4);
    /// assert_eq!(tx.push_burst(&v[4..]), 0);
    /// ```
    #[inline]
    pub fn push_burst(&mut self, items: &[T]) -> usize
    where
        T: Copy,
    {
        let n = items.len().min(self.capacity());
        // One slot read when the whole burst fits, else one per free slot.
        let room = if n > 0 && self.is_free(n - 1) {
            n
        } else {
            self.free_upto(n)
        };
        self.write_run(room, |_, k| Some(items[k]))
    }

    /// Bulk: appends all of `items` and returns `true`, or appends nothing and returns
    /// `false` if they do not all fit. Reads one slot to decide.
    ///
    /// ```
    /// let (a, b, c) = (1u8, 2u8, 3u8);
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<&u8>(2).unwrap();
    /// assert!(!tx.push_bulk(&[&a, &b, &c]));
    /// assert!(tx.push_bulk(&[&a, &b]));
    /// ```
    #[inline]
    pub fn push_bulk(&mut self, items: &[T]) -> bool
    where
        T: Copy,
    {
        let n = items.len();
        if n == 0 {
            return true;
        }
        if n > self.capacity() || !self.is_free(n - 1) {
            return false;
        }
        self.write_run(n, |_, k| Some(items[k]));
        true
    }

    /// Burst from an iterator: moves items from `iter` into the ring while there is room
    /// and returns how many; the consumer sees them all at once, when the call returns.
    /// The iterator is read only when a slot is free, so the items that did not fit stay
    /// in it. If the iterator panics, the items already moved are in the ring.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<Box<u32>>(2).unwrap();
    /// let mut packets = (1..=3).map(Box::new);
    /// assert_eq!(tx.push_burst_iter(&mut packets), 2);
    /// assert_eq!(packets.next().as_deref(), Some(&3));
    /// ```
    pub fn push_burst_iter<I: Iterator<Item = T>>(&mut self, iter: &mut I) -> usize {
        let cap = self.capacity();
        self.write_run(cap, |p, k| if p.is_free(k) { iter.next() } else { None })
    }

    /// Bulk from an exact-size iterator: moves all its items in and returns `Ok`, or moves
    /// nothing and gives the iterator back if `iter.len()` items do not fit. It is never
    /// read beyond `len()` items. Not all or nothing when the iterator breaks its promise:
    /// if it yields fewer items than `len()`, or panics, the items it gave are in.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<Box<u8>>(2).unwrap();
    /// assert!(tx.push_bulk_iter(vec![Box::new(1), Box::new(2), Box::new(3)]).is_err());
    /// assert!(tx.push_bulk_iter(vec![Box::new(1), Box::new(2)]).is_ok());
    /// ```
    pub fn push_bulk_iter<I>(&mut self, iter: I) -> Result<(), I::IntoIter>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: ExactSizeIterator,
    {
        let mut iter = iter.into_iter();
        let n = iter.len();
        if n == 0 {
            return Ok(());
        }
        if n > self.capacity() || !self.is_free(n - 1) {
            return Err(iter);
        }
        self.write_run(n, |_, _| iter.next());
        Ok(())
    }

    /// Slots the ring has: the requested capacity rounded up to a power of two.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::niche::channel::<Box<u8>>(5).unwrap().0.capacity(), 8);
    /// ```
    #[inline]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Whether the next push would fail now (its slot still holds an item). Reads one slot;
    /// the consumer may empty it right after.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<&u8>(1).unwrap();
    /// assert!(!tx.is_full());
    /// tx.push(&1).unwrap();
    /// assert!(tx.is_full());
    /// ```
    #[inline]
    pub fn is_full(&self) -> bool {
        !self.is_free(0)
    }

    /// Whether the consumer has been dropped: nothing pushed from now on will be read.
    ///
    /// ```
    /// let (tx, rx) = flowline::fifo::niche::channel::<Box<u8>>(1).unwrap();
    /// drop(rx);
    /// assert!(tx.is_abandoned());
    /// ```
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release store in the consumer's Drop.
        self.shared.consumer_gone.load(Ordering::Acquire)
    }
}

impl<T: Niche> Drop for Producer<T> {
    fn drop(&mut self) {
        // Relaxed: read only by the last `Arc` drop, which synchronises with this one.
        self.shared.final_tail.store(self.tail, Ordering::Relaxed);
        // Release: every push happens before a consumer that sees the flag, so one that
        // then finds the ring empty knows nothing more will come.
        self.shared.producer_gone.store(true, Ordering::Release);
    }
}

impl<T: Niche> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("niche::Producer")
            .field("capacity", &self.capacity())
            .field("position", &self.tail)
            .finish()
    }
}

impl<T: Niche> Consumer<T> {
    #[inline(always)]
    fn slot(&self, index: usize) -> &AtomicPtr<()> {
        // SAFETY: `slots` and `mask` describe the array `shared` keeps alive.
        unsafe { slot_at(self.slots, self.mask, index) }
    }

    /// The item `ahead` positions after the next pop, if it is in.
    #[inline(always)]
    fn peek_raw(&self, ahead: usize) -> Option<NonNull<()>> {
        // Acquire: pairs with the producer's Release store of this slot when it is a
        // single push or the first slot of a run, and makes the item's contents visible.
        // A run's other slots are stored (Relaxed) before its first slot, and this end
        // reads slots in order (every caller looks at `ahead` = 0, 1, 2, ... and stops at
        // the first empty one), so it reads them only after taking (Acquire) that first
        // slot, which makes them and their items' contents visible.
        NonNull::new(
            self.slot(self.head.wrapping_add(ahead))
                .load(Ordering::Acquire),
        )
    }

    /// Empties the next slot, which holds the item `raw` read from it, and rebuilds the
    /// item. The slot is free (and counted as taken) before any user code runs.
    #[inline(always)]
    fn take(&mut self, raw: NonNull<()>) -> T {
        // Release: pairs with the producer's Acquire load of this slot (or of a slot
        // after it), so this end's read of the slot happens before it is rewritten.
        self.slot(self.head)
            .store(ptr::null_mut(), Ordering::Release);
        self.head = self.head.wrapping_add(1);
        // SAFETY: `raw` was stored by `put` from `into_raw` of a `T`, and the slot was
        // emptied just above, so this is the one time it is rebuilt.
        unsafe { T::from_raw(raw) }
    }

    /// Takes the oldest item, or `None` if the ring is empty.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::niche::channel::<&u8>(2).unwrap();
    /// tx.push(&1).unwrap();
    /// assert_eq!(rx.pop(), Some(&1));
    /// assert_eq!(rx.pop(), None);
    /// ```
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let raw = self.peek_raw(0)?;
        Some(self.take(raw))
    }

    /// Burst to a closure: moves up to `max` items, oldest first, into `f`, and returns how
    /// many. Each slot is free again before `f` sees its item; if `f` panics, the items it
    /// was handed stay taken (none is dropped twice or lost from the ring's count).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::niche::channel::<Box<u32>>(8).unwrap();
    /// tx.push_burst_iter(&mut (1..=3).map(Box::new));
    /// let mut sum = 0;
    /// assert_eq!(rx.pop_burst_with(8, |v| sum += *v), 3);
    /// assert_eq!(sum, 6);
    /// ```
    #[inline]
    pub fn pop_burst_with(&mut self, max: usize, mut f: impl FnMut(T)) -> usize {
        let mut k = 0;
        while k < max {
            let Some(raw) = self.peek_raw(0) else { break };
            let v = self.take(raw);
            k += 1;
            f(v);
        }
        k
    }

    /// Burst into a slice: moves up to `out.len()` items into its front and returns how
    /// many.
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// let one = NonZeroUsize::new(1).unwrap();
    /// let (mut tx, mut rx) = flowline::fifo::niche::channel(4).unwrap();
    /// tx.push_burst(&[one, one]);
    /// let mut out = [one; 4];
    /// assert_eq!(rx.pop_burst(&mut out), 2);
    /// ```
    #[inline]
    pub fn pop_burst(&mut self, out: &mut [T]) -> usize
    where
        T: Copy,
    {
        let mut k = 0;
        while k < out.len() {
            let Some(raw) = self.peek_raw(0) else { break };
            out[k] = self.take(raw);
            k += 1;
        }
        k
    }

    /// Burst into a `Vec`: moves up to `max` items onto the end of `out` and returns how
    /// many.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::niche::channel::<Box<u8>>(4).unwrap();
    /// tx.push(Box::new(1)).unwrap();
    /// let mut v = Vec::new();
    /// assert_eq!(rx.pop_burst_into(&mut v, 32), 1);
    /// assert_eq!(*v[0], 1);
    /// ```
    pub fn pop_burst_into(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        self.pop_burst_with(max, |v| out.push(v))
    }

    /// Whether `n` items are in (`n` from 1 up): reads the next `n` slots in order, so
    /// that each run's first slot is taken (Acquire) before the run's other slots.
    #[inline(always)]
    fn has(&self, n: usize) -> bool {
        if n > self.capacity() {
            return false;
        }
        let mut k = 0;
        while k < n && self.peek_raw(k).is_some() {
            k += 1;
        }
        k == n
    }

    /// Bulk into a slice: fills all of `out` and returns `true`, or takes nothing and
    /// returns `false` if fewer items are in.
    ///
    /// ```
    /// let (a, b) = (1u8, 2u8);
    /// let (mut tx, mut rx) = flowline::fifo::niche::channel::<&u8>(4).unwrap();
    /// tx.push_burst(&[&a, &b]);
    /// let mut out = [&0u8; 3];
    /// assert!(!rx.pop_bulk(&mut out));
    /// assert!(rx.pop_bulk(&mut out[..2]));
    /// assert_eq!(out[..2], [&1, &2]);
    /// ```
    #[inline]
    pub fn pop_bulk(&mut self, out: &mut [T]) -> bool
    where
        T: Copy,
    {
        if out.is_empty() {
            return true;
        }
        if !self.has(out.len()) {
            return false;
        }
        for o in out {
            *o = self.take_present();
        }
        true
    }

    /// Bulk into a `Vec`: moves exactly `n` items onto `out` and returns `true`, or takes
    /// nothing and returns `false` if fewer are in.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::niche::channel::<Box<u8>>(4).unwrap();
    /// tx.push_bulk_iter([Box::new(1), Box::new(2)]).unwrap();
    /// let mut v = Vec::new();
    /// assert!(!rx.pop_bulk_into(&mut v, 3));
    /// assert!(rx.pop_bulk_into(&mut v, 2));
    /// ```
    pub fn pop_bulk_into(&mut self, out: &mut Vec<T>, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        if !self.has(n) {
            return false;
        }
        out.reserve(n);
        for _ in 0..n {
            let v = self.take_present();
            out.push(v);
        }
        true
    }

    /// Takes the next item, which `has` said is in.
    #[inline(always)]
    fn take_present(&mut self) -> T {
        match self.peek_raw(0) {
            Some(raw) => self.take(raw),
            // `has(n)` found the next n slots full, and only this end empties slots: this
            // cannot be reached.
            None => unreachable!("niche ring: a slot before a full one is empty"),
        }
    }

    /// Slots the ring has.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::niche::channel::<Box<u8>>(5).unwrap().1.capacity(), 8);
    /// ```
    #[inline]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Whether the next pop would find nothing now. Reads one slot; the producer may fill
    /// it right after.
    ///
    /// ```
    /// let (mut tx, rx) = flowline::fifo::niche::channel::<&u8>(1).unwrap();
    /// assert!(rx.is_empty());
    /// tx.push(&1).unwrap();
    /// assert!(!rx.is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.peek_raw(0).is_none()
    }

    /// Whether the producer has been dropped. Items it pushed may still be in the ring:
    /// a consumer that sees `true` and then finds the ring empty has had everything.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::niche::channel::<&u8>(2).unwrap();
    /// tx.push(&1).unwrap();
    /// drop(tx);
    /// assert!(rx.is_abandoned());
    /// assert_eq!(rx.pop(), Some(&1));
    /// assert_eq!(rx.pop(), None);
    /// ```
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release store in the producer's Drop.
        self.shared.producer_gone.load(Ordering::Acquire)
    }
}

impl<T: Niche> Drop for Consumer<T> {
    fn drop(&mut self) {
        // Relaxed: as `final_tail` in the producer's drop.
        self.shared.final_head.store(self.head, Ordering::Relaxed);
        // Release: pairs with the producer's Acquire load in `is_abandoned`.
        self.shared.consumer_gone.store(true, Ordering::Release);
    }
}

impl<T: Niche> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("niche::Consumer")
            .field("capacity", &self.capacity())
            .field("position", &self.head)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    // The crate may be `no_std`; the tests use the standard library's prelude.
    use super::*;
    use core::num::NonZeroU32;
    use std::cell::Cell;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::rc::Rc;
    #[allow(unused_imports)]
    use std::{boxed::Box, format, string::ToString, vec, vec::Vec};

    /// Counts drops through a shared counter.
    #[derive(Debug)]
    struct Tracked(u64, Rc<Cell<usize>>);
    impl Drop for Tracked {
        fn drop(&mut self) {
            self.1.set(self.1.get() + 1);
        }
    }

    fn nz(v: u32) -> NonZeroU32 {
        NonZeroU32::new(v).unwrap()
    }

    #[test]
    fn capacity_rounds_up_and_bad_capacities_are_errors() {
        for (asked, got) in [(1, 1), (2, 2), (3, 4), (17, 32), (1000, 1024)] {
            let (tx, rx) = channel::<Box<u8>>(asked).unwrap();
            assert_eq!((tx.capacity(), rx.capacity()), (got, got));
        }
        assert_eq!(channel::<Box<u8>>(0).unwrap_err(), CapacityError::Zero);
        let e = channel::<Box<u8>>(usize::MAX).unwrap_err();
        assert!(matches!(e, CapacityError::TooLarge { .. }), "{e:?}");
        assert!(e.to_string().contains("too large"));
    }

    #[test]
    #[cfg(not(miri))] // Miri's allocator would try to honour the 2^43-byte request
    fn absurd_allocation_is_an_error_not_an_abort() {
        match channel::<Box<u8>>(1 << 40) {
            Err(CapacityError::AllocFailed { slots, .. }) => assert_eq!(slots, 1 << 40),
            // An overcommitting OS may hand out zeroed address space: nothing is touched.
            Ok((tx, _rx)) => assert_eq!(tx.capacity(), 1 << 40),
            Err(e) => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn full_and_empty_edges_keep_order_over_many_laps() {
        for cap in [1usize, 2, 4, 32] {
            let (mut tx, mut rx) = channel::<Box<u64>>(cap).unwrap();
            let mut next = 0u64;
            let mut expect = 0u64;
            for _ in 0..5 {
                assert!(rx.is_empty() && !tx.is_full());
                for _ in 0..cap {
                    tx.push(Box::new(next)).unwrap();
                    next += 1;
                }
                assert!(tx.is_full() && !rx.is_empty());
                assert_eq!(*tx.push(Box::new(99)).unwrap_err(), 99);
                for _ in 0..cap {
                    assert_eq!(*rx.pop().unwrap(), expect);
                    expect += 1;
                }
                assert!(rx.pop().is_none());
            }
        }
    }

    #[test]
    fn positions_wrap_past_usize_max() {
        let (mut tx, mut rx) = channel::<NonZeroU32>(4).unwrap();
        tx.tail = usize::MAX - 5;
        rx.head = usize::MAX - 5;
        let mut expect = 1;
        for v in 1..=40 {
            tx.push(nz(v)).unwrap();
            if v % 3 == 0 {
                while let Some(got) = rx.pop() {
                    assert_eq!(got.get(), expect);
                    expect += 1;
                }
            }
        }
        let mut out = [nz(1); 4];
        let k = rx.pop_burst(&mut out);
        assert_eq!(out[..k].iter().map(|v| v.get()).collect::<Vec<_>>(), [40]);
        assert!(tx.tail < 100 && rx.head == tx.tail, "both wrapped");
    }

    #[test]
    fn bursts_and_bulks_take_what_fits() {
        let (mut tx, mut rx) = channel::<NonZeroU32>(4).unwrap();
        let v: Vec<_> = (1..=6).map(nz).collect();
        assert!(tx.push_bulk(&[]));
        assert!(!tx.push_bulk(&v[..5]), "more than the capacity");
        assert_eq!(tx.push_burst(&v[..3]), 3);
        assert!(!tx.push_bulk(&v[3..5]), "one slot free, two asked");
        let mut one = [nz(9)];
        assert!(rx.pop_bulk(&mut one));
        assert_eq!(one[0].get(), 1);
        // Two free, but not as one run ahead of the slot that the fast check reads: the
        // burst falls back to slot by slot.
        assert_eq!(tx.push_burst(&v[3..6]), 2);
        let mut out = [nz(9); 8];
        assert!(!rx.pop_bulk(&mut out[..5]));
        assert!(rx.pop_bulk(&mut out[..4]));
        assert_eq!(
            out[..4].iter().map(|v| v.get()).collect::<Vec<_>>(),
            [2, 3, 4, 5]
        );
        assert!(rx.pop_bulk(&mut out[..0]));
        assert!(!rx.pop_bulk(&mut out[..1]));
        let mut got = Vec::new();
        assert!(rx.pop_bulk_into(&mut got, 0));
        assert!(!rx.pop_bulk_into(&mut got, 1));
        assert!(tx.push_bulk_iter(Vec::<NonZeroU32>::new()).is_ok());
        assert!(tx.push_bulk_iter(v.clone()).is_err());
        assert!(tx.push_bulk_iter(v[..4].to_vec()).is_ok());
        assert!(!rx.pop_bulk_into(&mut got, 5));
        assert!(rx.pop_bulk_into(&mut got, 4));
        assert_eq!(got, v[..4]);
    }

    #[test]
    fn leftovers_are_dropped_exactly_once() {
        let drops = Rc::new(Cell::new(0));
        let (mut tx, mut rx) = channel::<Box<Tracked>>(8).unwrap();
        for i in 0..6 {
            tx.push(Box::new(Tracked(i, drops.clone()))).unwrap();
        }
        drop(rx.pop());
        assert_eq!(drops.get(), 1);
        drop(tx);
        assert!(rx.is_abandoned());
        drop(rx);
        assert_eq!(drops.get(), 6);
    }

    #[test]
    fn a_panicking_item_drop_does_not_leak_the_rest() {
        #[derive(Debug)]
        struct Bomb(Rc<Cell<usize>>);
        impl Drop for Bomb {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
                if self.0.get() == 2 {
                    panic!("bomb");
                }
            }
        }
        let drops = Rc::new(Cell::new(0));
        let (mut tx, rx) = channel::<Box<Bomb>>(4).unwrap();
        for _ in 0..4 {
            tx.push(Box::new(Bomb(drops.clone()))).unwrap();
        }
        drop(tx);
        assert!(catch_unwind(AssertUnwindSafe(|| drop(rx))).is_err());
        assert_eq!(drops.get(), 4, "every item dropped once");
    }

    #[test]
    fn a_panicking_iterator_leaves_what_it_gave_in_the_ring() {
        let drops = Rc::new(Cell::new(0));
        let (mut tx, mut rx) = channel::<Box<Tracked>>(8).unwrap();
        let d = drops.clone();
        let mut it = (0..5u64).map(move |i| {
            assert!(i < 3, "iterator fails");
            Box::new(Tracked(i, d.clone()))
        });
        assert!(catch_unwind(AssertUnwindSafe(|| tx.push_burst_iter(&mut it))).is_err());
        // The items pushed before the panic are in, in order, and the ring goes on.
        tx.push(Box::new(Tracked(3, drops.clone()))).unwrap();
        let got: Vec<u64> = core::iter::from_fn(|| rx.pop()).map(|t| t.0).collect();
        assert_eq!(got, [0, 1, 2, 3]);
        assert_eq!(drops.get(), 4);
        // Bulk: an iterator that yields fewer than its len() promised.
        struct Liar(u64);
        impl Iterator for Liar {
            type Item = Box<u64>;
            fn next(&mut self) -> Option<Box<u64>> {
                self.0 += 1;
                (self.0 <= 2).then(|| Box::new(self.0))
            }
        }
        impl ExactSizeIterator for Liar {
            fn len(&self) -> usize {
                4
            }
        }
        let (mut tx, mut rx) = channel::<Box<u64>>(4).unwrap();
        assert!(tx.push_bulk_iter(Liar(0)).is_ok());
        assert_eq!(rx.pop().as_deref(), Some(&1));
        assert_eq!(rx.pop().as_deref(), Some(&2));
        assert!(rx.pop().is_none());
        tx.push(Box::new(3)).unwrap();
        assert_eq!(rx.pop().as_deref(), Some(&3));
    }

    #[test]
    fn a_panicking_burst_closure_keeps_handed_items_taken() {
        let drops = Rc::new(Cell::new(0));
        let (mut tx, mut rx) = channel::<Box<Tracked>>(8).unwrap();
        for i in 0..5 {
            tx.push(Box::new(Tracked(i, drops.clone()))).unwrap();
        }
        let mut seen = Vec::new();
        let r = catch_unwind(AssertUnwindSafe(|| {
            rx.pop_burst_with(8, |t| {
                seen.push(t.0);
                assert!(t.0 < 2, "closure fails");
            })
        }));
        assert!(r.is_err());
        assert_eq!(seen, [0, 1, 2]);
        assert_eq!(
            drops.get(),
            3,
            "the three handed items were dropped by the closure"
        );
        let mut rest = Vec::new();
        assert_eq!(rx.pop_burst_into(&mut rest, 8), 2);
        assert_eq!(rest.iter().map(|t| t.0).collect::<Vec<_>>(), [3, 4]);
        drop(rest);
        drop((tx, rx));
        assert_eq!(drops.get(), 5);
    }

    #[test]
    fn a_panicking_into_raw_changes_nothing() {
        #[derive(Debug)]
        struct Picky(u32);
        // SAFETY: round-trips through `NonZeroU32`; `from_raw` does not panic.
        unsafe impl Niche for Picky {
            fn into_raw(self) -> NonNull<()> {
                NonZeroU32::new(self.0).expect("Picky(0)").into_raw()
            }
            unsafe fn from_raw(raw: NonNull<()>) -> Self {
                // SAFETY: `raw` came from `into_raw`.
                Picky(unsafe { NonZeroU32::from_raw(raw) }.get())
            }
        }
        let (mut tx, mut rx) = channel::<Picky>(2).unwrap();
        tx.push(Picky(1)).unwrap();
        assert!(catch_unwind(AssertUnwindSafe(|| tx.push(Picky(0)))).is_err());
        tx.push(Picky(2)).unwrap();
        assert_eq!(rx.pop().map(|p| p.0), Some(1));
        assert_eq!(rx.pop().map(|p| p.0), Some(2));
        assert!(rx.pop().is_none());
    }

    #[test]
    fn a_panicking_into_raw_in_a_burst_publishes_what_was_moved() {
        /// A `Copy` handle whose `into_raw` refuses the value 13.
        #[derive(Clone, Copy, Debug, PartialEq)]
        struct Unlucky(u32);
        // SAFETY: round-trips through `NonZeroU32`; `from_raw` does not panic.
        unsafe impl Niche for Unlucky {
            fn into_raw(self) -> NonNull<()> {
                assert!(self.0 != 13, "unlucky");
                NonZeroU32::new(self.0).unwrap().into_raw()
            }
            unsafe fn from_raw(raw: NonNull<()>) -> Self {
                // SAFETY: `raw` came from `into_raw`.
                Unlucky(unsafe { NonZeroU32::from_raw(raw) }.get())
            }
        }
        for bulk in [false, true] {
            let (mut tx, mut rx) = channel::<Unlucky>(8).unwrap();
            let items = [Unlucky(1), Unlucky(2), Unlucky(13), Unlucky(4)];
            let r = catch_unwind(AssertUnwindSafe(|| {
                if bulk {
                    tx.push_bulk(&items);
                } else {
                    tx.push_burst(&items);
                }
            }));
            assert!(r.is_err());
            // The two items moved before the panic are in, in order, and the ring goes on.
            tx.push(Unlucky(5)).unwrap();
            let got: Vec<u32> = core::iter::from_fn(|| rx.pop()).map(|u| u.0).collect();
            assert_eq!(got, [1, 2, 5]);
        }
        // A refused first item changes nothing.
        let (mut tx, mut rx) = channel::<Unlucky>(8).unwrap();
        assert!(catch_unwind(AssertUnwindSafe(|| tx.push_burst(&[Unlucky(13)]))).is_err());
        assert!(rx.pop().is_none() && !tx.is_full());
    }

    #[test]
    fn a_burst_is_seen_whole_or_not_at_all() {
        // The run's first slot is written last: a consumer looking at the next slot sees
        // either none of a burst or all of it. Checked from inside the burst, through an
        // iterator that looks at the consumer's slot before yielding each item.
        let (mut tx, rx) = channel::<Box<u32>>(8).unwrap();
        let mut seen_early = false;
        let rx = &rx;
        let mut it = (0..4u32).map(|i| {
            seen_early |= !rx.is_empty();
            Box::new(i)
        });
        assert_eq!(tx.push_burst_iter(&mut it), 4);
        drop(it);
        assert!(
            !seen_early,
            "a consumer saw part of a burst before it was complete"
        );
        assert!(!rx.is_empty());
    }

    #[test]
    fn pointer_like_items_round_trip() {
        let mut a = 5u8;
        let (mut tx, mut rx) = channel::<&mut u8>(2).unwrap();
        tx.push(&mut a).unwrap();
        *rx.pop().unwrap() += 1;
        drop((tx, rx));
        assert_eq!(a, 6);
        let shared = alloc::sync::Arc::new(7u32);
        let (mut tx, mut rx) = channel::<alloc::sync::Arc<u32>>(2).unwrap();
        tx.push(shared.clone()).unwrap();
        tx.push(shared.clone()).unwrap();
        assert_eq!(alloc::sync::Arc::strong_count(&shared), 3);
        assert_eq!(rx.pop().as_deref(), Some(&7));
        assert_eq!(alloc::sync::Arc::strong_count(&shared), 2);
        drop((tx, rx));
        assert_eq!(alloc::sync::Arc::strong_count(&shared), 1);
        let mut x = 1u64;
        let (mut tx, mut rx) = channel::<NonNull<u64>>(2).unwrap();
        tx.push(NonNull::from(&mut x)).unwrap();
        // SAFETY: the pointer is to `x`, alive and not otherwise borrowed.
        unsafe { *rx.pop().unwrap().as_ptr() = 2 };
        assert_eq!(x, 2);
        let (mut tx, mut rx) = channel::<NonZeroUsize>(2).unwrap();
        tx.push(NonZeroUsize::new(usize::MAX).unwrap()).unwrap();
        assert_eq!(rx.pop().map(NonZeroUsize::get), Some(usize::MAX));
        let (mut tx, mut rx) = channel::<NonZeroU8>(2).unwrap();
        tx.push(NonZeroU8::new(255).unwrap()).unwrap();
        assert_eq!(rx.pop().map(NonZeroU8::get), Some(255));
        #[cfg(target_pointer_width = "64")]
        {
            let (mut tx, mut rx) = channel::<core::num::NonZeroU64>(2).unwrap();
            tx.push(core::num::NonZeroU64::new(u64::MAX).unwrap())
                .unwrap();
            assert_eq!(rx.pop().map(|v| v.get()), Some(u64::MAX));
        }
    }

    #[test]
    fn abandoned_ends_are_seen() {
        let (tx, rx) = channel::<Box<u8>>(2).unwrap();
        assert!(!tx.is_abandoned() && !rx.is_abandoned());
        drop(rx);
        assert!(tx.is_abandoned());
        let (tx, rx) = channel::<Box<u8>>(2).unwrap();
        drop(tx);
        assert!(rx.is_abandoned());
        assert!(format!("{rx:?}").contains("capacity: 2"));
    }

    #[test]
    fn two_threads_move_boxed_items_in_order() {
        let n: u64 = if cfg!(miri) { 60 } else { 200_000 };
        for cap in [1usize, 4, 64] {
            let (mut tx, mut rx) = channel::<Box<u64>>(cap).unwrap();
            let t = std::thread::spawn(move || {
                let mut i = 0u64;
                let mut k = 0u64;
                while i < n {
                    k += 1;
                    let sent = match k % 4 {
                        0 => {
                            let mut it = (i..n.min(i + 5)).map(Box::new);
                            tx.push_burst_iter(&mut it) as u64
                        }
                        1 => {
                            let m = (n - i).min(3) as usize;
                            if tx
                                .push_bulk_iter((0..m).map(|j| Box::new(i + j as u64)))
                                .is_ok()
                            {
                                m as u64
                            } else {
                                0
                            }
                        }
                        _ => u64::from(tx.push(Box::new(i)).is_ok()),
                    };
                    if sent == 0 {
                        std::thread::yield_now();
                    }
                    i += sent;
                }
            });
            let mut expect = 0u64;
            let mut buf = Vec::new();
            let mut k = 0u64;
            while expect < n {
                k += 1;
                buf.clear();
                match k % 3 {
                    0 => {
                        rx.pop_burst_into(&mut buf, 7);
                    }
                    1 => {
                        let m = (n - expect).min(2) as usize;
                        rx.pop_bulk_into(&mut buf, m);
                    }
                    _ => buf.extend(rx.pop()),
                }
                if buf.is_empty() {
                    std::thread::yield_now();
                }
                for v in &buf {
                    assert_eq!(**v, expect);
                    expect += 1;
                }
            }
            t.join().unwrap();
            assert!(rx.pop().is_none() && rx.is_abandoned());
        }
    }
}
