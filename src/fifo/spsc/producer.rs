//! The producer end of the SPSC ring: free-slot accounting against a cached copy of the
//! consumer's index, single pushes, bursts, bulk and chunk reservations, and the end's
//! teardown.

use super::*;
use crate::fifo::PushError;

impl<T, W: WaitMode> Producer<T, W> {
    /// Index stores this end made (publications of `tail`) and loads of the consumer's
    /// index that found it moved (each a transfer of that line to this core), counted
    /// under `--cfg flowline_lines` for the distributor's line counts.
    #[cfg(all(feature = "std", feature = "__test_hooks"))]
    pub(crate) fn line_counts(&self) -> Option<(usize, usize)> {
        self.lines.counts()
    }

    /// Free slots, reloading the consumer's index only if the cached view has fewer than
    /// `want`.
    #[inline(always)]
    pub(super) fn free_for(&mut self, want: usize) -> usize {
        let cap = self.mask + 1;
        let free = cap - self.tail.wrapping_sub(self.cached_head);
        if free >= want {
            return free;
        }
        // Acquire: pairs with the consumer's Release store of `head`, so its reads (and
        // drops) of the slots it released happen before this end overwrites them.
        let head = self.shared.head.load(Ordering::Acquire);
        self.lines.loaded(head != self.cached_head);
        self.cached_head = head;
        cap - self.tail.wrapping_sub(self.cached_head)
    }

    #[inline(always)]
    pub(super) fn slot(&self, index: usize) -> *mut MaybeUninit<T> {
        // SAFETY: `index & mask` is below the slot count, so the result is in bounds of the
        // allocation.
        unsafe { self.buf.add(index & self.mask) }
    }

