//! The raw slot buffers of the rings: allocation on a cache-line boundary, freeing, and
//! the (at most two) contiguous runs of slots that a ring operation covers (splitting
//! them, lending them as slices, and the moves, copies and drops of their items); for the
//! niche ring, its array of zeroed atomic slot words. Every ring's buffer `unsafe` that is
//! not about its own protocol lives here, behind contracts that the rings' index protocols
//! satisfy; the ring ends keep the accesses that need their index invariant, each naming
//! it.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ptr::{self, NonNull};

use crate::sync::atomic::AtomicPtr;

/// Alignment of the index rings' slot buffers: a cache line as crossbeam-utils'
/// `CachePadded` counts it (128 bytes on x86_64: the pair of lines the adjacent-line
/// prefetcher moves together). A burst of a line's worth of items then fills whole lines:
/// the producer's next burst never writes the line the consumer is reading the last one
/// from. A buffer from `Vec` starts where the allocator likes: for a 1024-slot `u64`
/// ring here (glibc), 48 bytes into a line, so every burst of 8 straddled two lines.
pub(crate) const SLOT_ALIGN: usize = core::mem::align_of::<crossbeam_utils::CachePadded<u8>>();

/// The layout of a slot buffer of `slots` `T`s, or `None` if it overflows `isize`.
fn slot_layout<T>(slots: usize) -> Option<core::alloc::Layout> {
    core::alloc::Layout::array::<T>(slots)
        .ok()?
        .align_to(SLOT_ALIGN)
        .ok()
}

/// Allocates `slots` uninitialised slots of `T`, starting on a cache-line boundary
/// ([`SLOT_ALIGN`]); `None` if the allocator refuses or the size overflows `isize`. A
/// zero-sized `T` allocates nothing. Freed by [`free_slots`] with the same `slots`.
pub(crate) fn alloc_slots<T>(slots: usize) -> Option<*mut core::mem::MaybeUninit<T>> {
    let layout = slot_layout::<T>(slots)?;
    if layout.size() == 0 {
        return Some(ptr::NonNull::dangling().as_ptr());
    }
    // SAFETY: the layout has a non-zero size (checked just above).
    let p = unsafe { alloc::alloc::alloc(layout) };
    (!p.is_null()).then_some(p.cast())
}

/// Frees a slot buffer (not the items in it).
///
/// # Safety
///
/// `buf` came from [`alloc_slots`]`::<T>(slots)` with this `slots` and is not used again.
pub(crate) unsafe fn free_slots<T>(buf: *mut core::mem::MaybeUninit<T>, slots: usize) {
    let layout = slot_layout::<T>(slots).expect("alloc_slots made this layout");
    if layout.size() != 0 {
        // SAFETY: allocated by `alloc_slots` with this very layout (guaranteed by the
        // caller), and freed once.
        unsafe { alloc::alloc::dealloc(buf.cast(), layout) };
    }
}

/// A boxed slice of `n` `T`s from zeroed memory: no per-element initialisation (the pages
/// of a large array are not touched until used); `None` if the allocator refuses or the
/// size overflows `isize`.
///
/// # Safety
///
/// All-zero bytes are a valid `T`, `T` is not zero-sized and `n > 0`.
#[cfg(not(loom))]
pub(crate) unsafe fn zeroed_boxed_slice<T>(n: usize) -> Option<Box<[T]>> {
    let layout = core::alloc::Layout::array::<T>(n).ok()?;
    debug_assert!(layout.size() > 0);
    // SAFETY: the layout has a non-zero size (`n > 0` of a sized `T`, by the contract).
    let p = unsafe { alloc::alloc::alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a fresh allocation of `n` `T`s with the global allocator and the
    // array layout a boxed slice uses; its zeroed bytes are valid `T`s (the contract).
    Some(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, n)) })
}

