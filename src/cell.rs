//! Assign-unless-equal: write a shared value only when it changes.
//!
//! # Example
//!
//! ```
//! use core::sync::atomic::{AtomicBool, Ordering};
//! use flowline::cell::AssignUnlessEqual;
//!
//! // A "notifications off" flag many cores read on every packet: only a change is written.
//! let notify_off = AtomicBool::new(true);
//! assert!(!notify_off.assign_unless_equal(true, Ordering::Release)); // unchanged: no store
//! assert!(notify_off.assign_unless_equal(false, Ordering::Release)); // changed: stored
//! ```
//!
//! A store to a cache line takes the line in exclusive state, invalidating every other
//! core's copy, even when the stored value is the one already there. A field rewritten with
//! an unchanged value on every packet (a status flag, a "last seen" index, a notification
//! suppression bit) therefore costs every reader a miss per write. DPDK's virtio driver fixed
//! exactly this with `if (x != v) x = v;` (its figures: `docs/performance-notes.md` in the
//! repository, section 12).
//!
//! # Cost model
//!
//! * Always: one load. If the line is already in this core's cache (shared or owned), the
//!   load hits and no coherence message is sent.
//! * Only when the value differs: the store, and with it the request for exclusive ownership
//!   of the line (one invalidation round to every core holding a copy).
//!
//! So the check pays when most writes are redundant and readers share the line. **Do not use
//! it for values that change on nearly every write** (a packet counter, a ring index): there
//! the load is pure overhead in front of a store that happens anyway, and with a contended
//! line it can turn one ownership request into two (a shared read, then an upgrade).
//!
//! # Ordering
//!
//! The comparing load is `Relaxed`: it only decides whether to write, and synchronises with
//! nothing. The store uses the ordering the caller passes. A caller that needs the skipped
//! write to still order something (a "release" whose payload was written just before) must
//! know that **when nothing is written, nothing is released**: the reader's acquire pairs with
//! whichever earlier store put the equal value there.
//!
//! # Forms
//!
//! * [`AssignUnlessEqual`] on every std atomic integer, [`AtomicBool`] and [`AtomicPtr`].
//! * [`assign_unless_equal`] on a `&mut T` place (a field of memory you own).
//! * [`assign_unless_equal_volatile`] on a raw pointer into memory shared by other means
//!   (a device ring, a shared-memory segment), using volatile accesses.
//!
//! [`AtomicBool`]: core::sync::atomic::AtomicBool
//! [`AtomicPtr`]: core::sync::atomic::AtomicPtr

