//! Index-free single-producer single-consumer ring for items that travel as one non-null
//! pointer: packet pointers (`Box<T>`, `NonNull<T>`, `&T`, `Arc<T>`) and non-zero
//! integers (handles, buffer indices plus one).
//!
//! [`channel`] makes a ring and returns its two ends, a [`Producer`] and a [`Consumer`]:
//! each `Send`, neither `Sync`, as in [`spsc`](super::spsc).
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
//! Every item is visible to the consumer as soon as its `push` returns, and every slot is
//! free for the producer as soon as its `pop` returns: nothing is published lazily, so
//! nothing needs a flush call. A bulk operation of `n` items reads one slot (the `n`th)
//! to decide. Items still in the ring when both ends are gone are dropped exactly once.
//! Positions are private counters that are only ever masked, never compared, so their
//! wrapping (on 32-bit as on 64-bit) changes nothing.
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
use crate::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use crate::sync::Arc;
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
/// `into_raw`. `into_raw` may panic: the ring calls it before it changes anything.
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

/// Slots per line: a line is one `CachePadded` unit (128 bytes on x86_64, so 16 slots).
const LINE_SLOTS: usize =
    core::mem::align_of::<CachePadded<u8>>() / core::mem::size_of::<AtomicPtr<()>>();

/// One cache line of slots, aligned so that no other data shares it.
type Line = CachePadded<[AtomicPtr<()>; LINE_SLOTS]>;

#[cfg(not(loom))]
static_assertions::const_assert_eq!(
    core::mem::size_of::<Line>(),
    core::mem::align_of::<CachePadded<u8>>()
);
#[cfg(not(loom))]
static_assertions::const_assert!(LINE_SLOTS.is_power_of_two());

/// What both ends share: the slots and the two "gone" flags.
struct Shared<T: Niche> {
    lines: Box<[Line]>,
    /// Slots in use (a power of two, at most `lines.len() * LINE_SLOTS`).
    slots: usize,
    producer_gone: AtomicBool,
    consumer_gone: AtomicBool,
    /// The slots own `T`s.
    _owns: PhantomData<T>,
}

impl<T: Niche> Drop for Shared<T> {
    fn drop(&mut self) {
        /// Drops the items of slots `next..end`; on unwind (an item's `Drop` panicked) the
        /// guard's own drop goes on with the rest.
        struct Rest<'a, T: Niche> {
            lines: &'a [Line],
            next: usize,
            end: usize,
            _t: PhantomData<T>,
        }
        impl<T: Niche> Rest<'_, T> {
            fn run(&mut self) {
                while self.next < self.end {
                    let i = self.next;
                    self.next += 1;
                    let slot = &self.lines[i / LINE_SLOTS][i % LINE_SLOTS];
                    // Relaxed: both ends are gone (this is the last `Arc`, whose drop
                    // synchronises with their last uses), so every store is visible.
                    let raw = slot.swap(ptr::null_mut(), Ordering::Relaxed);
                    if let Some(raw) = NonNull::new(raw) {
                        // SAFETY: a non-null slot holds an item that was pushed and not
                        // popped; the swap took it out, so it is rebuilt once.
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
        let mut rest = Rest::<T> {
            lines: &self.lines,
            next: 0,
            end: self.slots,
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
    let n_lines = slots.div_ceil(LINE_SLOTS);
    let lines = alloc_lines(n_lines).ok_or(CapacityError::AllocFailed {
        slots,
        bytes: n_lines.saturating_mul(core::mem::size_of::<Line>()),
    })?;
    let shared = Arc::new(Shared::<T> {
        lines,
        slots,
        producer_gone: AtomicBool::new(false),
        consumer_gone: AtomicBool::new(false),
        _owns: PhantomData,
    });
    let lines = NonNull::from(&*shared.lines).cast::<Line>();
    Ok((
        Producer {
            lines,
            mask: slots - 1,
            tail: 0,
            shared: shared.clone(),
        },
        Consumer {
            lines,
            mask: slots - 1,
            head: 0,
            shared,
        },
    ))
}

/// `n` lines of empty slots, or `None` if the allocator refuses. The memory comes zeroed
/// from the allocator (`calloc`), so a large ring's pages are not touched until used.
#[cfg(not(loom))]
fn alloc_lines(n: usize) -> Option<Box<[Line]>> {
    let layout = core::alloc::Layout::array::<Line>(n).ok()?;
    if layout.size() == 0 {
        return Some(Box::new([]));
    }
    // SAFETY: the layout's size is not zero.
    let p = unsafe { alloc::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a fresh allocation of `n` lines (the layout `Box<[Line]>` frees with);
    // all-zero bytes are a valid `Line`: `AtomicPtr` has the representation of a raw
    // pointer, so zero is a null (empty) slot, and `CachePadded` adds only padding.
    Some(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p.cast::<Line>(), n)) })
}

/// Under loom the atomics are loom's models, which must be constructed.
#[cfg(loom)]
fn alloc_lines(n: usize) -> Option<Box<[Line]>> {
    let mut lines = Vec::new();
    lines.try_reserve_exact(n).ok()?;
    lines.extend(
        (0..n).map(|_| CachePadded::new(core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())))),
    );
    Some(lines.into_boxed_slice())
}

