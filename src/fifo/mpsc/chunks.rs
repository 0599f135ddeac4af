//! Zero-copy chunks of the MPSC ring: a reserved run to fill in place ([`WriteChunk`],
//! published at its commit, or as empty slots if dropped) and published items to read in
//! place ([`ReadChunk`]).

use super::*;

/// Slots reserved by [`Producer::write_chunk`]: fill them in place, then `commit`.
///
/// Dropping the chunk publishes the reservation with no items (the consumer skips it);
/// values written and not committed are not dropped (as with any `MaybeUninit`).
/// Leaking the chunk (`mem::forget`) leaves the reservation unpublished forever: the
/// consumer stops there, and a drain loop waiting for `is_abandoned() && is_empty()`
/// never ends (the leaked reservation still counts in `len`).
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(4).unwrap();
/// let n = tx.write_chunk(2).fill_from_iter(&mut [5, 6].into_iter());
/// assert_eq!((n, rx.pop()), (2, Some(5)));
/// ```
pub struct WriteChunk<'a, T, W: WaitMode = NoWait> {
    pub(super) producer: &'a mut Producer<T, W>,
    pub(super) start: u64,
    pub(super) len: usize,
    /// Slots `fill_from_iter` has initialised so far: published by `Drop` if it unwinds.
    pub(super) written: usize,
    pub(super) committed: bool,
}

impl<T, W: WaitMode> WriteChunk<'_, T, W> {
    /// Slots reserved.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(2).unwrap();
    /// assert_eq!(tx.write_chunk(5).len(), 2);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was reserved (the ring was full).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(1).unwrap();
    /// tx.push(1).unwrap();
    /// assert!(tx.write_chunk(1).is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The reserved slots as (at most) two runs in ring order.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// let mut c = tx.write_chunk(3);
    /// assert_eq!(c.as_mut_slices().0.len(), 3);
    /// ```
    pub fn as_mut_slices(&mut self) -> (&mut [MaybeUninit<T>], &mut [MaybeUninit<T>]) {
        let sh = &*self.producer.shared;
        sh.tracker
            .write_each(self.len, |k| sh.pos(self.start.wrapping_add(k as u64)));
        let runs = raw::split_runs(sh.buf, sh.slots, sh.pos(self.start), self.len);
        // SAFETY: the `len` slots from `start` lie in `[start, start + len)`, which this
        // handle's CAS on the reservation index took past every other producer's and below
        // the consumer's Release-stored `head` + slots: free, and this handle's alone until
        // it publishes their run descriptor; borrowed through `&mut self`.
        unsafe { raw::runs_mut(runs) }
    }

    pub(super) fn copy_from(&mut self, items: &[T])
    where
        T: Copy,
    {
        let (a, b) = self.as_mut_slices();
        raw::copy_into_runs(items, a, b);
    }

    /// Publishes the reservation with its first `k` slots as items; the other slots of the
    /// reservation are published empty.
    ///
    /// # Safety
    ///
    /// The first `k` slots (in ring order) were initialised through
    /// [`as_mut_slices`](WriteChunk::as_mut_slices).
    ///
    /// # Panics
    ///
    /// If `k > self.len()`.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// let mut c = tx.write_chunk(3);
    /// c.as_mut_slices().0[0].write(1);
    /// // SAFETY: slot 0 written above.
    /// unsafe { c.commit(1) };
    /// assert_eq!((rx.pop(), rx.pop()), (Some(1), None));
    /// ```
    pub unsafe fn commit(mut self, k: usize) {
        assert!(
            k <= self.len,
            "WriteChunk::commit({k}) but only {} slots were reserved",
            self.len
        );
        self.finish(k);
    }

    pub(super) fn finish(&mut self, k: usize) {
        if self.committed {
            return;
        }
        // Marked first: if the publication unwinds (a consumer task's waker panicking in
        // the wake-up), `Drop` must not publish the run a second time (a second descriptor
        // with fewer valid items would make the consumer skip the published ones).
        self.committed = true;
        if self.len > 0 {
            self.producer.publish(self.start, self.len, k);
        }
    }

    /// Moves items from `iter` into the reserved slots until either runs out, publishes
    /// the reservation, and returns how many items it holds. If `iter.next()` panics, the
    /// items moved in before it are published (none is leaked or dropped twice).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<String>(4).unwrap();
    /// let n = tx.write_chunk(2).fill_from_iter(&mut ["x".to_string()].into_iter());
    /// assert_eq!(n, 1);
    /// assert_eq!(rx.pop().as_deref(), Some("x"));
    /// ```
    pub fn fill_from_iter<I: Iterator<Item = T>>(mut self, iter: &mut I) -> usize {
        while self.written < self.len {
            let Some(v) = iter.next() else { break };
            let sh = &*self.producer.shared;
            let index = self.start.wrapping_add(self.written as u64);
            sh.tracker.write(sh.pos(index));
            // SAFETY: `index` is in `[start, start + len)` (written < len), the slots this
            // handle's CAS reserved below the consumer's `head` + slots: free, and this
            // handle's alone until published; counted right after, so `Drop` publishes
            // only initialised slots if a later `next()` unwinds.
            unsafe { (*sh.slot(index)).write(v) };
            self.written += 1;
        }
        let n = self.written;
        self.finish(n);
        n
    }

    /// Fills every reserved slot with what `f` returns, in order, publishes them and returns
    /// how many: the safe way to write a chunk without an iterator at hand. If `f` panics,
    /// the items made before it are published (as [`fill_from_iter`](Self::fill_from_iter)).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(4).unwrap();
    /// let mut next = 0;
    /// assert_eq!(tx.write_chunk(3).fill_with(|| { next += 1; next }), 3);
    /// assert_eq!((rx.pop(), rx.pop(), rx.pop()), (Some(1), Some(2), Some(3)));
    /// ```
    pub fn fill_with(self, f: impl FnMut() -> T) -> usize {
        self.fill_from_iter(&mut core::iter::repeat_with(f))
    }

    /// Fills every reserved slot with `T::default()`, publishes them and returns how many
    /// (rtrb's chunks for `T: Default` start out so).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<[u8; 4]>(4).unwrap();
    /// assert_eq!(tx.write_chunk(2).fill_default(), 2);
    /// assert_eq!(rx.pop(), Some([0; 4]));
    /// ```
    pub fn fill_default(self) -> usize
    where
        T: Default,
    {
        self.fill_with(T::default)
    }
}

