//! The one switch between the real synchronisation primitives and loom's models.
//!
//! Every other module imports atomics, `Arc`, slot-access tracking and the spin-then-yield
//! backoff from here, so production code is written once and the loom
//! models (`RUSTFLAGS="--cfg loom"`) check exactly the code that ships. No other file
//! names loom.
//!
//! The module is crate-private; loom tests name loom's types directly.
// Without `alloc` only the cells and slots are built, and they use part of this module.
#![cfg_attr(not(feature = "alloc"), allow(dead_code, unused_imports))]

/// Atomic types: `core::sync::atomic` normally, `loom::sync::atomic` under `cfg(loom)`.
pub(crate) mod atomic {
    #[cfg(not(loom))]
    pub(crate) use core::sync::atomic::{
        fence, AtomicBool, AtomicI16, AtomicI32, AtomicI64, AtomicI8, AtomicIsize, AtomicPtr,
        AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicI16, AtomicI32, AtomicI64, AtomicI8, AtomicIsize, AtomicPtr,
        AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

#[cfg(loom)]
pub(crate) use loom::sync::Arc;
/// The model checker's entry point and threads, for the crate's own loom models.
#[cfg(all(test, loom))]
pub(crate) use loom::{model, thread};

/// One turn of a spinning wait: a spin-loop hint, or under loom a yield to the model's
/// scheduler (which models a spin as waiting).
#[cfg(feature = "std")]
#[inline(always)]
pub(crate) fn spin_turn() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Gives the thread's time slice up: std's yield, or loom's under `cfg(loom)`.
#[cfg(feature = "std")]
#[inline(always)]
pub(crate) fn yield_turn() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}
/// Whether this build runs under the model checker: code whose choices depend on the
/// machine (the current CPU) makes a fixed choice instead, so every execution of a model
/// takes the same path.
#[cfg_attr(not(feature = "std"), allow(dead_code))]
pub(crate) const MODEL_CHECKING: bool = cfg!(loom);

#[cfg(all(not(loom), feature = "alloc"))]
pub(crate) use alloc::sync::Arc;

/// An [`Arc`] for a ring handle's share of the ring, whose drop never hands the address of
/// the struct that holds it to a function the compiler cannot see into.
///
/// `Arc`'s drop calls an out-of-line `drop_slow(&mut self)` when the count reaches zero.
/// That address makes the whole handle (a `Consumer` in a loop, say) "escaped" to the
/// compiler, and an escaped struct's fields can no longer live in registers across the
/// ring's atomic operations: every publication stores the handle's own index back to
/// memory first and every Acquire load reloads its fields, so the index a loop advances
/// goes through memory on every item. Here the drop passes the pointer by value to an
/// out-of-line function that rebuilds the `Arc`, so only that function's temporary leaves.
///
/// With it, single items through `fifo::spsc` run at rtrb's speed where they trailed it
/// (`docs/performance-notes.md` in the repository, "Ring handles that escaped to the
/// compiler").
#[cfg(any(loom, feature = "alloc"))]
pub(crate) struct HandleArc<T> {
    /// From `Arc::into_raw`: this handle owns one strong count.
    ptr: core::ptr::NonNull<T>,
    _owns: core::marker::PhantomData<Arc<T>>,
}

#[cfg(any(loom, feature = "alloc"))]
impl<T> HandleArc<T> {
    /// Takes over `arc`'s strong count.
    #[inline]
    pub(crate) fn new(arc: Arc<T>) -> Self {
        let raw = Arc::into_raw(arc).cast_mut();
        HandleArc {
            // `Arc::into_raw` never returns null.
            ptr: core::ptr::NonNull::new(raw).expect("Arc::into_raw is never null"),
            _owns: core::marker::PhantomData,
        }
    }
}

#[cfg(any(loom, feature = "alloc"))]
impl<T> Clone for HandleArc<T> {
    #[inline]
    fn clone(&self) -> Self {
        // SAFETY: `ptr` came from `Arc::into_raw` and this handle's count keeps it alive; the
        // rebuilt `Arc` is never dropped (`ManuallyDrop`), so the count it stands for stays
        // this handle's, and the clone takes a new one.
        let own = core::mem::ManuallyDrop::new(unsafe { Arc::from_raw(self.ptr.as_ptr()) });
        HandleArc::new(Arc::clone(&own))
    }
}

#[cfg(any(loom, feature = "alloc"))]
impl<T> core::ops::Deref for HandleArc<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the strong count this handle owns keeps the value alive, and nothing
        // forms a `&mut T` to an `Arc` handed to a `HandleArc` (no `get_mut`, `make_mut` or
        // `try_unwrap` on them anywhere in the crate), so shared references are all there is.
        unsafe { self.ptr.as_ref() }
    }
}

