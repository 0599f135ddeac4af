//! The producer ends of the MPSC ring: reservations of runs by one compare-and-swap on
//! the shared tail, per-run publication, single pushes, bursts, bulk and chunks, clones
//! and the end's teardown.

use super::*;
use crate::fifo::PushError;

impl<T, W: WaitMode> Clone for Producer<T, W> {
    /// Another producer handle for another thread.
    fn clone(&self) -> Self {
        // Relaxed: a count of handles; the consumer's Acquire load of it when it reaches 0
        // pairs with the Release decrement in Drop.
        self.shared.cold.producers.fetch_add(1, Ordering::Relaxed);
        Producer {
            shared: self.shared.clone(),
            cached_head: self.cached_head,
            #[cfg(feature = "std")]
            strategy: self.strategy,
            // A clone starts with a full budget of the same size.
            #[cfg(feature = "async")]
            coop: self.coop.refilled(),
            // A clone has no read or write in progress.
            #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
            io: Default::default(),
            _mode: PhantomData,
        }
    }
}

impl<T, W: WaitMode> Drop for Producer<T, W> {
    fn drop(&mut self) {
        // A registration that an async write left (it returned `Pending`): withdrawn, its
        // waker dropped with no lock held, before the end's departure is published.
        #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
        if W::WAITS {
            self.io.withdraw(self.shared.room());
        }
        // Release: this handle's publications happen before a consumer that sees 0.
        self.shared.cold.producers.fetch_sub(1, Ordering::Release);
        // A consumer sleeping in `pop_wait` re-checks (the last producer's drop closes).
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.items.notify();
        }
    }
}

impl<T, W: WaitMode> Producer<T, W> {
    /// Reserves up to `want` slots with one successful CAS on `tail`; returns the start
    /// index and the number reserved (0 if the ring is full).
    #[inline]
    pub(super) fn reserve(&mut self, want: usize, all_or_nothing: bool) -> (u64, usize) {
        let cap = self.shared.slots as u64;
        let want64 = want.min(self.shared.slots) as u64;
        if all_or_nothing && want as u64 > cap {
            // Can never fit; nothing to reserve (and no shared line to touch).
            // Relaxed: the returned index is not used when nothing is reserved.
            return (self.shared.tail.load(Ordering::Relaxed), 0);
        }
        // Relaxed: the CAS below validates the value; nothing is read through it.
        let mut tail = self.shared.tail.load(Ordering::Relaxed);
        loop {
            let mut used = tail.wrapping_sub(self.cached_head);
            if used > cap || cap - used < want64 {
                // The cached head says too little is free (or is older than this tail
                // snapshot allows): refresh it. Acquire: pairs with the consumer's Release
                // head store, so its reads of the freed slots happen before we reuse them.
                self.cached_head = self.shared.head.load(Ordering::Acquire);
                used = tail.wrapping_sub(self.cached_head);
                if used > cap {
                    // The consumer is past this tail snapshot: the snapshot is stale.
                    tail = self.shared.tail.load(Ordering::Relaxed);
                    continue;
                }
            }
            let free = cap - used;
            let n = want64.min(free);
            if n == 0 || (all_or_nothing && n < want64) {
                return (tail, 0);
            }
            // Relaxed on both outcomes: the reservation only claims indices; the items are
            // published by the run's Release stamp, and slot reuse is ordered by `head`.
            match self.shared.tail.compare_exchange_weak(
                tail,
                tail.wrapping_add(n),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return (tail, n as usize),
                Err(t) => tail = t,
            }
        }
    }

