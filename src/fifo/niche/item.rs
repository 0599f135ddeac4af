//! What may travel through the niche ring: the [`Niche`] trait (an item as one non-null
//! pointer and back) and its implementations for pointers, owning pointers, references and
//! non-zero integers.

use super::*;

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
