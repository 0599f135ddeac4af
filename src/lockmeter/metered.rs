//! The metered locks: [`MeteredSpinLock`] and [`MeteredMutex`], each the API of the lock it
//! wraps with every acquisition counted at its site and one in `one_in` holds timed, and
//! their guard.

use super::*;

/// A [`SpinLock`] metered per lock site (see the [module docs](super)). With
/// `METERED = false` it is the bare spinlock. `METERED` defaults to `true` in types
/// (struct fields, `let` annotations, aliases such as
/// `type SockLock<T> = MeteredSpinLock<T, false>;` to compile metering out); an expression
/// without a type names the default with `MeteredSpinLock::<_>::new(..)`.
///
/// ```
/// use flowline::lockmeter::MeteredSpinLock;
/// let l: MeteredSpinLock<u32> = MeteredSpinLock::new(0); // sites: the lock() call sites
/// *l.lock() += 1;
/// let bare: MeteredSpinLock<u32, false> = MeteredSpinLock::new(0); // records nothing
/// *bare.lock() += 1;
/// ```
pub struct MeteredSpinLock<T, const METERED: bool = true> {
    pub(super) lock: SpinLock<T>,
    name: Option<&'static str>,
    sampling: Sampling,
}

impl<T, const METERED: bool> MeteredSpinLock<T, METERED> {
    /// A lock whose acquisitions are metered at each call site of `lock`/`try_lock`.
    ///
    /// ```
    /// let l = flowline::lockmeter::MeteredSpinLock::<_>::new(1);
    /// assert_eq!(*l.lock(), 1);
    /// ```
    pub fn new(value: T) -> Self {
        MeteredSpinLock {
            lock: SpinLock::new(value),
            name: None,
            sampling: Sampling::one_in(DEFAULT_HOLD_SAMPLING),
        }
    }

    /// A lock whose acquisitions are all metered under `name`.
    ///
    /// ```
    /// let l = flowline::lockmeter::MeteredSpinLock::<_>::named("rx queue", 1);
    /// assert_eq!(*l.lock(), 1);
    /// ```
    pub fn named(name: &'static str, value: T) -> Self {
        MeteredSpinLock {
            lock: SpinLock::new(value),
            name: Some(name),
            sampling: Sampling::one_in(DEFAULT_HOLD_SAMPLING),
        }
    }

    /// Times the hold of one acquisition in `one_in` (at random, see below), instead of one
    /// in [`DEFAULT_HOLD_SAMPLING`]; `1` times every hold.
    ///
    /// Counts (TOTAL, NOWAIT, SPIN, RJECT) are always exact, and so are waits (an
    /// acquisition that waits is always timed: the wait costs more than the clock reads).
    /// What sampling saves is the two clock reads around a hold (the cost of each setting:
    /// `docs/performance-notes.md`, section 6). The price: the mean hold, the total and UTIL are estimates (the
    /// mean of the timed holds, which are a random sample of all holds, times the
    /// acquisitions), and the hold maximum is the longest hold that was timed, so a single
    /// long hold is seen with probability `1 / one_in` (a kind of hold that recurs is seen).
    /// [`SiteStats::holds_timed`] says how many holds the figures rest on. Locks that share
    /// a site (one name) should share a rate: the estimate weighs every timed hold alike.
    ///
    /// The draw: each thread keeps a budget that every acquisition spends by its lock's
    /// rate, and the acquisition that overdraws it is timed and refills it by a random
    /// amount, so the sampling does not lock onto a pattern of the program (a thread's
    /// first acquisition only fills its budget, so short-lived threads do not put their
    /// first, often cold, holds in the sample).
    ///
    /// # Panics
    ///
    /// If `one_in` is 0 or above [`MAX_HOLD_SAMPLING`].
    ///
    /// ```
    /// use flowline::lockmeter::{self, MeteredSpinLock};
    /// let exact = MeteredSpinLock::<_>::named("every hold", 0).with_hold_sampling(1);
    /// for _ in 0..10 {
    ///     *exact.lock() += 1;
    /// }
    /// let s = lockmeter::snapshot().into_iter().find(|s| s.name == "every hold").unwrap();
    /// assert_eq!((s.total, s.holds_timed), (10, 10));
    /// ```
    #[track_caller]
    pub fn with_hold_sampling(mut self, one_in: u32) -> Self {
        self.sampling = Sampling::one_in(one_in);
        self
    }