/// Drops the items of two runs of slots in place, the first run first.
///
/// Panic-safe the way the rings need it: if one item's `Drop` panics, the other items of
/// its run are still dropped (as `drop_in_place` on a slice does) and so is the second
/// run, so no item is left half-consumed. The caller counts all of them as consumed
/// *before* calling (a guard that publishes the index on unwind), so none is ever read or
/// dropped again.
///
/// # Safety
///
/// Both runs are in bounds, disjoint, hold initialised items, and are never read or
/// dropped again after this call (also when it unwinds).
pub(crate) unsafe fn drop_runs<T>(first: *mut [T], second: *mut [T]) {
    /// Drops its run when it goes out of scope: at the end, or while unwinding.
    struct DropRun<T>(*mut [T]);
    impl<T> Drop for DropRun<T> {
        fn drop(&mut self) {
            // SAFETY: guaranteed by `drop_runs`'s caller; this guard runs once.
            unsafe { ptr::drop_in_place(self.0) };
        }
    }
    let _second = DropRun(second);
    // SAFETY: guaranteed by the caller.
    unsafe { ptr::drop_in_place(first) };
}

/// Moves the items of two runs of slots (`(start, len)`, the first run first) onto the end
/// of `out` as bytes; `out` owns them afterwards. Room is reserved first, so a panic or
/// abort there (capacity overflow, allocation failure) comes before anything is moved.
///
/// # Safety
///
/// Both runs are in bounds, hold initialised items and are disjoint from `out`'s buffer;
/// the caller counts them as consumed right after, with nothing in between that can
/// unwind, so the ring never reads or drops them again.
pub(crate) unsafe fn append_runs<T>(
    out: &mut Vec<T>,
    first: (*const T, usize),
    second: (*const T, usize),
) {
    out.reserve(first.1 + second.1);
    let len = out.len();
    // SAFETY: the runs are initialised, in bounds and disjoint from `out`'s buffer (the
    // caller's contract), which has room for both (`reserve`); `set_len` makes `out` own
    // exactly the items just copied.
    unsafe {
        let dst = out.as_mut_ptr().add(len);
        copy_items(first.0, dst, first.1);
        copy_items(second.0, dst.add(first.1), second.1);
        out.set_len(len + first.1 + second.1);
    }
}

/// Copies `n` items from `src` to `dst`, as `ptr::copy_nonoverlapping`, but with no call
/// to `memcpy` for the two lengths a polling or latency-bound caller copies most: none (a
/// burst that found the ring empty or full, or the empty second run of a burst that does
/// not wrap) and one (a burst of one). A call costs a few nanoseconds on every empty poll
/// and every single-item hand-off; a constant length of one compiles to one move.
///
/// # Safety
///
/// As `ptr::copy_nonoverlapping::<T>(src, dst, n)`.
#[inline(always)]
pub(crate) unsafe fn copy_items<T>(src: *const T, dst: *mut T, n: usize) {
    match n {
        0 => {}
        // SAFETY: the caller's contract, for one item.
        1 => unsafe { ptr::copy_nonoverlapping(src, dst, 1) },
        // SAFETY: the caller's contract.
        _ => unsafe { ptr::copy_nonoverlapping(src, dst, n) },
    }
}

/// The (at most) two contiguous runs, in ring order, of the `n` slots from position `pos`
/// of a buffer of `slots` slots (`pos < slots`, `n <= slots`): raw, so computing them lends
/// nothing; [`runs_mut`] and [`runs_ref`] lend them.
#[inline(always)]
pub(crate) fn split_runs<T>(
    buf: *mut T,
    slots: usize,
    pos: usize,
    n: usize,
) -> (*mut [T], *mut [T]) {
    let (first, second) = run_lengths(slots, pos, n);
    (
        ptr::slice_from_raw_parts_mut(buf.wrapping_add(pos), first),
        ptr::slice_from_raw_parts_mut(buf, second),
    )
}

/// The lengths of [`split_runs`]'s two runs.
#[inline(always)]
pub(crate) fn run_lengths(slots: usize, pos: usize, n: usize) -> (usize, usize) {
    debug_assert!(pos < slots.max(1) && n <= slots);
    let first = n.min(slots - pos);
    (first, n - first)
}

