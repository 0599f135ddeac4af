//! The consumer end of the niche ring: a pop is a load of its slot and, for an item, one
//! store of null (FastForward's consumer), single or in bursts, and the end's teardown.

use super::*;

impl<T: Niche> Consumer<T> {
    #[inline(always)]
    pub(super) fn slot(&self, index: usize) -> &AtomicPtr<()> {
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
    pub(super) fn take(&mut self, raw: NonNull<()>) -> T {
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
    #[must_use = "the item is dropped if it is not used"]
    #[doc(alias = "try_recv")]
    #[doc(alias = "recv")]
    pub fn pop(&mut self) -> Option<T> {
        let raw = self.peek_raw(0)?;
        Some(self.take(raw))
    }

    /// Takes the oldest item, or says why there is none: [`PopError::Empty`] for now, or
    /// [`PopError::Disconnected`] once the producer is gone and everything it pushed was taken.
    ///
    /// # Errors
    ///
    /// [`PopError::Empty`] while the ring is empty; [`PopError::Disconnected`] once it is
    /// empty and the producer is gone.
    ///
    /// ```
    /// use flowline::fifo::PopError;
    /// let (mut tx, mut rx) = flowline::fifo::niche::channel::<&u32>(4).unwrap();
    /// tx.push(&7).unwrap();
    /// drop(tx);
    /// assert_eq!(rx.try_pop(), Ok(&7));
    /// assert_eq!(rx.try_pop(), Err(PopError::Disconnected));
    /// ```
    #[doc(alias = "try_recv")]
    pub fn try_pop(&mut self) -> Result<T, PopError> {
        if let Some(v) = self.pop() {
            return Ok(v);
        }
        if !self.is_abandoned() {
            return Err(PopError::Empty);
        }
        // The producers' last items are published before they are gone (Acquire in
        // `is_abandoned`): look once more.
        self.pop().ok_or(PopError::Disconnected)
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
    #[must_use = "only the first items of `out` hold items: how many is the count"]
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
    pub(super) fn has(&self, n: usize) -> bool {
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
    #[must_use = "`false`: nothing was taken"]
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
    #[must_use = "`false`: nothing was taken"]
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
    #[must_use]
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
    #[must_use]
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
    #[must_use]
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
