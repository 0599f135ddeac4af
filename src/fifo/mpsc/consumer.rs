//! The consumer end of the MPSC ring: reading published runs in order, single pops with
//! lazy release, bursts, bulk and chunk reads, and the end's teardown (dropping what was
//! never read).

use super::*;

impl<T, W: WaitMode> Consumer<T, W> {
    /// Items ready in the current run, moving to the next published run when the current
    /// one is used up. Publishes `head` when it passes the empty tail of a run.
    #[inline(always)]
    pub(super) fn ready(&mut self) -> usize {
        if self.head != self.valid_end {
            return self.valid_end.wrapping_sub(self.head) as usize;
        }
        loop {
            if self.head != self.run_end {
                // Skip the run's empty slots.
                self.head = self.run_end;
                self.valid_end = self.run_end;
                self.release();
            }
            match self.shared.run_at(self.head) {
                Some((len, valid)) => {
                    // Taken: its descriptor is cleared by the next `release`.
                    self.valid_end = self.head.wrapping_add(valid as u64);
                    self.run_end = self.head.wrapping_add(len as u64);
                    if valid > 0 {
                        return valid;
                    }
                }
                None => {
                    // Nothing more is published: a consumer that stops here leaves
                    // nothing pending (see "Lazy release").
                    self.release_pending();
                    return 0;
                }
            }
        }
    }

    /// Like `ready`, but also merges the published runs that follow a current run without
    /// holes into it, until `want` items are contiguous from `head` or a run with holes (or
    /// none) comes next: the items from `head` are then one contiguous stretch.
    pub(super) fn ready_contiguous(&mut self, want: usize) -> usize {
        let mut n = self.ready();
        while n < want && n > 0 && self.valid_end == self.run_end {
            let Some((len, valid)) = self.shared.run_at(self.run_end) else {
                // Short, with nothing more published: leave nothing pending (a caller
                // waiting for `want` items would otherwise wait on a producer that waits
                // for the slots this end holds).
                self.release_pending();
                break;
            };
            // Taken (cleared by the next `release`).
            self.valid_end = self.run_end.wrapping_add(valid as u64);
            self.run_end = self.run_end.wrapping_add(len as u64);
            n += valid;
        }
        n
    }

    /// Items published and ready from `head`, across runs, counting up to `want` (reads
    /// descriptors, takes nothing).
    pub(super) fn available(&mut self, want: usize) -> usize {
        let mut n = self.ready();
        let mut at = self.run_end;
        while n < want {
            match self.shared.run_at(at) {
                Some((len, valid)) => {
                    n += valid;
                    at = at.wrapping_add(len as u64);
                }
                None => {
                    // Short: leave nothing pending (see `ready_contiguous`).
                    self.release_pending();
                    break;
                }
            }
        }
        n
    }

