//! The one switch between the real synchronisation primitives and loom's models.
//!
//! Every other module imports atomics, `UnsafeCell`, `Arc`, thread yields and the
//! spin-then-yield backoff from here, so production code is written once and the loom
//! models (`RUSTFLAGS="--cfg loom"`) check exactly the code that ships. No other file
//! names loom.
//!
//! This module is public so that code built on flowline (and the crate's own loom tests)
//! can name the same atomic types the primitives use: under `cfg(loom)` they are loom's.

/// Atomic types: `core::sync::atomic` normally, `loom::sync::atomic` under `cfg(loom)`.
pub mod atomic {
    #[cfg(not(loom))]
    pub use core::sync::atomic::{
        AtomicBool, AtomicI16, AtomicI32, AtomicI64, AtomicI8, AtomicIsize, AtomicPtr, AtomicU16,
        AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
    #[cfg(loom)]
    pub use loom::sync::atomic::{
        AtomicBool, AtomicI16, AtomicI32, AtomicI64, AtomicI8, AtomicIsize, AtomicPtr, AtomicU16,
        AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

/// An `UnsafeCell` with loom's closure API (`with`, `with_mut`).
///
/// Under loom the accesses are tracked and a racy pair fails the model; in normal builds
/// both calls compile to a plain pointer hand-out.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T: ?Sized>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
#[allow(dead_code)] // used by the FIFOs; kept here so the shim is complete
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    #[inline]
    pub(crate) const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a shared raw pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with an exclusive raw pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
#[allow(unused_imports)] // used by the FIFOs
pub(crate) use loom::cell::UnsafeCell;

/// Spin with exponential backoff, then yield the CPU.
///
/// Wraps `crossbeam_utils::Backoff` (a few `spin_loop` rounds growing exponentially, then
/// `thread::yield_now`). Under loom every step is a `loom::thread::yield_now`, which tells
/// the model checker that this thread waits for another and keeps spin loops finite.
#[derive(Debug, Default)]
pub struct Backoff {
    #[cfg(not(loom))]
    inner: crossbeam_utils::Backoff,
}

impl Backoff {
    /// A fresh backoff, starting with the shortest spin.
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// One waiting step: spin (short waits) or yield (long ones).
    #[inline]
    pub fn snooze(&self) {
        #[cfg(not(loom))]
        self.inner.snooze();
        #[cfg(loom)]
        loom::thread::yield_now();
    }

    /// Whether the backoff has reached the yielding phase: a caller with a deadline checks
    /// the clock only from here on, so short waits never read it.
    #[inline]
    pub fn is_completed(&self) -> bool {
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