use crate::sync::atomic::{
    AtomicBool, AtomicI16, AtomicI32, AtomicI64, AtomicI8, AtomicIsize, AtomicPtr, AtomicU16,
    AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// Store into an atomic only when the new value differs from the current one.
///
/// Implemented for every std atomic integer, `AtomicBool` and `AtomicPtr<T>`. See the
/// [module documentation](self) for the cost model and when not to use it.
///
/// # Example
///
/// ```
/// use core::sync::atomic::{AtomicU32, Ordering};
/// use flowline::cell::AssignUnlessEqual;
///
/// let suppress_irq = AtomicU32::new(1);
/// // The value is already 1: nothing is written, the cache line stays shared.
/// assert!(!suppress_irq.assign_unless_equal(1, Ordering::Release));
/// // A real change is stored with the caller's ordering.
/// assert!(suppress_irq.assign_unless_equal(0, Ordering::Release));
/// assert_eq!(suppress_irq.load(Ordering::Relaxed), 0);
/// ```
pub trait AssignUnlessEqual {
    /// The value type the atomic holds.
    type Value;

    /// Loads the current value (`Relaxed`); if it differs from `value`, stores `value` with
    /// `store_order` and returns `true`; otherwise writes nothing and returns `false`.
    ///
    /// The load and the store are two separate atomic operations: another writer may store
    /// between them. With several writers the result means "this call stored", not "the
    /// value changed because of this call"; the final value is always one some writer stored
    /// (or the initial one).
    ///
    /// # Panics
    ///
    /// If `store_order` is `Acquire` or `AcqRel` (not valid for a store), whether or not the
    /// value differs, so a wrong ordering is found on the first call rather than on the first
    /// change.
    fn assign_unless_equal(&self, value: Self::Value, store_order: Ordering) -> bool;
}

#[inline(always)]
fn check_store_order(order: Ordering) {
    assert!(
        !matches!(order, Ordering::Acquire | Ordering::AcqRel),
        "assign_unless_equal: {order:?} is not a store ordering; use Relaxed, Release or SeqCst"
    );
}

macro_rules! impl_assign_unless_equal {
    ($($atomic:ty => $value:ty),* $(,)?) => {$(
        impl AssignUnlessEqual for $atomic {
            type Value = $value;

            #[inline]
            fn assign_unless_equal(&self, value: $value, store_order: Ordering) -> bool {
                check_store_order(store_order);
                // Relaxed: the load only decides whether to store; it orders nothing. The
                // store below carries the caller's ordering and pairs with the caller's
                // readers.
                if self.load(Ordering::Relaxed) == value {
                    false
                } else {
                    self.store(value, store_order);
                    true
                }
            }
        }
    )*};
}

impl_assign_unless_equal!(
    AtomicBool => bool,
    AtomicU8 => u8,
    AtomicU16 => u16,
    AtomicU32 => u32,
    AtomicU64 => u64,
    AtomicUsize => usize,
    AtomicI8 => i8,
    AtomicI16 => i16,
    AtomicI32 => i32,
    AtomicI64 => i64,
    AtomicIsize => isize,
);

impl<T> AssignUnlessEqual for AtomicPtr<T> {
    type Value = *mut T;

    #[inline]
    fn assign_unless_equal(&self, value: *mut T, store_order: Ordering) -> bool {
        check_store_order(store_order);
        // Relaxed: as for the integers, the load only decides whether to store.
        if core::ptr::eq(self.load(Ordering::Relaxed), value) {
            false
        } else {
            self.store(value, store_order);
            true
        }
    }
}

/// Assigns `value` to `*place` only when it differs; returns whether it wrote.
///
/// For a field of memory you hold `&mut` to that other agents observe by other means (the
/// same memory mapped elsewhere, a structure published later as a whole). Compared with a
/// plain assignment, an unchanged value leaves the line clean: no write-back, no
/// invalidation. When it writes, the old value is dropped as by `*place = value`; when it
/// does not, `value` is dropped instead.
///
/// # Example
///
/// ```
/// use flowline::cell::assign_unless_equal;
///
/// let mut mode = "polling";
/// assert!(!assign_unless_equal(&mut mode, "polling"));
/// assert!(assign_unless_equal(&mut mode, "interrupt"));
/// assert_eq!(mode, "interrupt");
/// ```
#[inline]
pub fn assign_unless_equal<T: PartialEq>(place: &mut T, value: T) -> bool {
    if *place == value {
        false
    } else {
        *place = value;
        true
    }
}

/// Volatile assign-unless-equal through a raw pointer: reads `*ptr` with one volatile load
/// and, only if it differs from `value`, writes `value` with one volatile store. Returns
/// whether it wrote.
///
/// For memory that is shared by means the compiler cannot see: a descriptor ring or flag
/// word that a device or another process reads (DPDK's virtio `used->flags` is the model).
/// Volatile keeps the compiler from merging, eliding or inventing the accesses; it does not
/// make them atomic and adds no fence. If the other side runs concurrently on another CPU,
/// order the surrounding accesses yourself (e.g. [`core::sync::atomic::fence`]).
///
/// # Safety
///
/// * `ptr` is non-null, properly aligned for `T`, and valid for reads and writes of `T`.
/// * `*ptr` holds an initialised `T`, and no reference (`&T` / `&mut T`) to it is alive in
///   this program for the duration of the call.
/// * Concurrent writers, if any, are outside the Rust abstract machine (a device, another
///   process) or synchronised by the caller; a concurrent Rust access to the same place
///   through a non-atomic path would be a data race.
/// * `T: Copy`, so neither the old nor the new value has a destructor to run.
///
/// # Example
///
/// ```
/// use flowline::cell::assign_unless_equal_volatile;
///
/// // Stand-in for a flags word in a ring shared with a device.
/// let mut used_flags: u16 = 1;
/// let p: *mut u16 = &mut used_flags;
/// // SAFETY: `p` points to a live, aligned, initialised u16 that nothing else touches.
/// let wrote = unsafe { assign_unless_equal_volatile(p, 1) };
/// assert!(!wrote);
/// // SAFETY: as above.
/// let wrote = unsafe { assign_unless_equal_volatile(p, 0) };
/// assert!(wrote);
/// assert_eq!(used_flags, 0);
/// ```
#[inline]
pub unsafe fn assign_unless_equal_volatile<T: PartialEq + Copy>(ptr: *mut T, value: T) -> bool {
    // SAFETY: the caller guarantees `ptr` is valid, aligned, initialised and not aliased by
    // a live reference (this function's contract).
    let current = unsafe { core::ptr::read_volatile(ptr) };
    if current == value {
        false
    } else {
        // SAFETY: same contract; `T: Copy`, so overwriting drops nothing.
        unsafe { core::ptr::write_volatile(ptr, value) };
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    // The crate may be `no_std`; the tests use the standard library's prelude.
    use super::*;
    use core::sync::atomic::AtomicU64;
    #[allow(unused_imports)]
    use std::{
        borrow::ToOwned, boxed::Box, format, string::String, string::ToString, vec, vec::Vec,
    };

    #[test]
    fn writes_only_on_change_for_every_atomic() {
        macro_rules! check {
            ($atomic:ty, $a:expr, $b:expr) => {{
                let x = <$atomic>::new($a);
                assert!(!x.assign_unless_equal($a, Ordering::Relaxed));
                assert!(x.assign_unless_equal($b, Ordering::Release));
                assert_eq!(x.load(Ordering::Relaxed), $b);
                assert!(!x.assign_unless_equal($b, Ordering::SeqCst));
                assert!(x.assign_unless_equal($a, Ordering::SeqCst));
                assert_eq!(x.load(Ordering::Relaxed), $a);
            }};
        }
        check!(AtomicBool, false, true);
        check!(AtomicU8, 7u8, u8::MAX);
        check!(AtomicU16, 7u16, u16::MAX);
        check!(AtomicU32, 7u32, u32::MAX);
        check!(AtomicU64, 7u64, u64::MAX);
        check!(AtomicUsize, 7usize, usize::MAX);
        check!(AtomicI8, -7i8, i8::MIN);
        check!(AtomicI16, -7i16, i16::MIN);
        check!(AtomicI32, -7i32, i32::MIN);
        check!(AtomicI64, -7i64, i64::MIN);
        check!(AtomicIsize, -7isize, isize::MIN);
    }

    #[test]
    fn atomic_ptr_compares_addresses() {
        let mut a = 1u32;
        let mut b = 1u32; // equal pointee, different address
        let pa: *mut u32 = &mut a;
        let pb: *mut u32 = &mut b;
        let p = AtomicPtr::new(pa);
        assert!(!p.assign_unless_equal(pa, Ordering::Release));
        assert!(p.assign_unless_equal(pb, Ordering::Release));
        assert!(core::ptr::eq(p.load(Ordering::Relaxed), pb));
        assert!(p.assign_unless_equal(core::ptr::null_mut(), Ordering::Relaxed));
        assert!(p.load(Ordering::Relaxed).is_null());
    }

    #[test]
    #[should_panic(expected = "not a store ordering")]
    fn acquire_store_order_panics_even_without_change() {
        let x = AtomicU64::new(3);
        x.assign_unless_equal(3, Ordering::Acquire);
    }

    #[test]
    #[should_panic(expected = "not a store ordering")]
    fn acqrel_store_order_panics() {
        let x = AtomicU64::new(3);
        x.assign_unless_equal(4, Ordering::AcqRel);
    }

    #[test]
    fn plain_form_drops_exactly_one_value() {
        use std::rc::Rc;
        let old = Rc::new(1);
        let same = Rc::new(1);
        let mut place = Rc::clone(&old);
        // Equal by value: `same` is dropped, `place` still holds `old`.
        assert!(!assign_unless_equal(&mut place, Rc::clone(&same)));
        assert!(Rc::ptr_eq(&place, &old));
        assert_eq!(Rc::strong_count(&same), 1);
        let new = Rc::new(2);
        assert!(assign_unless_equal(&mut place, Rc::clone(&new)));
        assert_eq!(Rc::strong_count(&old), 1, "old value dropped once");
        assert_eq!(Rc::strong_count(&new), 2);
    }

    #[test]
    fn volatile_form_reads_and_writes_in_place() {
        let mut words = [5u64, 6, 7];
        let p = words.as_mut_ptr();
        // SAFETY: `p.add(1)` is in bounds of `words`, aligned, initialised, and no reference
        // to `words` is alive across the call.
        assert!(!unsafe { assign_unless_equal_volatile(p.add(1), 6) });
        // SAFETY: as above.
        assert!(unsafe { assign_unless_equal_volatile(p.add(1), 9) });
        assert_eq!(words, [5, 9, 7]);
    }

    #[test]
    fn float_nan_is_never_equal_so_it_always_writes() {
        // PartialEq semantics are the caller's: NaN != NaN, so the write happens.
        let mut x = f64::NAN;
        assert!(assign_unless_equal(&mut x, f64::NAN));
    }
}