    /// Publishes `head` to the producers: first clears the descriptors of the runs taken
    /// since the last publication (once a producer sees the new `head` it may publish a
    /// run at them again, and a stamp this end passed must never match again), then one
    /// Release store. With nothing new to clear or release (an empty chunk commit or burst,
    /// a second release in a row) it stores nothing: rewriting the value already there
    /// would still take the line from producers that poll it.
    #[inline]
    pub(super) fn release(&mut self) {
        if self.head == self.released && self.uncleared == self.run_end {
            return;
        }
        let mut at = self.uncleared;
        while at != self.run_end {
            let len = self.shared.taken_len(at);
            self.shared.clear(at);
            at = at.wrapping_add(len);
        }
        self.uncleared = at;
        self.released = self.head;
        self.lines.stored();
        // Release: pairs with the producers' Acquire head load in `reserve`, so this end's
        // reads of the freed slots (and its clearing of their descriptors) happen before
        // they are reused.
        self.shared.head.store(self.head, Ordering::Release);
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.room.notify();
        }
    }

    /// Turns lazy release of single pops on or off (off by default: every [`pop`](Self::pop)
    /// releases its slot at once, as crossbeam's queues do). On, single pops release their
    /// slots in groups of an eighth of the ring, at most
    /// [`MAX_RELEASE_BATCH`], and always when a pop finds
    /// nothing; each release also clears the descriptors of the runs taken since the last
    /// one, so single items no longer make the consumer write, once per item, the
    /// descriptor line a producer writes next. The producers then see up to a group's
    /// worth fewer free slots until a release, and a thread that stops popping and then
    /// waits for room must call [`release_pending`](Self::release_pending) first (see
    /// "Lazy release" in the [module docs](super), with its measurements). Turning it off
    /// releases what is pending.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(1024).unwrap();
    /// assert_eq!(rx.release_batch(), 1);
    /// rx.set_lazy_release(true);
    /// assert_eq!(rx.release_batch(), 128);
    /// tx.push_burst(&[0; 1024]);
    /// rx.pop().unwrap();
    /// assert!(tx.push(1).is_err()); // the slot is not released yet
    /// rx.set_lazy_release(false);
    /// assert!(tx.push(1).is_ok());
    /// ```
    pub fn set_lazy_release(&mut self, on: bool) {
        if on {
            let slots = self.shared.slots;
            self.release_batch = (slots / 8).clamp(1, super::MAX_RELEASE_BATCH) as u64;
        } else {
            self.release_batch = 1;
            self.release_pending();
        }
    }

    /// How many single pops release their slots together: 1 (each at once) unless lazy
    /// release is on ([`set_lazy_release`](Self::set_lazy_release)).
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::mpsc::channel::<u32>(64).unwrap();
    /// assert_eq!(rx.release_batch(), 1);
    /// ```
    #[must_use]
    pub fn release_batch(&self) -> usize {
        self.release_batch as usize
    }

    /// Releases to the producers the slots that single [`pop`](Self::pop)s consumed and
    /// have not released yet (see "Lazy release" in the [module docs](super)). Bursts,
    /// committed chunks, a pop that finds nothing and dropping this end do it on their
    /// own; call it when this end stops popping while items remain and then waits for a
    /// producer to have room.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(1024).unwrap();
    /// rx.set_lazy_release(true);
    /// tx.push_burst(&[0; 1024]);
    /// rx.pop().unwrap();
    /// assert!(tx.push(1).is_err()); // the slot is not released yet
    /// rx.release_pending();
    /// assert!(tx.push(1).is_ok());
    /// ```
    #[inline]
    pub fn release_pending(&mut self) {
        if self.released != self.head {
            self.release();
        }
    }

    /// Takes the oldest published item, if any (stops at an unpublished reservation).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel(2).unwrap();
    /// tx.push('a').unwrap();
    /// assert_eq!(rx.pop(), Some('a'));
    /// assert_eq!(rx.pop(), None);
    /// ```
    #[inline(always)]
    #[must_use = "the item is dropped if it is not used"]
    #[doc(alias = "try_recv")]
    #[doc(alias = "recv")]
    pub fn pop(&mut self) -> Option<T> {
        if self.ready() == 0 {
            return None;
        }
        let sh = &*self.shared;
        sh.tracker.read(sh.pos(self.head));
        // `head` itself (`ready` found it short of `valid_end`), chosen without a branch so
        // that a pop run ahead past the last item seen reads the slot before, not the
        // line a producer is writing (see `fifo::speculation`).
        let at = index_unless_end(self.head, self.valid_end);
        // SAFETY: `at` is `head`, inside a published run's items (`ready`), not yet
        // consumed; the item is moved out once and `head` passes it.
        let v = unsafe { (*sh.slot(at)).assume_init_read() };
        self.head = self.head.wrapping_add(1);
        if self.head.wrapping_sub(self.released) >= self.release_batch {
            self.release_after_pops();
        }
        Some(v)
    }

    /// Takes the oldest item, or says why there is none: [`PopError::Empty`] for now, or
    /// [`PopError::Disconnected`] once every producer is gone and everything it pushed was taken.
    ///
    /// # Errors
    ///
    /// [`PopError::Empty`] while the ring is empty; [`PopError::Disconnected`] once it is
    /// empty and every producer is gone.
    ///
    /// ```
    /// use flowline::fifo::PopError;
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(4).unwrap();
    /// tx.push(7).unwrap();
    /// drop(tx);
    /// assert_eq!(rx.try_pop(), Ok(7));
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

    /// [`release`](Self::release) for single pops, once per `release_batch` of them: out
    /// of line, so that `pop` stays small enough to be inlined into its caller's loop
    /// (inlined, the release and its sleeper check kept a waitable ring's `pop` out of
    /// line when the caller's crate is built as one code-generation unit:
    /// `docs/performance-notes.md`, section 12).
    #[inline(never)]
    fn release_after_pops(&mut self) {
        self.release();
    }

    /// The oldest published item, without taking it.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel(2).unwrap();
    /// tx.push(3).unwrap();
    /// assert_eq!(rx.peek(), Some(&3));
    /// ```
    #[must_use]
    pub fn peek(&mut self) -> Option<&T> {
        if self.ready() == 0 {
            return None;
        }
        let sh = &*self.shared;
        sh.tracker.read(sh.pos(self.head));
        // `head`, chosen as `pop` chooses it (see there).
        let at = index_unless_end(self.head, self.valid_end);
        // SAFETY: `at` is `head` (short of `valid_end`: `ready`), below `head + ready`,
        // inside a run whose descriptor a producer published (Release) and `ready` read
        // (Acquire): an initialised item no producer touches until this end's Release store
        // of `head` passes it, which cannot happen while `self` is borrowed.
        Some(unsafe { (*sh.slot(at)).assume_init_ref() })
    }

    /// Moves up to `max` items out, in order, crossing runs, one ready stretch at a time:
    /// `f(i, a, b)` gets the stretch's items (the `i`th and following of this call) as at
    /// most two in-bounds runs of the buffer, in ring order, and must move all of them out
    /// as bytes; it may unwind only before it moves any (say, while it makes room), and
    /// then none of that stretch is taken. Publishes `head` once at the end (or on unwind,
    /// if earlier stretches were taken).
    #[inline]
    pub(super) fn take_stretches(
        &mut self,
        max: usize,
        mut f: impl FnMut(usize, Stretch<T>, Stretch<T>),
    ) -> usize {
        let mut g = Publish {
            consumer: self,
            n: 0,
        };
        while g.n < max {
            let ready = g.consumer.ready().min(max - g.n);
            if ready == 0 {
                break;
            }
            let c = &mut *g.consumer;
            let sh = &*c.shared;
            let head = c.head;
            sh.tracker
                .read_each(ready, |k| sh.pos(head.wrapping_add(k as u64)));
            let first = ready.min(sh.slots - sh.pos(head));
            let a = Stretch(sh.slot(head).cast::<T>(), first);
            let b = Stretch(sh.buf.cast::<T>(), ready - first);
            f(g.n, a, b);
            // `f` moved the stretch out: it is taken.
            c.head = head.wrapping_add(ready as u64);
            g.n += ready;
        }
        g.n
    }

    /// Moves up to `max` items onto the end of `out` (see `take_stretches`).
    #[inline]
    fn take_onto(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        self.take_stretches(max, |_, a, b| {
            // SAFETY: `a` and `b` are `[head, head + ready)`, items of runs whose
            // descriptors producers published (Release, read with Acquire in `ready`) and
            // no producer touches until `head` passes them, in bounds and disjoint from
            // `out`'s buffer; `append_runs` reserves before it moves
            // anything, and the caller passes them right after (nothing in between
            // unwinds), so each is read once.
            unsafe { raw::append_runs(out, (a.0, a.1), (b.0, b.1)) }
        })
    }

    /// Burst: copies up to `out.len()` published items into `out`, crossing runs, and
    /// releases them with one `head` store; returns how many.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(8).unwrap();
    /// let mut tx2 = tx.clone();
    /// tx.push_burst(&[1, 2]);
    /// tx2.push_burst(&[3]);
    /// let mut out = [0; 8];
    /// assert_eq!(rx.pop_burst(&mut out), 3);
    /// assert_eq!(&out[..3], &[1, 2, 3]);
    /// ```
    #[inline]
    #[must_use = "only the first items of `out` hold items: how many is the count"]
    pub fn pop_burst(&mut self, out: &mut [T]) -> usize
    where
        T: Copy,
    {
        let max = out.len();
        self.take_stretches(max, |i, a, b| {
            let dst = &mut out[i..i + a.1 + b.1];
            // SAFETY: `a` and `b` are `[head, head + ready)`, published items of this ring
            // (as in `take_onto`) in two in-bounds runs (`T: Copy`: reading them leaves
            // nothing to drop), disjoint from `out`, whose range was bounds-checked above.
            unsafe {
                raw::copy_items(a.0, dst.as_mut_ptr(), a.1);
                raw::copy_items(b.0, dst.as_mut_ptr().add(a.1), b.1);
            }
        })
    }

    /// Bulk: fills all of `out` and returns `true`, or takes nothing and returns `false` if
    /// fewer than `out.len()` published items are ready (across runs).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u8>(8).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// let mut out = [0; 3];
    /// assert!(!rx.pop_bulk(&mut out));
    /// assert!(rx.pop_bulk(&mut out[..2]));
    /// assert_eq!(out[..2], [1, 2]);
    /// ```
    #[must_use = "`false`: nothing was taken"]
    pub fn pop_bulk(&mut self, out: &mut [T]) -> bool
    where
        T: Copy,
    {
        if self.available(out.len()) < out.len() {
            return false;
        }
        let n = self.pop_burst(out);
        debug_assert_eq!(n, out.len());
        true
    }

    /// Burst into a `Vec`: moves up to `max` published items onto `out`; returns how many.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<String>(4).unwrap();
    /// tx.push("a".into()).unwrap();
    /// let mut v = Vec::new();
    /// assert_eq!(rx.pop_burst_into(&mut v, 8), 1);
    /// ```
    pub fn pop_burst_into(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        // Reserve what is known ready now (more may become ready while taking).
        out.reserve(self.ready().min(max));
        self.take_onto(out, max)
    }

    /// Burst to a closure: moves up to `max` ready items, oldest first and across runs, into
    /// `f`, and releases their slots with one index store; returns how many. No
    /// intermediate buffer. If `f` panics, the items already handed to it stay consumed
    /// (none is dropped twice) and the others stay in the ring.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(8).unwrap();
    /// let mut tx2 = tx.clone();
    /// tx.push_burst(&[1, 2]);
    /// tx2.push_burst(&[3]);
    /// let mut sum = 0;
    /// assert_eq!(rx.pop_burst_with(8, |v| sum += v), 3);
    /// assert_eq!(sum, 6);
    /// ```
    pub fn pop_burst_with(&mut self, max: usize, mut f: impl FnMut(T)) -> usize {
        let mut g = Publish {
            consumer: self,
            n: 0,
        };
        while g.n < max {
            let ready = g.consumer.ready().min(max - g.n);
            if ready == 0 {
                break;
            }
            for _ in 0..ready {
                let c = &mut *g.consumer;
                let sh = &*c.shared;
                sh.tracker.read(sh.pos(c.head));
                // SAFETY: `ready` counted this slot among the published, unconsumed items
                // from `head`; it is read once, and `head` moves past it and it is counted
                // as taken before `f` runs, so the guard releases it even if `f` panics
                // (it is then never read or dropped again).
                let v = unsafe { (*sh.slot(c.head)).assume_init_read() };
                c.head = c.head.wrapping_add(1);
                g.n += 1;
                f(v);
            }
        }
        g.n
    }

    /// Bulk into a `Vec`: moves exactly `n` items onto `out` and returns `true`, or takes
    /// nothing and returns `false` if fewer are ready.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<String>(4).unwrap();
    /// tx.push("a".into()).unwrap();
    /// let mut v = Vec::new();
    /// assert!(!rx.pop_bulk_into(&mut v, 2));
    /// assert!(rx.pop_bulk_into(&mut v, 1));
    /// assert_eq!(v, ["a"]);
    /// ```
    #[must_use = "`false`: nothing was taken"]
    pub fn pop_bulk_into(&mut self, out: &mut Vec<T>, n: usize) -> bool {
        if self.available(n) < n {
            return false;
        }
        out.reserve(n);
        let got = self.take_onto(out, n);
        debug_assert_eq!(got, n);
        true
    }

    /// Lends up to `n` published items in place, in order (fewer if fewer are ready;
    /// possibly none). The chunk is one contiguous stretch of the ring, so it ends early at
    /// a run that a producer left partly empty (a later call continues after it). Nothing
    /// is released to the producers until [`ReadChunk::commit`].
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::mpsc::channel::<u32>(8).unwrap();
    /// let mut tx2 = tx.clone();
    /// tx.push_burst(&[1, 2]);
    /// tx2.push_burst(&[3]);
    /// let chunk = rx.read_chunk(8);
    /// let (a, b) = chunk.as_slices();
    /// assert_eq!(a.iter().chain(b).sum::<u32>(), 6);
    /// chunk.commit_all();
    /// assert!(rx.pop().is_none());
    /// ```
    #[must_use = "a read chunk releases nothing until it is committed"]
    pub fn read_chunk(&mut self, n: usize) -> ReadChunk<'_, T, W> {
        let len = self.ready_contiguous(n).min(n);
        ReadChunk {
            consumer: self,
            len,
        }
    }

    /// Slots the ring has.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::mpsc::channel::<u8>(3).unwrap().1.capacity(), 4);
    /// ```
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.shared.slots
    }

    /// Slots reserved or published and not yet consumed (a snapshot; includes
    /// reservations still being written, and empty slots of partly filled runs). Slots this
    /// end consumed and has not released yet count as free here (the producers count them
    /// as used until then: see "Lazy release" in the [module docs](super)).
    ///
    /// ```
    /// let (mut tx, rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.len(), 1);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        // Relaxed: a snapshot. Never below `head`: this end passed only published runs,
        // whose reservations came before their Acquire-read publications.
        let tail = self.shared.tail.load(Ordering::Relaxed);
        tail.wrapping_sub(self.head).min(self.shared.slots as u64) as usize
    }

    /// Free slots (a snapshot).
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert_eq!(rx.free(), 4);
    /// ```
    #[must_use]
    pub fn free(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Whether nothing is in the ring (a snapshot).
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// assert!(rx.is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the ring is full now (a snapshot).
    ///
    /// ```
    /// let (mut tx, rx) = flowline::fifo::mpsc::channel::<u8>(1).unwrap();
    /// tx.push(1).unwrap();
    /// assert!(rx.is_full());
    /// ```
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.free() == 0
    }

    /// Whether every producer handle has been dropped: what is in the ring now is all there
    /// will be. Two leaks defeat a drain loop on `is_abandoned() && is_empty()`, which then
    /// spins forever (bound such loops, e.g. with a timeout): a producer handle leaked with
    /// `mem::forget` keeps this `false`, and a [`WriteChunk`] leaked the same way leaves its
    /// reservation unpublished, counted in `len` forever.
    ///
    /// ```
    /// let (tx, rx) = flowline::fifo::mpsc::channel::<u8>(4).unwrap();
    /// let tx2 = tx.clone();
    /// drop(tx);
    /// assert!(!rx.is_abandoned());
    /// drop(tx2);
    /// assert!(rx.is_abandoned());
    /// ```
    #[must_use]
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the producers' Release decrements, so their publications
        // are visible to the loads that follow.
        self.shared.cold.producers.load(Ordering::Acquire) == 0
    }
}