    /// Takes the lock (see [`SpinLock::lock`]), timing the wait and, until the guard
    /// drops, the hold.
    ///
    /// ```
    /// let l = flowline::lockmeter::MeteredSpinLock::<_>::new(vec![]);
    /// l.lock().push(1);
    /// ```
    #[track_caller]
    #[inline(always)]
    pub fn lock(&self) -> MeteredSpinGuard<'_, T, METERED> {
        if !METERED {
            return MeteredSpinGuard {
                guard: ManuallyDrop::new(self.lock.lock()),
                stamp: None,
            };
        }
        let caller = Location::caller();
        match self.lock.try_lock() {
            Some(guard) => MeteredSpinGuard {
                guard: ManuallyDrop::new(guard),
                stamp: Some(Stamp::uncontended(self.name, caller, self.sampling)),
            },
            None => {
                let who = Who::of(self.name, caller);
                let (guard, stamp) =
                    acquire_contended(who, self.sampling, || self.lock.lock_contended());
                MeteredSpinGuard {
                    guard: ManuallyDrop::new(guard),
                    stamp: Some(stamp),
                }
            }
        }
    }

    /// Takes the lock if it is free now; a failure counts as a rejection (RJECT).
    ///
    /// ```
    /// let l = flowline::lockmeter::MeteredSpinLock::<_>::new(());
    /// let g = l.lock();
    /// assert!(l.try_lock().is_none());
    /// ```
    #[track_caller]
    #[inline]
    pub fn try_lock(&self) -> Option<MeteredSpinGuard<'_, T, METERED>> {
        if !METERED {
            return self.lock.try_lock().map(|guard| MeteredSpinGuard {
                guard: ManuallyDrop::new(guard),
                stamp: None,
            });
        }
        let caller = Location::caller();
        match self.lock.try_lock() {
            Some(guard) => Some(MeteredSpinGuard {
                guard: ManuallyDrop::new(guard),
                stamp: Some(Stamp::uncontended(self.name, caller, self.sampling)),
            }),
            None => {
                reject(self.name, caller);
                None
            }
        }
    }

    /// The value, consuming the lock.
    ///
    /// ```
    /// assert_eq!(flowline::lockmeter::MeteredSpinLock::<_>::new(3).into_inner(), 3);
    /// ```
    pub fn into_inner(self) -> T {
        self.lock.into_inner()
    }
}

impl<T: fmt::Debug, const METERED: bool> fmt::Debug for MeteredSpinLock<T, METERED> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredSpinLock")
            .field("name", &self.name)
            .field("lock", &self.lock)
            .finish()
    }
}

/// Access to a [`MeteredSpinLock`]'s value; records the hold and unlocks when dropped.
///
/// ```
/// let l = flowline::lockmeter::MeteredSpinLock::<_>::new(1);
/// let g = l.lock();
/// assert_eq!(*g, 1);
/// ```
pub type MeteredSpinGuard<'a, T, const METERED: bool = true> =
    MeteredGuard<SpinGuard<'a, T>, METERED>;

/// A metered lock's guard around the wrapped lock's guard `G`: gives access to the value
/// and, when dropped, unlocks first and then records the hold at the acquisition's site.
/// Used as [`MeteredSpinGuard`] and [`MeteredMutexGuard`].
///
/// ```
/// let l = flowline::lockmeter::MeteredSpinLock::<_>::new(vec![1]);
/// let mut g: flowline::lockmeter::MeteredGuard<_> = l.lock();
/// g.push(2);
/// assert_eq!(g.len(), 2);
/// ```
#[must_use = "if unused the lock is released at once"]
pub struct MeteredGuard<G, const METERED: bool = true> {
    /// Dropped by hand in `Drop`: the lock is released before the hold is recorded.
    guard: ManuallyDrop<G>,
    stamp: Option<Stamp>,
}

