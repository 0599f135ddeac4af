//! Zero-copy chunks of the SPSC ring: slots reserved to fill in place ([`WriteChunk`])
//! or published items to read in place ([`ReadChunk`]), as in rtrb's chunk API, each made
//! visible to the other end with one index store at its commit.

use super::*;

/// Slots reserved by [`Producer::write_chunk`], filled in place and published by `commit`.
///
/// Dropping a chunk without committing publishes nothing; values written into its slots
/// are then *not* dropped (as with any `MaybeUninit`), and the slots are reused by the next
/// write. For `T` with a destructor, commit what you wrote or use
/// [`fill_from_iter`](WriteChunk::fill_from_iter).
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
/// let n = tx.write_chunk(2).fill_from_iter(&mut [5, 6].into_iter());
/// assert_eq!((n, rx.pop()), (2, Some(5)));
/// ```
pub struct WriteChunk<'a, T, W: WaitMode = NoWait> {
    pub(super) producer: &'a mut Producer<T, W>,
    pub(super) len: usize,
}

impl<T, W: WaitMode> WriteChunk<'_, T, W> {
    /// Slots reserved (at most the `n` asked for).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(2).unwrap();
    /// assert_eq!(tx.write_chunk(5).len(), 2);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no slot was reserved (the ring was full).
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(1).unwrap();
    /// tx.push(1).unwrap();
    /// assert!(tx.write_chunk(1).is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The reserved slots as (at most) two runs, in ring order: the second is non-empty only
    /// when the reservation wraps around the end of the buffer.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// let mut c = tx.write_chunk(4);
    /// let (a, b) = c.as_mut_slices();
    /// assert_eq!(a.len() + b.len(), 4);
    /// ```
    pub fn as_mut_slices(&mut self) -> (&mut [MaybeUninit<T>], &mut [MaybeUninit<T>]) {
        let p = &*self.producer;
        let start = p.tail;
        p.shared
            .tracker
            .write_each(self.len, |k| start.wrapping_add(k) & p.mask);
        let runs = raw::split_runs(p.buf, p.mask + 1, start & p.mask, self.len);
        // SAFETY: the `len` slots from `tail` lie in `[tail, released head + slots)`: free
        // (`free_for` checked them against the consumer's Release-stored `head`), so no
        // consumer reads them, and this producer's alone until its Release store of `tail`
        // publishes them; borrowed mutably through `&mut self`.
        unsafe { raw::runs_mut(runs) }
    }

    pub(super) fn copy_from(&mut self, items: &[T])
    where
        T: Copy,
    {
        let (a, b) = self.as_mut_slices();
        raw::copy_into_runs(items, a, b);
    }

    /// Publishes the first `k` reserved slots to the consumer with one index store.
    ///
    /// # Safety
    ///
    /// The first `k` slots of the chunk (in ring order: the first run, then the second) must
    /// have been initialised through [`as_mut_slices`](WriteChunk::as_mut_slices).
    ///
    /// # Panics
    ///
    /// If `k > self.len()`.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(2).unwrap();
    /// let mut c = tx.write_chunk(2);
    /// c.as_mut_slices().0[0].write(7);
    /// // SAFETY: slot 0 was written just above.
    /// unsafe { c.commit(1) };
    /// assert_eq!(rx.pop(), Some(7));
    /// assert_eq!(rx.pop(), None);
    /// ```
    pub unsafe fn commit(self, k: usize) {
        assert!(
            k <= self.len,
            "WriteChunk::commit({k}) but only {} slots were reserved",
            self.len
        );
        self.producer.publish(k);
    }

    /// Moves items from `iter` into the reserved slots, in order, until either runs out;
    /// publishes them and returns how many. The iterator is not advanced past the last item
    /// stored. If `iter.next()` panics, the items moved in before it are published (the
    /// consumer gets them; none is leaked or dropped twice).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<String>(4).unwrap();
    /// let n = tx.write_chunk(3).fill_from_iter(&mut ["x".to_string()].into_iter());
    /// assert_eq!(n, 1);
    /// assert_eq!(rx.pop().as_deref(), Some("x"));
    /// ```
    pub fn fill_from_iter<I: Iterator<Item = T>>(self, iter: &mut I) -> usize {
        /// Publishes the items moved in so far when it goes out of scope: at the end, or
        /// if `iter.next()` panics (they are then consumed normally, never leaked).
        struct Publish<'a, T, W: WaitMode> {
            producer: &'a mut Producer<T, W>,
            n: usize,
        }
        impl<T, W: WaitMode> Drop for Publish<'_, T, W> {
            fn drop(&mut self) {
                self.producer.publish(self.n);
            }
        }
        let len = self.len;
        let mut g = Publish {
            producer: self.producer,
            n: 0,
        };
        while g.n < len {
            let Some(v) = iter.next() else { break };
            let p = &*g.producer;
            let index = p.tail.wrapping_add(g.n);
            p.shared.tracker.write(index & p.mask);
            // SAFETY: `index` is in `[tail, tail + len)` (n < len), free slots below the
            // consumer's released `head` + slots (`free_for`), this producer's alone until
            // its `tail` store; counted right after the write, so the guard publishes only
            // initialised slots.
            unsafe { (*p.slot(index)).write(v) };
            g.n += 1;
        }
        g.n
    }

    /// Fills every reserved slot with what `f` returns, in order, publishes them and returns
    /// how many: the safe way to write a chunk without an iterator at hand. If `f` panics,
    /// the items made before it are published (as [`fill_from_iter`](Self::fill_from_iter)).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
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
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<[u8; 4]>(4).unwrap();
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