#[cfg(any(loom, feature = "alloc"))]
impl<T> Drop for HandleArc<T> {
    #[inline(always)]
    fn drop(&mut self) {
        /// Out of line and by value: the drop inlined into its callers (a landing pad, too)
        /// is one call with the pointer in a register.
        #[inline(never)]
        fn release<T>(ptr: core::ptr::NonNull<T>) {
            // SAFETY: `ptr` came from `Arc::into_raw` and its count is the dropped handle's;
            // it is given back exactly once, here (the handle is gone after this).
            drop(unsafe { Arc::from_raw(ptr.as_ptr()) });
        }
        release(self.ptr);
    }
}

// SAFETY: as `Arc<T>`: the handle shares `T` between threads and may drop it on any of them.
#[cfg(any(loom, feature = "alloc"))]
unsafe impl<T: Send + Sync> Send for HandleArc<T> {}
// SAFETY: as `Arc<T>`.
#[cfg(any(loom, feature = "alloc"))]
unsafe impl<T: Send + Sync> Sync for HandleArc<T> {}

#[cfg(all(loom, feature = "std"))]
pub(crate) use loom::sync::{Condvar, Mutex};
/// Blocking primitives for the sleep side of `wait`: std's normally, loom's under
/// `cfg(loom)` (whose `Condvar::wait_timeout` never times out, so a lost wake-up is a
/// deadlock the model checker reports).
#[cfg(all(not(loom), feature = "std"))]
pub(crate) use std::sync::{Condvar, Mutex};

/// Race tracking for buffers whose elements are accessed through raw pointers (the FIFO
/// slots).
///
/// The rings keep their elements in a plain allocation so that bursts and chunks can be
/// handed out as contiguous slices and copied with `memcpy`; loom cannot model a slice
/// spanning many of its `UnsafeCell`s. Instead, every place that reads or writes slot `i`
/// also calls [`AccessTracker::read`] / [`AccessTracker::write`] for `i`. Normally these are
/// empty and compile away; under loom each is an access to a per-slot `loom::cell::UnsafeCell<()>`,
/// so loom reports any producer and consumer accesses to one slot that are not ordered by
/// happens-before, which is exactly a data race on the slot.
pub(crate) struct AccessTracker {
    #[cfg(loom)]
    cells: alloc::boxed::Box<[loom::cell::UnsafeCell<()>]>,
}

impl AccessTracker {
    /// A tracker for `n` slots.
    #[inline]
    pub(crate) fn new(n: usize) -> Self {
        #[cfg(not(loom))]
        {
            let _ = n;
            AccessTracker {}
        }
        #[cfg(loom)]
        {
            AccessTracker {
                cells: (0..n).map(|_| loom::cell::UnsafeCell::new(())).collect(),
            }
        }
    }

    /// Records a read of slot `i` at this point of the calling thread.
    #[inline(always)]
    pub(crate) fn read(&self, i: usize) {
        #[cfg(loom)]
        self.cells[i].with(|_| ());
        #[cfg(not(loom))]
        let _ = i;
    }

    /// Records a read of the `n` slots `pos(0)..pos(n - 1)`. Without loom there is no loop at
    /// all (not even an empty one for Miri to interpret, item by item).
    #[inline(always)]
    pub(crate) fn read_each(&self, n: usize, pos: impl Fn(usize) -> usize) {
        #[cfg(loom)]
        for k in 0..n {
            self.read(pos(k));
        }
        #[cfg(not(loom))]
        let _ = (n, pos);
    }

    /// Records a write of the `n` slots `pos(0)..pos(n - 1)` (see `read_each`).
    #[inline(always)]
    pub(crate) fn write_each(&self, n: usize, pos: impl Fn(usize) -> usize) {
        #[cfg(loom)]
        for k in 0..n {
            self.write(pos(k));
        }
        #[cfg(not(loom))]
        let _ = (n, pos);
    }

    /// Records a write of slot `i` at this point of the calling thread.
    #[inline(always)]
    pub(crate) fn write(&self, i: usize) {
        #[cfg(loom)]
        self.cells[i].with_mut(|_| ());
        #[cfg(not(loom))]
        let _ = i;
    }
}

/// Spin with exponential backoff, then yield the CPU.
///
/// Wraps `crossbeam_utils::Backoff` (a few `spin_loop` rounds growing exponentially, then
/// `thread::yield_now`). Under loom every step is a `loom::thread::yield_now`, which tells
/// the model checker that this thread waits for another and keeps spin loops finite.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    #[cfg(not(loom))]
    inner: crossbeam_utils::Backoff,
}

