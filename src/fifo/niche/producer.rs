//! The producer end of the niche ring: a push is a check that its slot is null and one
//! store of the item's pointer (FastForward's producer), single or in bursts.

use super::*;
use crate::fifo::PushError;

impl<T: Niche> Producer<T> {
    #[inline(always)]
    pub(super) fn slot(&self, index: usize) -> &AtomicPtr<()> {
        // SAFETY: `slots` and `mask` describe the array `shared` keeps alive.
        unsafe { slot_at(self.slots, self.mask, index) }
    }

    /// Whether the slot `ahead` positions after the next push is empty; if so, so are all
    /// the slots before it, and this end may write them (`ahead` below the capacity).
    #[inline(always)]
    fn is_free(&self, ahead: usize) -> bool {
        // Acquire: pairs with the consumer's Release store of null into this slot. The
        // consumer empties slots in order, so that store comes after its takes (and
        // clears) of every slot before it, and all of them happen before this end
        // writes there (so no clear can land after, and erase, a new item).
        self.slot(self.tail.wrapping_add(ahead))
            .load(Ordering::Acquire)
            .is_null()
    }

    /// How many of the next `want` slots are free (`want` at most the capacity): they are
    /// a prefix, since the consumer empties slots in order.
    #[inline(always)]
    fn free_upto(&self, want: usize) -> usize {
        let mut k = 0;
        while k < want && self.is_free(k) {
            k += 1;
        }
        k
    }