/// Lends two runs of slots (from [`split_runs`]) as mutable slices.
///
/// # Safety
///
/// Both runs are in bounds of one live buffer, disjoint, hold valid `T`s (for a
/// `MaybeUninit` element type: any bytes), and belong to the caller alone for `'a`: no
/// other end reads or writes them until the caller hands them over by its index store.
#[inline(always)]
pub(crate) unsafe fn runs_mut<'a, T>(runs: (*mut [T], *mut [T])) -> (&'a mut [T], &'a mut [T]) {
    // SAFETY: the caller's contract.
    unsafe { (&mut *runs.0, &mut *runs.1) }
}

/// Lends two runs of slots (from [`split_runs`]) as shared slices.
///
/// # Safety
///
/// As [`runs_mut`], except that the runs may be read (not written) elsewhere for `'a`.
#[inline(always)]
pub(crate) unsafe fn runs_ref<'a, T>(runs: (*mut [T], *mut [T])) -> (&'a [T], &'a [T]) {
    // SAFETY: the caller's contract.
    unsafe { (&*runs.0, &*runs.1) }
}

/// Copies `src` into two runs of slots, the first run first (`a.len() + b.len() ==
/// src.len()`), initialising them.
#[inline(always)]
pub(crate) fn copy_into_runs<T: Copy>(
    src: &[T],
    a: &mut [core::mem::MaybeUninit<T>],
    b: &mut [core::mem::MaybeUninit<T>],
) {
    assert_eq!(a.len() + b.len(), src.len(), "runs as long as the items");
    let (sa, sb) = src.split_at(a.len());
    // SAFETY: `MaybeUninit<T>` has the layout of `T`; each source is a live slice of the
    // destination's length (checked above), and a `&mut` run cannot overlap a `&` slice.
    unsafe {
        copy_items(sa.as_ptr(), a.as_mut_ptr().cast::<T>(), sa.len());
        copy_items(sb.as_ptr(), b.as_mut_ptr().cast::<T>(), sb.len());
    }
}

/// Copies two runs of items, the first run first, to the front of `dst` (`dst.len() >=
/// a.len() + b.len()`).
#[inline(always)]
pub(crate) fn copy_from_runs<T: Copy>(a: &[T], b: &[T], dst: &mut [T]) {
    let dst = &mut dst[..a.len() + b.len()];
    // SAFETY: both sources are live slices and `dst` has room for both (bounds-checked
    // just above); a `&mut` slice cannot overlap a `&` one.
    unsafe {
        copy_items(a.as_ptr(), dst.as_mut_ptr(), a.len());
        copy_items(b.as_ptr(), dst.as_mut_ptr().add(a.len()), b.len());
    }
}

/// Moves the first `a.len() + b.len()` items of `items` into two runs of slots, the first
/// run first, and the rest of `items` to its front; returns how many moved. The runs own
/// the moved items afterwards: the caller publishes them (if it did not, they would leak,
/// never be dropped twice).
///
/// # Safety
///
/// `a.len() + b.len() <= items.len()` (a chunk reserved for at most `items.len()`).
#[inline(always)]
pub(crate) unsafe fn move_front_into_runs<T>(
    items: &mut Vec<T>,
    a: &mut [core::mem::MaybeUninit<T>],
    b: &mut [core::mem::MaybeUninit<T>],
) -> usize {
    let n = a.len() + b.len();
    debug_assert!(n <= items.len(), "no more slots than items");
    let rest = items.len() - n;
    let src = items.as_mut_ptr();
    // SAFETY: `MaybeUninit<T>` has the layout of `T`; `items` holds at least `n` items (the
    // caller's contract); the first `n` are moved into the runs (a `&mut` run cannot
    // overlap the `Vec`'s buffer) and the `Vec` forgets them
    // (`set_len` after the remaining `rest` are moved to its front, `ptr::copy` allowing
    // the overlap); nothing in between can unwind, so each item is owned exactly once.
    unsafe {
        copy_items(src, a.as_mut_ptr().cast::<T>(), a.len());
        copy_items(src.add(a.len()), b.as_mut_ptr().cast::<T>(), b.len());
        ptr::copy(src.add(n), src, rest);
        items.set_len(rest);
    }
    n
}