    /// Makes `n` more written slots visible to the consumer. Nothing to publish (a burst
    /// into a full ring, an empty chunk commit) stores nothing: rewriting the value already
    /// there would still take the index line from the consumer that polls it.
    #[inline(always)]
    pub(super) fn publish(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.tail = self.tail.wrapping_add(n);
        self.lines.stored();
        // Release: pairs with the consumer's Acquire load of `tail`, so the slot writes
        // before this store are visible to it.
        self.shared.tail.store(self.tail, Ordering::Release);
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.tail.notify();
        }
    }

    /// Appends `value`, or gives it back in [`PushError::Full`] if the ring is full.
    ///
    /// # Errors
    ///
    /// [`PushError::Full`], holding `value`, when the ring has no free slot.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel(1).unwrap();
    /// assert_eq!(tx.push(1), Ok(()));
    /// assert_eq!(tx.push(2), Err(flowline::fifo::PushError::Full(2)));
    /// ```
    #[inline]
    #[doc(alias = "try_send")]
    #[doc(alias = "send")]
    pub fn push(&mut self, value: T) -> Result<(), PushError<T>> {
        if self.free_for(1) == 0 {
            return Err(PushError::Full(value));
        }
        self.shared.tracker.write(self.tail & self.mask);
        // SAFETY: the slot at `tail` is free (the consumer released it, Acquire above) and
        // only this end writes free slots.
        unsafe { (*self.slot(self.tail)).write(value) };
        self.publish(1);
        Ok(())
    }

    /// Reserves up to `n` free slots to fill in place (fewer if fewer are free; possibly
    /// none). Nothing is visible to the consumer until [`WriteChunk::commit`].
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
    /// let mut chunk = tx.write_chunk(3);
    /// let (a, b) = chunk.as_mut_slices();
    /// for (i, s) in a.iter_mut().chain(b.iter_mut()).enumerate() {
    ///     s.write(i as u32);
    /// }
    /// // SAFETY: all three slots were written just above.
    /// unsafe { chunk.commit(3) };
    /// assert_eq!(rx.pop(), Some(0));
    /// ```
    #[inline]
    #[must_use = "a write chunk publishes nothing until it is committed"]
    pub fn write_chunk(&mut self, n: usize) -> WriteChunk<'_, T, W> {
        let len = self.free_for(n).min(n);
        WriteChunk {
            producer: self,
            len,
        }
    }

    /// Burst: copies as many items from the front of `items` as fit, publishes them with one
    /// index store, and returns how many.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert_eq!(tx.push_burst(&[1, 2, 3]), 3);
    /// assert_eq!(tx.push_burst(&[4, 5, 6]), 1);
    /// ```
    #[inline(always)]
    #[must_use = "the items past the count were not pushed"]
    pub fn push_burst(&mut self, items: &[T]) -> usize
    where
        T: Copy,
    {
        let mut chunk = self.write_chunk(items.len());
        let n = chunk.len;
        chunk.copy_from(&items[..n]);
        // SAFETY: `copy_from` initialised all `n` slots of the chunk.
        unsafe { chunk.commit(n) };
        n
    }

    /// Bulk: copies all of `items` and returns `true`, or copies nothing and returns `false`
    /// if they do not all fit.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert!(tx.push_bulk(&[1, 2, 3]));
    /// assert!(!tx.push_bulk(&[4, 5]));
    /// assert!(tx.push_bulk(&[4]));
    /// ```
    #[inline]
    #[must_use = "`false`: nothing was pushed"]
    pub fn push_bulk(&mut self, items: &[T]) -> bool
    where
        T: Copy,
    {
        if self.free_for(items.len()) < items.len() {
            return false;
        }
        let _ = self.push_burst(items);
        true
    }

    /// Burst from a `Vec`: moves as many items as fit from the front of `items` into the
    /// ring, publishes them with one index store, and returns how many; the items that did
    /// not fit stay in `items`, in order. Items of any type move as bytes (two copies at
    /// most, and one more to close the gap when some did not fit): no per-item code runs,
    /// so nothing can panic half-way.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<String>(2).unwrap();
    /// let mut v = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    /// assert_eq!(tx.push_burst_from(&mut v), 2);
    /// assert_eq!(v, ["c"]);
    /// assert_eq!(rx.pop().as_deref(), Some("a"));
    /// ```
    #[inline]
    pub fn push_burst_from(&mut self, items: &mut Vec<T>) -> usize {
        let mut chunk = self.write_chunk(items.len());
        let n = chunk.len;
        let (a, b) = chunk.as_mut_slices();
        // SAFETY: the chunk was reserved for at most `items.len()` slots, so its runs hold
        // `n <= items.len()`; `move_front_into_runs` wrote all `n`, which `commit` publishes.
        unsafe {
            raw::move_front_into_runs(items, a, b);
            chunk.commit(n);
        }
        n
    }

    /// Burst from an iterator: moves items from `iter` into the free slots until either runs
    /// out, publishes them at once, and returns how many. Items that did not fit stay in the
    /// iterator (it is never advanced past what was stored).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<String>(2).unwrap();
    /// let mut words = ["a", "b", "c"].iter().map(|s| s.to_string());
    /// assert_eq!(tx.push_burst_iter(&mut words), 2);
    /// assert_eq!(words.next().as_deref(), Some("c"));
    /// ```
    pub fn push_burst_iter<I: Iterator<Item = T>>(&mut self, iter: &mut I) -> usize {
        let free = self.free_for(usize::MAX);
        self.write_chunk(free).fill_from_iter(iter)
    }

    /// Bulk from an exact-size iterator: stores all its items and returns `Ok`, or stores
    /// nothing and gives the iterator back if `iter.len()` items do not fit. If the iterator
    /// yields fewer items than its `len()` promised, those are stored; it is never read
    /// beyond `len()` items.
    ///
    /// # Errors
    ///
    /// The iterator, not read, when its `len()` items do not fit.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<Box<u8>>(2).unwrap();
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
        if self.free_for(n) < n {
            return Err(iter);
        }
        self.write_chunk(n).fill_from_iter(&mut iter.take(n));
        Ok(())
    }

    /// Slots the ring has: the requested capacity rounded up to a power of two.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::spsc::channel::<u8>(5).unwrap().0.capacity(), 8);
    /// ```
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Items in the ring now (a snapshot: the consumer may take more meanwhile, so the true
    /// value can only be lower). Reads the consumer's line.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(tx.len(), 1);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        // Acquire: pairs with the consumer's Release `head` store (a fresh view of it).
        self.tail
            .wrapping_sub(self.shared.head.load(Ordering::Acquire))
    }

    /// Free slots now (a snapshot: the true value can only be higher). Reads the consumer's
    /// line.
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert_eq!(tx.free(), 4);
    /// ```
    #[must_use]
    pub fn free(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Whether the ring is empty now (a snapshot).
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert!(tx.is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the ring is full now (a snapshot).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(1).unwrap();
    /// tx.push(0).unwrap();
    /// assert!(tx.is_full());
    /// ```
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.free() == 0
    }

    /// Whether the consumer has been dropped: nothing pushed from now on will be read.
    ///
    /// ```
    /// let (tx, rx) = flowline::fifo::spsc::channel::<u8>(1).unwrap();
    /// drop(rx);
    /// assert!(tx.is_abandoned());
    /// ```
    #[must_use]
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release store in the consumer's Drop.
        self.shared.consumer_gone.load(Ordering::Acquire)
    }

    /// `is_abandoned` for the waiting pushes' fast path, which on `true` only gives its
    /// item back: a Relaxed load (no edge needed: nothing the consumer wrote is read
    /// after it), so the compiler keeps this end's fields in registers across it, which
    /// an Acquire load makes it reload.
    #[cfg(feature = "std")]
    #[inline(always)]
    pub(super) fn consumer_gone_now(&self) -> bool {
        // Relaxed: see above; the wait loop's checks that can end in Disconnected after a
        // failed push use the Acquire form.
        self.shared.consumer_gone.load(Ordering::Relaxed)
    }
}

impl<T, W: WaitMode> Drop for Producer<T, W> {
    /// One out-of-line call with the shared state by value: a drop this small is inlined
    /// even into unwinding paths, so a loop that owns this end never gives its address
    /// away (see `sync::HandleArc`).
    #[inline]
    fn drop(&mut self) {
        // A registration that an async write left (it returned `Pending`): withdrawn, its
        // waker dropped with no lock held, before the end's departure is published.
        #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
        if W::WAITS {
            self.io.withdraw(self.shared.room());
        }
        // SAFETY: taken once, here, and the field is not used again.
        let shared = unsafe { ManuallyDrop::take(&mut self.shared) };
        producer_gone::<T, W>(shared);
    }
}

/// What dropping a [`Producer`] does, given its share of the ring.
#[inline(never)]
// `W` says whether to wake a sleeper, which only a build with `std` can have.
#[cfg_attr(not(feature = "std"), allow(clippy::extra_unused_type_parameters))]
pub(super) fn producer_gone<T, W: WaitMode>(shared: HandleArc<Shared<T>>) {
    // Release: everything this end published happens before a consumer that sees the flag
    // (it then reads the final `tail`).
    shared.producer_gone.store(true, Ordering::Release);
    // A consumer sleeping in `pop_wait` learns that nothing more will come.
    #[cfg(feature = "std")]
    if W::WAITS {
        shared.tail.notify();
    }
}

impl<T, W: WaitMode> fmt::Debug for Producer<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spsc::Producer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}