/// The slot of position `index` in the lines at `lines`.
///
/// # Safety
///
/// `lines` points to the live lines of a ring whose slot count is `mask + 1`.
#[inline(always)]
unsafe fn slot_at<'a>(lines: NonNull<Line>, mask: usize, index: usize) -> &'a AtomicPtr<()> {
    let i = index & mask;
    // SAFETY: `i` is below the slot count, so line `i / LINE_SLOTS` exists (the caller's
    // guarantee), and `i % LINE_SLOTS` is in the line.
    let line: &'a Line = unsafe { &*lines.as_ptr().add(i / LINE_SLOTS) };
    &line[i % LINE_SLOTS]
}

/// The writing end of a [`niche`](self) ring.
///
/// ```
/// let (mut tx, _rx) = flowline::fifo::niche::channel::<&u8>(1).unwrap();
/// assert_eq!(tx.push(&1), Ok(()));
/// assert_eq!(tx.push(&2), Err(&2));
/// ```
// Aligned to its own lines, as the `spsc` ends, so that a producer and a consumer stored
// side by side never share the line each rewrites on every call.
#[repr(align(128))]
pub struct Producer<T: Niche> {
    /// The shared slot lines (kept alive by `shared`), copied here to save a load per call.
    lines: NonNull<Line>,
    mask: usize,
    /// Position of the next push (private: never published).
    tail: usize,
    shared: Arc<Shared<T>>,
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
    lines: NonNull<Line>,
    mask: usize,
    /// Position of the next pop (private: never published).
    head: usize,
    shared: Arc<Shared<T>>,
}

// SAFETY: as for `Producer`.
unsafe impl<T: Niche + Send> Send for Consumer<T> {}

impl<T: Niche> Producer<T> {
    #[inline(always)]
    fn slot(&self, index: usize) -> &AtomicPtr<()> {
        // SAFETY: `lines` and `mask` describe the lines `shared` keeps alive.
        unsafe { slot_at(self.lines, self.mask, index) }
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

    /// Stores an item into the next slot, which `is_free` said is empty.
    #[inline(always)]
    fn put(&mut self, raw: NonNull<()>) {
        // Release: pairs with the consumer's Acquire load of this slot, so the item's
        // contents (the writes behind the pointer) are visible to it.
        self.slot(self.tail).store(raw.as_ptr(), Ordering::Release);
        self.tail = self.tail.wrapping_add(1);
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
    /// returns how many. Each item is visible to the consumer as soon as it is in.
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
        if n > 0 && self.is_free(n - 1) {
            // All n slots are free: one slot read for the whole burst.
            for &v in &items[..n] {
                self.put(v.into_raw());
            }
            return n;
        }
        let mut k = 0;
        while k < n && self.is_free(0) {
            self.put(items[k].into_raw());
            k += 1;
        }
        k
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
        for &v in items {
            self.put(v.into_raw());
        }
        true
    }

    /// Burst from an iterator: moves items from `iter` into the ring while there is room
    /// and returns how many. The iterator is read only when a slot is free, so the items
    /// that did not fit stay in it. If the iterator panics, the items already moved stay
    /// in the ring.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<Box<u32>>(2).unwrap();
    /// let mut packets = (1..=3).map(Box::new);
    /// assert_eq!(tx.push_burst_iter(&mut packets), 2);
    /// assert_eq!(packets.next().as_deref(), Some(&3));
    /// ```
    pub fn push_burst_iter<I: Iterator<Item = T>>(&mut self, iter: &mut I) -> usize {
        let mut k = 0;
        while self.is_free(0) {
            let Some(v) = iter.next() else { break };
            self.put(v.into_raw());
            k += 1;
        }
        k
    }

    /// Bulk from an exact-size iterator: moves all its items in and returns `Ok`, or moves
    /// nothing and gives the iterator back if `iter.len()` items do not fit. It is never
    /// read beyond `len()` items; if it yields fewer, those are in.
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
        let iter = iter.into_iter();
        let n = iter.len();
        if n == 0 {
            return Ok(());
        }
        if n > self.capacity() || !self.is_free(n - 1) {
            return Err(iter);
        }
        for v in iter.take(n) {
            self.put(v.into_raw());
        }
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
        // SAFETY: `lines` and `mask` describe the lines `shared` keeps alive.
        unsafe { slot_at(self.lines, self.mask, index) }
    }

    /// The item `ahead` positions after the next pop, if it is in.
    #[inline(always)]
    fn peek_raw(&self, ahead: usize) -> Option<NonNull<()>> {
        // Acquire: pairs with the producer's Release store of this slot. The producer
        // fills slots in order, so that store comes after its stores of every slot before
        // it, and all of them (with the items' contents) are visible to this end.
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

    /// Whether `n` items are in: reads the `n`th slot only (`n` from 1 to the capacity).
    #[inline(always)]
    fn has(&self, n: usize) -> bool {
        n <= self.capacity() && self.peek_raw(n - 1).is_some()
    }

    /// Bulk into a slice: fills all of `out` and returns `true`, or takes nothing and
    /// returns `false` if fewer items are in. Reads one slot to decide.
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
            // `has(n)` read the nth slot full (Acquire), so the producer's earlier stores
            // into the slots before it are visible: this cannot be reached.
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