impl<T, W: WaitMode> fmt::Debug for WriteChunk<'_, T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteChunk")
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
/// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
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
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.read_chunk(3).len(), 1);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no item was available.
    ///
    /// ```
    /// let (_tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert!(rx.read_chunk(3).is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn raw_runs(&self) -> (*mut [T], *mut [T]) {
        let c = &*self.consumer;
        c.shared
            .tracker
            .read_each(self.len, |k| c.head.wrapping_add(k) & c.mask);
        raw::split_runs(c.buf.cast::<T>(), c.mask + 1, c.head & c.mask, self.len)
    }

    /// The lent items as (at most) two runs in ring order.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(2).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// rx.pop();
    /// tx.push(3).unwrap(); // wraps
    /// let c = rx.read_chunk(2);
    /// assert_eq!(c.as_slices(), (&[2][..], &[3][..]));
    /// ```
    #[must_use]
    pub fn as_slices(&self) -> (&[T], &[T]) {
        // SAFETY: the `len` slots from `head` lie in `[head, tail)`: items the producer
        // published (its Release store of `tail`, read with Acquire in `available_for`)
        // and will not touch until this end's Release store of `head` releases them;
        // borrowed for the chunk's lifetime.
        unsafe { raw::runs_ref(self.raw_runs()) }
    }

    /// The lent items as mutable runs, to modify packets in place before releasing them
    /// (or before dropping the chunk, which leaves them in the ring, modified).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(2).unwrap();
    /// tx.push(1).unwrap();
    /// rx.read_chunk(1).as_mut_slices().0[0] = 9;
    /// assert_eq!(rx.pop(), Some(9));
    /// ```
    pub fn as_mut_slices(&mut self) -> (&mut [T], &mut [T]) {
        // SAFETY: as in `as_slices` (`[head, tail)`, this end's until released), and
        // `&mut self` makes the borrow exclusive.
        unsafe { raw::runs_mut(self.raw_runs()) }
    }

    /// Drops the first `k` lent items in place and releases their slots to the producer with
    /// one index store.
    ///
    /// # Panics
    ///
    /// If `k > self.len()`.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
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
        let c = self.consumer;
        if !core::mem::needs_drop::<T>() {
            c.release(k);
            return;
        }
        /// Releases the items when it goes out of scope: after their destructors ran, or
        /// while unwinding from one that panicked. Either way every one of the `k` items
        /// counts as consumed and is never read or dropped again.
        struct Release<'a, T, W: WaitMode> {
            consumer: &'a mut Consumer<T, W>,
            n: usize,
        }
        impl<T, W: WaitMode> Drop for Release<'_, T, W> {
            fn drop(&mut self) {
                self.consumer.release(self.n);
            }
        }
        c.shared
            .tracker
            .write_each(k, |i| c.head.wrapping_add(i) & c.mask);
        let (a, b) = raw::split_runs(c.buf.cast::<T>(), c.mask + 1, c.head & c.mask, k);
        // `_release` publishes the k items as consumed after the drops, also on unwind.
        let _release = Release { consumer: c, n: k };
        // SAFETY: `a`, `b`: the first k slots of `[head, tail)`, published items lent to
        // this chunk and released right after (`_release`, also on unwind), so dropped
        // exactly once.
        unsafe { raw::drop_runs(a, b) };
    }

    /// Drops all lent items and releases their slots.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
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
        f.debug_struct("ReadChunk").field("len", &self.len).finish()
    }
}

/// The items of a [`ReadChunk`] moved out one at a time, oldest first: the chunk's
/// `IntoIterator`. Dropping it releases the slots of the items it yielded with one index
/// store; the items it did not yield stay in the ring. (A forgotten iterator releases
/// nothing, but the items it yielded are never read again.)
///
/// ```
/// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<String>(4).unwrap();
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
    /// Items yielded (`head` moved past them, unpublished until `Drop`).
    taken: usize,
}

impl<'a, T, W: WaitMode> IntoIterator for ReadChunk<'a, T, W> {
    type Item = T;
    type IntoIter = ReadChunkIntoIter<'a, T, W>;

    fn into_iter(self) -> ReadChunkIntoIter<'a, T, W> {
        self.consumer.track_releases();
        ReadChunkIntoIter {
            consumer: self.consumer,
            left: self.len,
            taken: 0,
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
        c.shared.tracker.read(c.head & c.mask);
        // SAFETY: the chunk lent the `left` published items from `head`; this one is read
        // once: `head` moves past it at once, so no later read of this end sees it again
        // (the slot is released to the producer by `Drop`, or by this end's next release).
        let v = unsafe { (*c.slot(c.head)).assume_init_read() };
        c.head = c.head.wrapping_add(1);
        self.left -= 1;
        self.taken += 1;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T, W: WaitMode> ExactSizeIterator for ReadChunkIntoIter<'_, T, W> {}

impl<T, W: WaitMode> Drop for ReadChunkIntoIter<'_, T, W> {
    fn drop(&mut self) {
        // `next` moved `head` past `taken` items without publishing it.
        self.consumer.end_tracking(self.taken);
    }
}

impl<T, W: WaitMode> fmt::Debug for ReadChunkIntoIter<'_, T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadChunkIntoIter")
            .field("left", &self.left)
            .finish()
    }
}