impl<G: Deref, const METERED: bool> Deref for MeteredGuard<G, METERED> {
    type Target = G::Target;
    fn deref(&self) -> &G::Target {
        &self.guard
    }
}

impl<G: DerefMut, const METERED: bool> DerefMut for MeteredGuard<G, METERED> {
    fn deref_mut(&mut self) -> &mut G::Target {
        &mut self.guard
    }
}

impl<G, const METERED: bool> Drop for MeteredGuard<G, METERED> {
    #[inline(always)]
    fn drop(&mut self) {
        let end = match &self.stamp {
            Some(s) if METERED && s.timed() => ticks(),
            _ => 0,
        };
        // SAFETY: `guard` is dropped exactly once, here; it is not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.guard) };
        // Recorded after the unlock, so the bookkeeping does not lengthen the hold.
        if METERED {
            if let Some(s) = &self.stamp {
                s.finish(end);
            }
        }
    }
}

impl<G: Deref, const METERED: bool> fmt::Debug for MeteredGuard<G, METERED>
where
    G::Target: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A `std::sync::Mutex` metered per lock site (see the [module docs](super)), with the same
/// API shape (`lock` returns a `LockResult`, poisoning included). With `METERED = false`
/// it is the bare mutex (see [`MeteredSpinLock`] for naming the default).
///
/// ```
/// use flowline::lockmeter::MeteredMutex;
/// let m: MeteredMutex<u32> = MeteredMutex::named("config", 1);
/// *m.lock().unwrap() += 1;
/// assert_eq!(m.into_inner().unwrap(), 2);
/// ```
pub struct MeteredMutex<T, const METERED: bool = true> {
    mutex: Mutex<T>,
    name: Option<&'static str>,
    sampling: Sampling,
}

impl<T, const METERED: bool> MeteredMutex<T, METERED> {
    /// A mutex whose acquisitions are metered at each call site of `lock`/`try_lock`.
    ///
    /// ```
    /// let m = flowline::lockmeter::MeteredMutex::<_>::new(1);
    /// assert_eq!(*m.lock().unwrap(), 1);
    /// ```
    pub fn new(value: T) -> Self {
        MeteredMutex {
            mutex: Mutex::new(value),
            name: None,
            sampling: Sampling::one_in(DEFAULT_HOLD_SAMPLING),
        }
    }

    /// A mutex whose acquisitions are all metered under `name`.
    ///
    /// ```
    /// let m = flowline::lockmeter::MeteredMutex::<_>::named("routes", 1);
    /// assert_eq!(*m.lock().unwrap(), 1);
    /// ```
    pub fn named(name: &'static str, value: T) -> Self {
        MeteredMutex {
            mutex: Mutex::new(value),
            name: Some(name),
            sampling: Sampling::one_in(DEFAULT_HOLD_SAMPLING),
        }
    }

    /// Times the hold of one acquisition in `one_in`; `1` times every hold. See
    /// [`MeteredSpinLock::with_hold_sampling`] for what is exact and what is estimated.
    ///
    /// # Panics
    ///
    /// If `one_in` is 0 or above [`MAX_HOLD_SAMPLING`].
    ///
    /// ```
    /// use flowline::lockmeter::{self, MeteredMutex};
    /// let m = MeteredMutex::<_>::named("sampled mutex", 0).with_hold_sampling(64);
    /// for _ in 0..100 {
    ///     *m.lock().unwrap() += 1;
    /// }
    /// let s = lockmeter::snapshot().into_iter().find(|s| s.name == "sampled mutex").unwrap();
    /// assert_eq!(s.total, 100);
    /// assert!(s.holds_timed <= 100);
    /// ```
    #[track_caller]
    pub fn with_hold_sampling(mut self, one_in: u32) -> Self {
        self.sampling = Sampling::one_in(one_in);
        self
    }