    /// Publishes the run `[start, start + len)` whose first `valid` slots hold items.
    #[inline(always)]
    pub(super) fn publish(&self, start: u64, len: usize, valid: usize) {
        debug_assert!(valid <= len && len <= MAX_SLOTS);
        let r = self.shared.desc(start);
        // Relaxed: published by the Release stamp store just after.
        r.lens
            .store(((len as u64) << 32) | valid as u64, Ordering::Relaxed);
        // Release: pairs with the consumer's Acquire stamp load in `run_at`.
        r.stamp
            .store(self.shared.stamp_of(start), Ordering::Release);
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.items.notify();
        }
    }

    /// Appends `value`, or gives it back in [`PushError::Full`] if the ring is full.
    ///
    /// # Errors
    ///
    /// [`PushError::Full`], holding `value`, when the ring has no free slot.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel(1).unwrap();
    /// assert_eq!(tx.push(1), Ok(()));
    /// assert_eq!(tx.push(2), Err(flowline::fifo::PushError::Full(2)));
    /// ```
    #[inline]
    #[doc(alias = "try_send")]
    #[doc(alias = "send")]
    pub fn push(&mut self, value: T) -> Result<(), PushError<T>> {
        let (start, n) = self.reserve(1, true);
        if n == 0 {
            return Err(PushError::Full(value));
        }
        self.shared.tracker.write(self.shared.pos(start));
        // SAFETY: the slot was reserved by this handle's CAS and released by the consumer
        // (checked against `head`), so no one else reads or writes it until published.
        unsafe { (*self.shared.slot(start)).write(value) };
        self.publish(start, 1, 1);
        Ok(())
    }

    /// Reserves up to `n` slots to fill in place (fewer if fewer are free; possibly none).
    /// The reservation is published when the chunk is committed **or dropped**: the
    /// consumer stops at it until then, while other producers carry on.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// let mut c = tx.write_chunk(2);
    /// c.as_mut_slices().0[0].write(7);
    /// // SAFETY: one slot written above.
    /// unsafe { c.commit(1) };
    /// assert_eq!(rx.pop(), Some(7));
    /// ```
    #[inline]
    #[must_use = "a write chunk publishes nothing until it is committed"]
    pub fn write_chunk(&mut self, n: usize) -> WriteChunk<'_, T, W> {
        let (start, len) = self.reserve(n, false);
        WriteChunk {
            producer: self,
            start,
            len,
            written: 0,
            committed: false,
        }
    }

    /// Burst: copies as many items from the front of `items` as fit, in one reservation and
    /// one publication; returns how many.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert_eq!(tx.push_burst(&[1, 2, 3, 4, 5]), 4);
    /// ```
    #[inline]
    #[must_use = "the items past the count were not pushed"]
    pub fn push_burst(&mut self, items: &[T]) -> usize
    where
        T: Copy,
    {
        let mut c = self.write_chunk(items.len());
        let n = c.len;
        c.copy_from(&items[..n]);
        // SAFETY: all n slots initialised by copy_from.
        unsafe { c.commit(n) };
        n
    }

    /// Bulk: copies all of `items` and returns `true`, or nothing and returns `false`.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert!(!tx.push_bulk(&[1, 2, 3, 4, 5]));
    /// assert!(tx.push_bulk(&[1, 2, 3, 4]));
    /// ```
    #[inline]
    #[must_use = "`false`: nothing was pushed"]
    pub fn push_bulk(&mut self, items: &[T]) -> bool
    where
        T: Copy,
    {
        let (start, n) = self.reserve(items.len(), true);
        if n == 0 && !items.is_empty() {
            return false;
        }
        let mut c = WriteChunk {
            producer: self,
            start,
            len: n,
            written: 0,
            committed: false,
        };
        c.copy_from(items);
        // SAFETY: all n slots initialised by copy_from.
        unsafe { c.commit(n) };
        true
    }

    /// Burst from a `Vec`: moves as many items as fit from the front of `items` into the
    /// ring (one reservation, published as one run) and returns how many; the items that
    /// did not fit stay in `items`, in order. Items of any type move as bytes (two copies at
    /// most, and one more to close the gap when some did not fit): no per-item code runs,
    /// so nothing can panic half-way.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<String>(2).unwrap();
    /// let mut v = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    /// assert_eq!(tx.push_burst_from(&mut v), 2);
    /// assert_eq!(v, ["c"]);
    /// assert_eq!(rx.pop().as_deref(), Some("a"));
    /// ```
    #[inline]
    pub fn push_burst_from(&mut self, items: &mut Vec<T>) -> usize {
        let mut chunk = self.write_chunk(items.len());
        let n = chunk.len();
        let (a, b) = chunk.as_mut_slices();
        // SAFETY: the chunk was reserved for at most `items.len()` slots, so its runs hold
        // `n <= items.len()`; `move_front_into_runs` wrote all `n`, which `commit` publishes.
        unsafe {
            raw::move_front_into_runs(items, a, b);
            chunk.commit(n);
        }
        n
    }

    /// Burst from an iterator: reserves as many slots as are free (at most the iterator's
    /// upper size bound), moves items in until either runs out and publishes them; returns
    /// how many. Leftover items stay in the iterator; reserved slots it did not fill are
    /// published empty.
    ///
    /// While the iterator runs, the reserved slots are this producer's, as a
    /// [`write_chunk`](Self::write_chunk)'s are: other producers find that room taken, and
    /// the consumer stops at this run until it is published. An iterator without an upper
    /// bound reserves all free room, so it should not wait on this ring or on anything
    /// that waits on it; give a bounded iterator (`take(n)`) to reserve less.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<String>(2).unwrap();
    /// let mut it = ["a", "b", "c"].iter().map(|s| s.to_string());
    /// assert_eq!(tx.push_burst_iter(&mut it), 2);
    /// assert_eq!(it.next().as_deref(), Some("c"));
    /// ```
    pub fn push_burst_iter<I: Iterator<Item = T>>(&mut self, iter: &mut I) -> usize {
        let want = iter
            .size_hint()
            .1
            .unwrap_or(usize::MAX)
            .min(self.shared.slots);
        if want == 0 {
            return 0;
        }
        self.write_chunk(want).fill_from_iter(iter)
    }

    /// Bulk from an exact-size iterator: all its items, or none (the iterator comes back).
    /// An iterator that yields fewer than its `len()` leaves the rest of its run empty.
    ///
    /// # Errors
    ///
    /// The iterator, not read, when its `len()` items do not fit.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<Box<u8>>(2).unwrap();
    /// assert!(tx.push_bulk_iter(vec![Box::new(1), Box::new(2), Box::new(3)]).is_err());
    /// assert!(tx.push_bulk_iter(vec![Box::new(1)]).is_ok());
    /// ```
    pub fn push_bulk_iter<I>(&mut self, iter: I) -> Result<(), I::IntoIter>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: ExactSizeIterator,
    {
        let iter = iter.into_iter();
        let n = iter.len();
        let (start, got) = self.reserve(n, true);
        if got == 0 && n != 0 {
            return Err(iter);
        }
        WriteChunk {
            producer: self,
            start,
            len: got,
            written: 0,
            committed: false,
        }
        .fill_from_iter(&mut iter.take(n));
        Ok(())
    }

    /// Slots the ring has.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::mpsc::channel::<u8>(3).unwrap().0.capacity(), 4);
    /// ```
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.shared.slots
    }

    /// Slots reserved or published and not yet released by the consumer (a snapshot):
    /// slots that single pops consumed count until the consumer releases them (see "Lazy
    /// release" in the [module docs](super)).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(tx.len(), 1);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        ring_len(&self.shared)
    }

    /// Free slots (a snapshot).
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert_eq!(tx.free(), 4);
    /// ```
    #[must_use]
    pub fn free(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Whether nothing is in the ring (a snapshot).
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert!(tx.is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the ring is full now (a snapshot).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(1).unwrap();
    /// tx.push(0).unwrap();
    /// assert!(tx.is_full());
    /// ```
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.free() == 0
    }

    /// Whether the consumer has been dropped.
    ///
    /// ```
    /// let (tx, rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// drop(rx);
    /// assert!(tx.is_abandoned());
    /// ```
    #[must_use]
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release store in the consumer's Drop.
        self.shared.cold.consumer_gone.load(Ordering::Acquire)
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
        self.shared.cold.consumer_gone.load(Ordering::Relaxed)
    }
}

fn ring_len<T>(shared: &Shared<T>) -> usize {
    // Acquire on head pairs with the consumer's Release store; tail is read Relaxed (a
    // snapshot). Load head first so that tail - head never underflows.
    let head = shared.head.load(Ordering::Acquire);
    let tail = shared.tail.load(Ordering::Relaxed);
    tail.wrapping_sub(head).min(shared.slots as u64) as usize
}

impl<T, W: WaitMode> fmt::Debug for Producer<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::Producer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}