impl<T, W: WaitMode> Drop for WriteChunk<'_, T, W> {
    fn drop(&mut self) {
        // An uncommitted reservation is published with what `fill_from_iter` wrote (none
        // for a chunk filled by hand) so the consumer can pass it.
        let n = self.written;
        self.finish(n);
    }
}

impl<T, W: WaitMode> fmt::Debug for WriteChunk<'_, T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::WriteChunk")
            .field("len", &self.len)
            .finish()
    }
}

/// Published items lent in place by [`Consumer::read_chunk`], released by `commit`.
///
/// Dropping a chunk without committing releases nothing: the items stay in the ring, and
/// the next read sees them again.
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(4).unwrap();
/// tx.push_burst(&[1, 2]);
/// let c = rx.read_chunk(4);
/// assert_eq!(c.len(), 2);
/// c.commit(1);
/// assert_eq!(rx.pop(), Some(2));
/// ```
pub struct ReadChunk<'a, T, W: WaitMode = NoWait> {
    pub(super) consumer: &'a mut Consumer<T, W>,
    pub(super) len: usize,
}

impl<T, W: WaitMode> ReadChunk<'_, T, W> {
    /// Items lent (at most the `n` asked for).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.read_chunk(3).len(), 1);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no item was ready.
    ///
    /// ```
    /// let (_tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert!(rx.read_chunk(3).is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn raw_runs(&self) -> (*mut [T], *mut [T]) {
        let c = &*self.consumer;
        let sh = &*c.shared;
        sh.tracker
            .read_each(self.len, |k| sh.pos(c.head.wrapping_add(k as u64)));
        sh.runs_of(c.head, self.len)
    }

    /// The lent items as (at most) two runs in ring order.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(2).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// rx.pop();
    /// tx.push(3).unwrap(); // wraps
    /// let c = rx.read_chunk(2);
    /// assert_eq!(c.as_slices(), (&[2][..], &[3][..]));
    /// ```
    #[must_use]
    pub fn as_slices(&self) -> (&[T], &[T]) {
        let (a, b) = self.raw_runs();
        // SAFETY: the `len` slots from `head` hold published, initialised items of runs
        // the consumer took (Acquire in `run_at`) that no producer touches until they are
        // released; the runs are disjoint and in bounds, borrowed for the chunk's lifetime.
        unsafe { (&*a, &*b) }
    }

    /// The lent items as mutable runs, to modify packets in place before releasing them
    /// (or before dropping the chunk, which leaves them in the ring, modified).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(2).unwrap();
    /// tx.push(1).unwrap();
    /// rx.read_chunk(1).as_mut_slices().0[0] = 9;
    /// assert_eq!(rx.pop(), Some(9));
    /// ```
    pub fn as_mut_slices(&mut self) -> (&mut [T], &mut [T]) {
        let (a, b) = self.raw_runs();
        // SAFETY: as in `as_slices`, and `&mut self` makes the borrow exclusive.
        unsafe { (&mut *a, &mut *b) }
    }

    /// Drops the first `k` lent items in place and releases their slots to the producers
    /// with one index store. If an item's `Drop` panics, the other items are still dropped
    /// and all `k` are released (none is ever seen or dropped again).
    ///
    /// # Panics
    ///
    /// If `k > self.len()`.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// tx.push_burst(&[1, 2, 3]);
    /// rx.read_chunk(3).commit(2);
    /// assert_eq!(rx.pop(), Some(3));
    /// ```
    pub fn commit(self, k: usize) {
        assert!(
            k <= self.len,
            "ReadChunk::commit({k}) but only {} items were lent",
            self.len
        );
        /// Passes and releases the items when it goes out of scope: after their
        /// destructors ran, or while unwinding from one that panicked.
        struct Release<'a, T, W: WaitMode> {
            consumer: &'a mut Consumer<T, W>,
            n: usize,
        }
        impl<T, W: WaitMode> Drop for Release<'_, T, W> {
            fn drop(&mut self) {
                let c = &mut *self.consumer;
                c.head = c.head.wrapping_add(self.n as u64);
                c.release();
            }
        }
        let sh = &*self.consumer.shared;
        sh.tracker
            .write_each(k, |i| sh.pos(self.consumer.head.wrapping_add(i as u64)));
        let (a, b) = sh.runs_of(self.consumer.head, k);
        let _release = Release {
            consumer: self.consumer,
            n: k,
        };
        if core::mem::needs_drop::<T>() {
            // SAFETY: the k slots from `head` hold published items lent to this chunk (two
            // disjoint in-bounds runs); `_release` passes them after the drops, also on
            // unwind, so each is dropped exactly once and reused only after.
            unsafe { raw::drop_runs(a, b) };
        }
    }

    /// Drops all lent items and releases their slots.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// rx.read_chunk(4).commit_all();
    /// assert!(rx.is_empty());
    /// ```
    pub fn commit_all(self) {
        let n = self.len;
        self.commit(n);
    }
}