    /// Takes the mutex (see `std::sync::Mutex::lock`), timing the wait and, until the
    /// guard drops, the hold.
    ///
    /// # Errors
    ///
    /// As `std::sync::Mutex::lock`: the mutex is poisoned (a holder panicked); the error
    /// still carries the guard.
    ///
    /// ```
    /// let m = flowline::lockmeter::MeteredMutex::<_>::new(vec![]);
    /// m.lock().unwrap().push(1);
    /// ```
    #[track_caller]
    #[inline(always)]
    pub fn lock(&self) -> LockResult<MeteredMutexGuard<'_, T, METERED>> {
        if !METERED {
            return wrap(self.mutex.lock(), None);
        }
        let caller = Location::caller();
        let stamp = || Some(Stamp::uncontended(self.name, caller, self.sampling));
        match self.mutex.try_lock() {
            Ok(guard) => Ok(MeteredMutexGuard {
                guard: ManuallyDrop::new(guard),
                stamp: stamp(),
            }),
            Err(TryLockError::Poisoned(e)) => Err(PoisonError::new(MeteredMutexGuard {
                guard: ManuallyDrop::new(e.into_inner()),
                stamp: stamp(),
            })),
            Err(TryLockError::WouldBlock) => {
                let who = Who::of(self.name, caller);
                let (r, stamp) = acquire_contended(who, self.sampling, || self.mutex.lock());
                wrap(r, Some(stamp))
            }
        }
    }

    /// Takes the mutex if it is free now; `WouldBlock` counts as a rejection (RJECT).
    ///
    /// # Errors
    ///
    /// As `std::sync::Mutex::try_lock`: `WouldBlock` if held, `Poisoned` (with the guard)
    /// if a holder panicked.
    ///
    /// ```
    /// let m = flowline::lockmeter::MeteredMutex::<_>::new(());
    /// let g = m.lock().unwrap();
    /// assert!(m.try_lock().is_err());
    /// ```
    #[track_caller]
    #[inline]
    pub fn try_lock(&self) -> TryLockResult<MeteredMutexGuard<'_, T, METERED>> {
        let caller = Location::caller();
        let stamp = |name| METERED.then(|| Stamp::uncontended(name, caller, self.sampling));
        match self.mutex.try_lock() {
            Ok(guard) => Ok(MeteredMutexGuard {
                guard: ManuallyDrop::new(guard),
                stamp: stamp(self.name),
            }),
            Err(TryLockError::Poisoned(e)) => Err(TryLockError::Poisoned(PoisonError::new(
                MeteredMutexGuard {
                    guard: ManuallyDrop::new(e.into_inner()),
                    stamp: stamp(self.name),
                },
            ))),
            Err(TryLockError::WouldBlock) => {
                if METERED {
                    reject(self.name, caller);
                }
                Err(TryLockError::WouldBlock)
            }
        }
    }

    /// The value, consuming the mutex.
    ///
    /// # Errors
    ///
    /// As `std::sync::Mutex::into_inner`: poisoned (the error carries the value).
    ///
    /// ```
    /// assert_eq!(flowline::lockmeter::MeteredMutex::<_>::new(3).into_inner().unwrap(), 3);
    /// ```
    pub fn into_inner(self) -> LockResult<T> {
        self.mutex.into_inner()
    }
}

pub(super) fn wrap<'a, T, const METERED: bool>(
    r: LockResult<std::sync::MutexGuard<'a, T>>,
    stamp: Option<Stamp>,
) -> LockResult<MeteredMutexGuard<'a, T, METERED>> {
    match r {
        Ok(guard) => Ok(MeteredMutexGuard {
            guard: ManuallyDrop::new(guard),
            stamp,
        }),
        Err(e) => Err(PoisonError::new(MeteredMutexGuard {
            guard: ManuallyDrop::new(e.into_inner()),
            stamp,
        })),
    }
}

impl<T: fmt::Debug, const METERED: bool> fmt::Debug for MeteredMutex<T, METERED> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredMutex")
            .field("name", &self.name)
            .field("mutex", &self.mutex)
            .finish()
    }
}

/// Access to a [`MeteredMutex`]'s value; records the hold and unlocks when dropped.
///
/// ```
/// let m = flowline::lockmeter::MeteredMutex::<_>::new(1);
/// assert_eq!(*m.lock().unwrap(), 1);
/// ```
pub type MeteredMutexGuard<'a, T, const METERED: bool = true> =
    MeteredGuard<std::sync::MutexGuard<'a, T>, METERED>;
