//! A test-and-test-and-set spin lock with backoff ([`SpinLock`]): waiters read the lock
//! word and try to take it only when it looks free, so they share its line read-only
//! instead of taking it from the holder on every spin (Rudolph and Segall's refinement of
//! test-and-set; the backoff is crossbeam's).

use super::*;

/// A test-and-test-and-set spinlock with backoff (spin, then yield).
///
/// `lock` tries the atomic compare-and-swap only when a plain load shows the lock free, so waiting
/// threads share the lock's line read-only instead of taking it from the holder on every
/// spin. Not fair, no poisoning (a guard dropped while panicking still unlocks).
///
/// ```
/// use flowline::lockmeter::SpinLock;
/// let l = SpinLock::new(0u64);
/// *l.lock() += 1;
/// assert_eq!(*l.lock(), 1);
/// assert!(l.try_lock().is_some());
/// ```
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands `&mut T` to one thread at a time (the `locked` flag's Acquire
// CAS / Release store order each holder's accesses after the previous holder's), so
// sharing the lock between threads only moves `T` between them: `T: Send` suffices.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: owning the lock owns the `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// An unlocked lock holding `value`.
    ///
    /// ```
    /// let l = flowline::lockmeter::SpinLock::new("x");
    /// assert_eq!(*l.lock(), "x");
    /// ```
    pub fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, spinning (then yielding) while another thread holds it.
    ///
    /// ```
    /// let l = flowline::lockmeter::SpinLock::new(1);
    /// let mut g = l.lock();
    /// *g = 2;
    /// ```
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        if let Some(g) = self.try_lock() {
            return g;
        }
        self.lock_contended()
    }

    #[cold]
    pub(super) fn lock_contended(&self) -> SpinGuard<'_, T> {
        let backoff = Backoff::new();
        loop {
            // Test: read (sharing the line, not taking it from the holder) while the lock
            // looks taken, with growing spins, until the backoff reaches its yielding
            // phase; from then on one try per yield. Relaxed: only a hint for when to try
            // the CAS, whose Acquire does the ordering.
            while self.locked.load(Ordering::Relaxed) && !backoff.is_completed() {
                backoff.snooze();
            }
            // And set.
            if let Some(g) = self.try_lock() {
                return g;
            }
            backoff.snooze();
        }
    }

    /// Takes the lock if it is free now.
    ///
    /// ```
    /// let l = flowline::lockmeter::SpinLock::new(());
    /// let g = l.lock();
    /// assert!(l.try_lock().is_none());
    /// drop(g);
    /// assert!(l.try_lock().is_some());
    /// ```
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        // Acquire (success): pairs with the previous holder's Release store in
        // `SpinGuard::drop`, so its accesses to the value happen before ours. Relaxed
        // (failure): nothing is read through a failed try. (A CAS rather than a swap: the
        // same locked instruction here, and loom models a spinning CAS as waiting.)
        match self
            .locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Some(SpinGuard {
                lock: self,
                _not_send: PhantomData,
            }),
            Err(_) => None,
        }
    }

    /// Whether some thread holds the lock now (a snapshot).
    ///
    /// ```
    /// let l = flowline::lockmeter::SpinLock::new(());
    /// let _g = l.lock();
    /// assert!(l.is_locked());
    /// ```
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }

    /// The value, by exclusive access (no locking needed).
    ///
    /// ```
    /// let mut l = flowline::lockmeter::SpinLock::new(5);
    /// *l.get_mut() += 1;
    /// assert_eq!(l.into_inner(), 6);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` excludes every guard and every other access.
        self.value.with_mut(|p| unsafe { &mut *p })
    }

    /// The value, consuming the lock.
    ///
    /// ```
    /// assert_eq!(flowline::lockmeter::SpinLock::new(7).into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: fmt::Debug> fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_lock() {
            Some(g) => f.debug_struct("SpinLock").field("value", &*g).finish(),
            None => f
                .debug_struct("SpinLock")
                .field("value", &"<locked>")
                .finish(),
        }
    }
}

/// Access to a [`SpinLock`]'s value; unlocks when dropped.
///
/// ```
/// let l = flowline::lockmeter::SpinLock::new(vec![1]);
/// l.lock().push(2);
/// assert_eq!(l.lock().len(), 2);
/// ```
///
/// Like `std::sync::MutexGuard`, a guard is not `Send` (it unlocks on the thread that
/// locked) and is `Sync` only if `T` is: sharing a guard shares `&T`.
///
/// ```compile_fail
/// // A guard of a `Cell` cannot be shared between threads.
/// let l = flowline::lockmeter::SpinLock::new(std::cell::Cell::new(0));
/// let g = l.lock();
/// std::thread::scope(|s| {
///     s.spawn(|| g.set(1));
/// });
/// ```
#[must_use = "if unused the lock is released at once"]
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Neither `Send` nor `Sync` by default (a raw pointer); `Sync` is restored below for
    /// `T: Sync`.
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard hands out only `&T` (`DerefMut` needs `&mut` guard), so sharing it
// between threads is sharing `&T`: sound exactly when `T: Sync`.
unsafe impl<T: Sync> Sync for SpinGuard<'_, T> {}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (its Acquire CAS), so no other thread accesses
        // the value until the guard's Release store; the borrow ends with the guard's.
        self.lock.value.with(|p| unsafe { &*p })
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes this the only borrow through the
        // guard.
        self.lock.value.with_mut(|p| unsafe { &mut *p })
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: pairs with the next holder's Acquire CAS, so this holder's accesses to
        // the value happen before its.
        self.lock.locked.store(false, Ordering::Release);
    }
}

impl<T: fmt::Debug> fmt::Debug for SpinGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