impl<T, W: WaitMode> fmt::Debug for ReadChunk<'_, T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::ReadChunk")
            .field("len", &self.len)
            .finish()
    }
}

/// The items of a [`ReadChunk`] moved out one at a time, oldest first: the chunk's
/// `IntoIterator`. Dropping it releases the slots of the items it yielded with one index
/// store; the items it did not yield stay in the ring. (A forgotten iterator releases
/// nothing, but the items it yielded are never read again.)
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<String>(4).unwrap();
/// tx.push("a".to_string()).unwrap();
/// tx.push("b".to_string()).unwrap();
/// let mut it = rx.read_chunk(2).into_iter();
/// assert_eq!(it.next().as_deref(), Some("a"));
/// drop(it);
/// assert_eq!(rx.pop().as_deref(), Some("b"));
/// ```
pub struct ReadChunkIntoIter<'a, T, W: WaitMode = NoWait> {
    consumer: &'a mut Consumer<T, W>,
    /// Items not yet yielded.
    left: usize,
}

impl<'a, T, W: WaitMode> IntoIterator for ReadChunk<'a, T, W> {
    type Item = T;
    type IntoIter = ReadChunkIntoIter<'a, T, W>;

    fn into_iter(self) -> ReadChunkIntoIter<'a, T, W> {
        ReadChunkIntoIter {
            consumer: self.consumer,
            left: self.len,
        }
    }
}

impl<T, W: WaitMode> Iterator for ReadChunkIntoIter<'_, T, W> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.left == 0 {
            return None;
        }
        let c = &mut *self.consumer;
        let sh = &*c.shared;
        sh.tracker.read(sh.pos(c.head));
        // SAFETY: the chunk lent the `left` published items from `head`; this one is read
        // once: `head` moves past it at once, so no later read of this end sees it again
        // (the slot is released to the producers by `Drop`, or by this end's next release).
        let v = unsafe { (*sh.slot(c.head)).assume_init_read() };
        c.head = c.head.wrapping_add(1);
        self.left -= 1;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T, W: WaitMode> ExactSizeIterator for ReadChunkIntoIter<'_, T, W> {}

impl<T, W: WaitMode> Drop for ReadChunkIntoIter<'_, T, W> {
    fn drop(&mut self) {
        self.consumer.release_pending();
    }
}

impl<T, W: WaitMode> fmt::Debug for ReadChunkIntoIter<'_, T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadChunkIntoIter")
            .field("left", &self.left)
            .finish()
    }
}