impl Backoff {
    /// A fresh backoff, starting with the shortest spin.
    #[inline]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// One waiting step: spin (short waits) or yield (long ones).
    #[inline]
    pub(crate) fn snooze(&self) {
        #[cfg(not(loom))]
        self.inner.snooze();
        #[cfg(loom)]
        loom::thread::yield_now();
    }

    /// Whether the backoff has reached the yielding phase: a caller with a deadline checks
    /// the clock only from here on, so short waits never read it.
    #[inline]
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn is_completed(&self) -> bool {
        #[cfg(not(loom))]
        {
            self.inner.is_completed()
        }
        #[cfg(loom)]
        {
            true
        }
    }
}

/// An `UnsafeCell` that loom can track: `core::cell::UnsafeCell` normally, a
/// `loom::cell::UnsafeCell` under `cfg(loom)`, so loom reports accesses to the value that
/// are not ordered by happens-before (a lock that does not exclude).
#[derive(Debug)]
#[cfg_attr(not(feature = "std"), allow(dead_code))]
pub(crate) struct UnsafeCell<T> {
    #[cfg(not(loom))]
    inner: core::cell::UnsafeCell<T>,
    #[cfg(loom)]
    inner: loom::cell::UnsafeCell<T>,
}

#[cfg_attr(not(feature = "std"), allow(dead_code))]
impl<T> UnsafeCell<T> {
    /// A cell holding `value`.
    #[cfg(not(loom))]
    #[inline]
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell {
            inner: core::cell::UnsafeCell::new(value),
        }
    }

    /// A cell holding `value`.
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        UnsafeCell {
            inner: loom::cell::UnsafeCell::new(value),
        }
    }

    /// Runs `f` with a pointer for reading the value (loom records a read here).
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(not(loom))]
        {
            f(self.inner.get())
        }
        #[cfg(loom)]
        {
            self.inner.with(f)
        }
    }

    /// Runs `f` with a pointer for writing the value (loom records a write here).
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(not(loom))]
        {
            f(self.inner.get())
        }
        #[cfg(loom)]
        {
            self.inner.with_mut(f)
        }
    }

    /// The value, by exclusive access.
    #[inline]
    pub(crate) fn into_inner(self) -> T {
        self.inner.into_inner()
    }
}

/// A shared value that one thread may replace while others read it: crossbeam-epoch's
/// `Atomic` normally (readers pin, a replaced value is freed once no pinned reader can
/// still see it), a `Mutex<Arc<T>>` under `cfg(loom)` (the models check the protocols
/// built on top, not crossbeam-epoch itself) and under Miri's default Stacked Borrows
/// run: crossbeam-epoch's intrusive list of participants breaks Stacked Borrows' rules
/// (a known limitation upstream, whose own CI runs Miri under Tree Borrows), so CI runs
/// the crossbeam-epoch form under Miri separately, with `--cfg flowline_miri_epoch` and
/// Tree Borrows.
#[cfg(feature = "std")]
pub(crate) struct EpochCell<T> {
    #[cfg(not(any(loom, all(miri, not(flowline_miri_epoch)))))]
    value: crossbeam_epoch::Atomic<T>,
    #[cfg(any(loom, all(miri, not(flowline_miri_epoch))))]
    value: Mutex<Arc<T>>,
}