#[cfg(not(loom))]
static_assertions::const_assert!(SLOT_ALIGN % core::mem::size_of::<AtomicPtr<()>>() == 0);

/// The niche ring's slot array: zeroed (null: empty) atomic words, the first on a line
/// boundary ([`SLOT_ALIGN`]: 16 slots on x86_64; where `CachePadded` is smaller than the
/// hardware line, as on 32-bit ARM, the first line may be shared with other data: slower,
/// not wrong).
///
/// Allocated with `alloc_zeroed` at the word's own alignment, which the system allocator
/// serves with `calloc` (fresh pages of a large ring are mapped zero pages, not touched
/// until used; an over-aligned `alloc_zeroed` would be `malloc` plus a `memset` of every
/// byte), with one line of slack to start on a line boundary.
pub(super) struct SlotArray {
    /// The first slot.
    pub(super) first: NonNull<AtomicPtr<()>>,
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
    pub(super) fn new(slots: usize) -> Option<Self> {
        let word = core::mem::size_of::<AtomicPtr<()>>();
        let layout =
            core::alloc::Layout::array::<AtomicPtr<()>>(slots.checked_add(SLOT_ALIGN / word)?)
                .ok()?;
        // SAFETY: the layout's size is not zero (at least a line of slack).
        let base = NonNull::new(unsafe { alloc::alloc::alloc_zeroed(layout) })?;
        // A multiple of the word size below SLOT_ALIGN (the base is word-aligned); an
        // implementation that cannot say gives usize::MAX, and then the slots start
        // unaligned (slower, not wrong).
        let offset = match base.as_ptr().align_offset(SLOT_ALIGN) {
            o if o < SLOT_ALIGN => o,
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
    pub(super) fn new(slots: usize) -> Option<Self> {
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
pub(super) unsafe fn slot_at<'a>(
    first: NonNull<AtomicPtr<()>>,
    mask: usize,
    index: usize,
) -> &'a AtomicPtr<()> {
    // SAFETY: `index & mask` is below the slot count (the caller's guarantee).
    unsafe { &*first.as_ptr().add(index & mask) }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// `copy_items` copies exactly `n` items for the lengths it special-cases (0 and 1)
    /// and for longer runs, and touches nothing past them.
    #[test]
    fn copy_items_copies_exactly_n() {
        for n in 0..6 {
            let src: [u32; 6] = [1, 2, 3, 4, 5, 6];
            let mut dst = [0u32; 6];
            // SAFETY: `n <= 6` items of two distinct arrays of 6.
            unsafe { copy_items(src.as_ptr(), dst.as_mut_ptr(), n) };
            assert_eq!(&dst[..n], &src[..n]);
            assert!(dst[n..].iter().all(|&x| x == 0), "n = {n}");
        }
    }

    /// Slot buffers start on a cache line for small, odd-sized and over-aligned items,
    /// and a zero-sized item allocates nothing; each is freed with its layout (Miri checks
    /// the pairing and leaks).
    #[test]
    fn alloc_slots_start_on_a_cache_line() {
        fn check<T>(slots: usize) {
            let buf = alloc_slots::<T>(slots).expect("a small allocation");
            if core::mem::size_of::<T>() != 0 {
                assert_eq!(
                    buf as usize % SLOT_ALIGN,
                    0,
                    "{}",
                    core::any::type_name::<T>()
                );
            }
            // SAFETY: from `alloc_slots` with the same `slots`, not used again.
            unsafe { free_slots(buf, slots) };
        }
        #[repr(align(256))]
        struct Big(#[allow(dead_code)] u8);
        check::<u8>(1);
        check::<u64>(1024);
        check::<[u8; 24]>(8);
        check::<Big>(4);
        check::<()>(16);
        assert!(
            alloc_slots::<u64>(usize::MAX / 4).is_none(),
            "overflows isize: refused"
        );
    }
}