impl<T, W: WaitMode> Drop for Consumer<T, W> {
    fn drop(&mut self) {
        // A registration that an async read left (it returned `Pending`): withdrawn, its
        // waker dropped with no lock held, before the end's departure is published.
        #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
        if W::WAITS {
            self.io.withdraw(self.shared.items());
        }
        let cold = &self.shared.cold;
        // Relaxed: read only by Shared's Drop, after the last Arc is gone (the Arc's own
        // release/acquire orders these stores before it).
        cold.final_valid_end
            .store(self.valid_end, Ordering::Relaxed);
        cold.final_run_end.store(self.run_end, Ordering::Relaxed);
        // The flag before the release, whose wake-up runs producers' wakers: the end's
        // state is final before any user code runs.
        // Release: pairs with the producers' Acquire in `is_abandoned`.
        cold.consumer_gone.store(true, Ordering::Release);
        self.release();
        // Producers sleeping in `push_wait` learn that nothing more will be taken.
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.room.notify();
        }
    }
}

impl<T, W: WaitMode> fmt::Debug for Consumer<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mpsc::Consumer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

/// Publishes the consumer's `head` when it goes out of scope, if anything was taken: the
/// end of a burst that moves items out, or an unwind out of it.
struct Publish<'a, T, W: WaitMode> {
    consumer: &'a mut Consumer<T, W>,
    /// Items taken so far.
    n: usize,
}

impl<T, W: WaitMode> Drop for Publish<'_, T, W> {
    fn drop(&mut self) {
        // (`ready` may have published already, on finding nothing more.)
        if self.n > 0 {
            self.consumer.release_pending();
        }
    }
}