#[cfg(feature = "std")]
impl<T: Send + Sync + 'static> EpochCell<T> {
    pub(crate) fn new(v: T) -> Self {
        Self {
            #[cfg(not(any(loom, all(miri, not(flowline_miri_epoch)))))]
            value: crossbeam_epoch::Atomic::new(v),
            #[cfg(any(loom, all(miri, not(flowline_miri_epoch))))]
            value: Mutex::new(Arc::new(v)),
        }
    }

    /// Runs `f` on the current value (one pin).
    pub(crate) fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        #[cfg(not(any(loom, all(miri, not(flowline_miri_epoch)))))]
        {
            let guard = crossbeam_epoch::pin();
            // Acquire: pairs with the Release half of `update`'s compare-exchange, so the
            // value's contents written before it was published are visible here.
            let cur = self
                .value
                .load(core::sync::atomic::Ordering::Acquire, &guard);
            // SAFETY: the cell always holds a non-null value (set by `new`, replaced only
            // by non-null ones), and the guard keeps it alive while `f` runs: a replaced
            // value is destroyed only after every thread pinned before its replacement
            // has unpinned.
            let value = unsafe { cur.deref() };
            f(value)
        }
        #[cfg(any(loom, all(miri, not(flowline_miri_epoch))))]
        {
            let cur = Arc::clone(&self.value.lock().unwrap());
            f(&cur)
        }
    }

    /// Replaces the value with `f(current)`, retrying if another thread replaced it in
    /// the meantime (so `f` may run more than once); `None` from `f` leaves it alone.
    /// Returns whether it replaced it.
    pub(crate) fn update(&self, mut f: impl FnMut(&T) -> Option<T>) -> bool {
        #[cfg(not(any(loom, all(miri, not(flowline_miri_epoch)))))]
        {
            let guard = crossbeam_epoch::pin();
            loop {
                // Acquire: as in `read`.
                let cur = self
                    .value
                    .load(core::sync::atomic::Ordering::Acquire, &guard);
                // SAFETY: as in `read`.
                let Some(next) = f(unsafe { cur.deref() }) else {
                    return false;
                };
                // AcqRel on success: Release publishes `next`'s contents to the readers'
                // Acquire loads; Acquire orders this thread after the value it replaces.
                match self.value.compare_exchange(
                    cur,
                    crossbeam_epoch::Owned::new(next),
                    core::sync::atomic::Ordering::AcqRel,
                    core::sync::atomic::Ordering::Acquire,
                    &guard,
                ) {
                    Ok(_) => {
                        // SAFETY: `cur` is no longer reachable from the cell; threads that
                        // loaded it are pinned, and the destruction waits for them.
                        unsafe { guard.defer_destroy(cur) };
                        return true;
                    }
                    Err(_) => continue,
                }
            }
        }
        #[cfg(any(loom, all(miri, not(flowline_miri_epoch))))]
        {
            let mut g = self.value.lock().unwrap();
            match f(&g) {
                Some(next) => {
                    *g = Arc::new(next);
                    true
                }
                None => false,
            }
        }
    }
}

#[cfg(all(feature = "std", not(any(loom, all(miri, not(flowline_miri_epoch))))))]
impl<T> Drop for EpochCell<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader can be inside `read` or `update` now, and the
        // value is owned by the cell alone (replaced ones were handed to the collector).
        unsafe {
            let guard = crossbeam_epoch::unprotected();
            // Relaxed: `&mut self` already orders every other access before this one.
            drop(
                self.value
                    .swap(
                        crossbeam_epoch::Shared::null(),
                        core::sync::atomic::Ordering::Relaxed,
                        guard,
                    )
                    .into_owned(),
            );
        }
    }
}

#[cfg(all(test, feature = "std", not(loom)))]
mod tests {
    use super::{Arc, EpochCell, HandleArc};
    use std::sync::Mutex;

    /// A handle holds one strong count, a clone takes another, and the value is dropped
    /// once, when the last handle or `Arc` goes, whichever thread drops it (Miri checks the
    /// `into_raw` / `from_raw` round trips).
    #[test]
    fn handle_arc_counts_like_an_arc_and_drops_its_value_once() {
        struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let drops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let arc = Arc::new(Counted(drops.clone()));
        let a = HandleArc::new(Arc::clone(&arc));
        assert_eq!(Arc::strong_count(&arc), 2);
        let b = a.clone();
        assert_eq!(Arc::strong_count(&arc), 3);
        assert!(std::ptr::eq(&*a, &*b) && std::ptr::eq(&*a, &*arc));
        drop(a);
        assert_eq!(Arc::strong_count(&arc), 2);
        drop(arc);
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 0);
        std::thread::spawn(move || drop(b)).join().unwrap();
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    static DROPPED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

    struct Tracked(u32);
    impl Drop for Tracked {
        fn drop(&mut self) {
            DROPPED.lock().unwrap().push(self.0);
        }
    }

    /// Readers see the latest value; a declined update changes nothing; dropping the cell
    /// drops its current value at once (replaced ones go to the collector, which frees
    /// them once no pinned reader can see them: not checked here, it is lazy).
    #[test]
    fn epoch_cell_reads_updates_and_drops_its_value() {
        let cell = EpochCell::new(Tracked(1));
        assert!(!cell.update(|_| None));
        assert_eq!(cell.read(|v| v.0), 1);
        assert!(cell.update(|v| Some(Tracked(v.0 + 1))));
        assert!(cell.update(|v| Some(Tracked(v.0 + 1))));
        assert_eq!(cell.read(|v| v.0), 3);
        assert!(!DROPPED.lock().unwrap().contains(&3));
        drop(cell);
        assert!(
            DROPPED.lock().unwrap().contains(&3),
            "current value dropped"
        );
    }
}