    /// Stores an item into the next slot, which `is_free` said is empty.
    #[inline(always)]
    pub(super) fn put(&mut self, raw: NonNull<()>) {
        // Release: pairs with the consumer's Acquire load of this slot, so the item's
        // contents (the writes behind the pointer) are visible to it.
        self.slot(self.tail).store(raw.as_ptr(), Ordering::Release);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Writes a run of up to `room` items (`room` at most the capacity) into the slots
    /// from `tail`, taking item `k` from `next(self, k)` until it returns `None`; returns
    /// how many. Slot `k` must be free when `next` returns an item for it.
    ///
    /// The run's first slot is written last: a consumer polling for the next item sees
    /// nothing until the whole run is in, then takes it without fighting this end for
    /// lines it is still writing (it reads the other slots of a run only after taking the
    /// first). If `next` or an item's `into_raw` panics, the items already written are
    /// published, first slot last, on the way out.
    #[inline(always)]
    fn write_run(&mut self, room: usize, mut next: impl FnMut(&Self, usize) -> Option<T>) -> usize {
        /// Publishes the run (its first slot) when it ends, also on unwind.
        struct Run<'a, T: Niche> {
            producer: &'a mut Producer<T>,
            first: NonNull<()>,
            n: usize,
        }
        impl<T: Niche> Drop for Run<'_, T> {
            fn drop(&mut self) {
                let p = &mut *self.producer;
                // Release: pairs with the consumer's Acquire load of this slot, so this
                // item's contents, and the run's other slots (stored before, Relaxed)
                // with their items' contents, are visible to a consumer that takes it:
                // it reads those slots only after this one.
                p.slot(p.tail).store(self.first.as_ptr(), Ordering::Release);
                p.tail = p.tail.wrapping_add(self.n);
            }
        }
        if room == 0 {
            return 0;
        }
        let Some(first) = next(self, 0) else {
            return 0;
        };
        let mut run = Run {
            first: first.into_raw(),
            producer: self,
            n: 1,
        };
        while run.n < room {
            let p = &*run.producer;
            let Some(v) = next(p, run.n) else { break };
            let raw = v.into_raw();
            // Relaxed: published by the Release store of the run's first slot (above).
            p.slot(p.tail.wrapping_add(run.n))
                .store(raw.as_ptr(), Ordering::Relaxed);
            run.n += 1;
        }
        let n = run.n;
        drop(run);
        n
    }

    /// Appends `value`, or gives it back in [`PushError::Full`] if the ring is full.
    ///
    /// # Errors
    ///
    /// [`PushError::Full`], holding `value`, when the ring has no free slot.
    ///
    /// ```
    /// use std::num::NonZeroU32;
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<NonZeroU32>(1).unwrap();
    /// let one = NonZeroU32::new(1).unwrap();
    /// assert_eq!(tx.push(one), Ok(()));
    /// assert_eq!(tx.push(one), Err(flowline::fifo::PushError::Full(one)));
    /// ```
    #[inline]
    #[doc(alias = "try_send")]
    #[doc(alias = "send")]
    pub fn push(&mut self, value: T) -> Result<(), PushError<T>> {
        if !self.is_free(0) {
            return Err(PushError::Full(value));
        }
        self.put(value.into_raw());
        Ok(())
    }

    /// Burst: appends as many items from the front of `items` as fit, in order, and
    /// returns how many. The consumer sees them all at once, when the call returns.
    ///
    /// ```
    /// use std::num::NonZeroU16;
    /// let v: Vec<NonZeroU16> = (1..=5).map(|i| NonZeroU16::new(i).unwrap()).collect();
    /// let (mut tx, _rx) = flowline::fifo::niche::channel(4).unwrap();
    /// assert_eq!(tx.push_burst(&v), 4);
    /// assert_eq!(tx.push_burst(&v[4..]), 0);
    /// ```
    #[inline]
    #[must_use = "the items past the count were not pushed"]
    pub fn push_burst(&mut self, items: &[T]) -> usize
    where
        T: Copy,
    {
        let n = items.len().min(self.capacity());
        // One slot read when the whole burst fits, else one per free slot.
        let room = if n > 0 && self.is_free(n - 1) {
            n
        } else {
            self.free_upto(n)
        };
        self.write_run(room, |_, k| Some(items[k]))
    }

    /// Burst from a `Vec`: moves as many items as fit from the front of `items` into the
    /// ring, publishes them at once (the run's first slot last), and returns how many; the
    /// items that did not fit stay in `items`, in order. Reads one slot to decide when
    /// they all fit, else one per free slot. If an item's `into_raw` panics, the items
    /// before it are in the ring (published), that item is gone with the panic, and the
    /// items after it stay in `items`, in order.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::niche::channel::<Box<u32>>(2).unwrap();
    /// let mut v = vec![Box::new(1), Box::new(2), Box::new(3)];
    /// assert_eq!(tx.push_burst_from(&mut v), 2);
    /// assert_eq!(v, [Box::new(3)]);
    /// assert_eq!(rx.pop(), Some(Box::new(1)));
    /// ```
    pub fn push_burst_from(&mut self, items: &mut Vec<T>) -> usize {
        /// Owns the front of the caller's `Vec` while the run moves it out: its length is
        /// 0 meanwhile, and on drop (also on unwind) the items not taken move to the front
        /// and the length counts exactly them.
        struct Front<'a, T> {
            items: &'a mut Vec<T>,
            len: usize,
            taken: usize,
        }
        impl<T> Drop for Front<'_, T> {
            fn drop(&mut self) {
                let rest = self.len - self.taken;
                let src = self.items.as_mut_ptr();
                // SAFETY: slots `taken..len` of the buffer hold initialised items that
                // nobody read (the run read `0..taken`, each once); they move to the front
                // (`ptr::copy` allows the overlap) and the length covers exactly them.
                unsafe {
                    ptr::copy(src.add(self.taken), src, rest);
                    self.items.set_len(rest);
                }
            }
        }
        let n = items.len().min(self.capacity());
        let room = if n > 0 && self.is_free(n - 1) {
            n
        } else {
            self.free_upto(n)
        };
        let len = items.len();
        // SAFETY: the items stay initialised in the buffer; `Front` owns them from here
        // and gives the `Vec` back the ones not taken (above).
        unsafe { items.set_len(0) };
        let mut front = Front {
            items,
            len,
            taken: 0,
        };
        self.write_run(room, |_, _| {
            if front.taken == room {
                return None;
            }
            // SAFETY: `taken < room <= len`: the item is initialised and not yet read;
            // counting it as taken before `into_raw` runs makes it the run's (or the
            // panic's) alone.
            let v = unsafe { ptr::read(front.items.as_ptr().add(front.taken)) };
            front.taken += 1;
            Some(v)
        })
    }

    /// Bulk: appends all of `items` and returns `true`, or appends nothing and returns
    /// `false` if they do not all fit. Reads one slot to decide.
    ///
    /// ```
    /// let (a, b, c) = (1u8, 2u8, 3u8);
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<&u8>(2).unwrap();
    /// assert!(!tx.push_bulk(&[&a, &b, &c]));
    /// assert!(tx.push_bulk(&[&a, &b]));
    /// ```
    #[inline]
    #[must_use = "`false`: nothing was pushed"]
    pub fn push_bulk(&mut self, items: &[T]) -> bool
    where
        T: Copy,
    {
        let n = items.len();
        if n == 0 {
            return true;
        }
        if n > self.capacity() || !self.is_free(n - 1) {
            return false;
        }
        self.write_run(n, |_, k| Some(items[k]));
        true
    }

    /// Burst from an iterator: moves items from `iter` into the ring while there is room
    /// and returns how many; the consumer sees them all at once, when the call returns.
    /// The iterator is read only when a slot is free, so the items that did not fit stay
    /// in it. If the iterator panics, the items already moved are in the ring.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<Box<u32>>(2).unwrap();
    /// let mut packets = (1..=3).map(Box::new);
    /// assert_eq!(tx.push_burst_iter(&mut packets), 2);
    /// assert_eq!(packets.next().as_deref(), Some(&3));
    /// ```
    pub fn push_burst_iter<I: Iterator<Item = T>>(&mut self, iter: &mut I) -> usize {
        let cap = self.capacity();
        self.write_run(cap, |p, k| if p.is_free(k) { iter.next() } else { None })
    }

    /// Bulk from an exact-size iterator: moves all its items in and returns `Ok`, or moves
    /// nothing and gives the iterator back if `iter.len()` items do not fit. It is never
    /// read beyond `len()` items. Not all or nothing when the iterator breaks its promise:
    /// if it yields fewer items than `len()`, or panics, the items it gave are in.
    ///
    /// # Errors
    ///
    /// The iterator, not read, when its `len()` items do not fit.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<Box<u8>>(2).unwrap();
    /// assert!(tx.push_bulk_iter(vec![Box::new(1), Box::new(2), Box::new(3)]).is_err());
    /// assert!(tx.push_bulk_iter(vec![Box::new(1), Box::new(2)]).is_ok());
    /// ```
    pub fn push_bulk_iter<I>(&mut self, iter: I) -> Result<(), I::IntoIter>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: ExactSizeIterator,
    {
        let mut iter = iter.into_iter();
        let n = iter.len();
        if n == 0 {
            return Ok(());
        }
        if n > self.capacity() || !self.is_free(n - 1) {
            return Err(iter);
        }
        self.write_run(n, |_, _| iter.next());
        Ok(())
    }

    /// Slots the ring has: the requested capacity rounded up to a power of two.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::niche::channel::<Box<u8>>(5).unwrap().0.capacity(), 8);
    /// ```
    #[inline]
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Whether the next push would fail now (its slot still holds an item). Reads one slot;
    /// the consumer may empty it right after.
    ///
    /// ```
    /// let (mut tx, _rx) = flowline::fifo::niche::channel::<&u8>(1).unwrap();
    /// assert!(!tx.is_full());
    /// tx.push(&1).unwrap();
    /// assert!(tx.is_full());
    /// ```
    #[inline]
    #[must_use]
    pub fn is_full(&self) -> bool {
        !self.is_free(0)
    }

    /// Whether the consumer has been dropped: nothing pushed from now on will be read.
    ///
    /// ```
    /// let (tx, rx) = flowline::fifo::niche::channel::<Box<u8>>(1).unwrap();
    /// drop(rx);
    /// assert!(tx.is_abandoned());
    /// ```
    #[must_use]
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release store in the consumer's Drop.
        self.shared.consumer_gone.load(Ordering::Acquire)
    }
}

impl<T: Niche> Drop for Producer<T> {
    fn drop(&mut self) {
        // Relaxed: read only by the last `Arc` drop, which synchronises with this one.
        self.shared.final_tail.store(self.tail, Ordering::Relaxed);
        // Release: every push happens before a consumer that sees the flag, so one that
        // then finds the ring empty knows nothing more will come.
        self.shared.producer_gone.store(true, Ordering::Release);
    }
}

impl<T: Niche> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("niche::Producer")
            .field("capacity", &self.capacity())
            .field("position", &self.tail)
            .finish()
    }
}
