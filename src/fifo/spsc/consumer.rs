//! The consumer end of the SPSC ring: available-item accounting against a cached copy
//! of the producer's index, single pops with lazy release, bursts, bulk and chunk reads,
//! polite polling, and the end's teardown (dropping what was never read).

use super::*;

/// A read of the producer's index `tail` that may wait politely first: with nothing left
/// in the cached view (`nothing_left`), if this end trails a streaming producer, it lets the
/// producer publish more before the read moves its index line (see "Polite polling").
/// Returns the new polite state and the index read.
///
/// Out of line and by value, not given the consumer: the consumer's fields stay in
/// registers in a caller's loop only while nothing out of line gets the consumer's address
/// (see `sync::HandleArc`), and inlined, this path made every `pop` large enough that a
/// caller's loop around it was no longer inlined. (The state lived in a `Box` for a while,
/// to save the copies; that extra allocation moved the ring's others on the heap, and in
/// some layouts single items ran at half speed.)
#[inline(never)]
fn polite_read(
    mut polite: Polite,
    tail: &AtomicUsize,
    cached_tail: usize,
    nothing_left: bool,
) -> (Polite, usize) {
    let waited = nothing_left && polite.should_wait();
    if waited {
        polite::wait();
    }
    // Acquire: pairs with the producer's Release store of `tail`, so its slot writes are
    // visible before the consumer reads them.
    let t = tail.load(Ordering::Acquire);
    polite.observe(t.wrapping_sub(cached_tail), waited, nothing_left);
    (polite, t)
}

impl<T, W: WaitMode> Consumer<T, W> {
    /// As [`Producer::line_counts`], for this end: stores of `head`, and loads of `tail`
    /// that found it moved.
    #[cfg(all(feature = "std", feature = "__test_hooks"))]
    pub(crate) fn line_counts(&self) -> Option<(usize, usize)> {
        self.lines.counts()
    }

    /// Items available, reloading the producer's index only if the cached view has fewer
    /// than `want`.
    #[inline(always)]
    pub(super) fn available_for(&mut self, want: usize) -> usize {
        self.load_available(want, true)
    }

    /// [`available_for`](Self::available_for), with the polite wait allowed or not.
    #[inline(always)]
    fn load_available(&mut self, want: usize, may_wait: bool) -> usize {
        let avail = self.cached_tail.wrapping_sub(self.head);
        if avail >= want {
            return avail;
        }
        // About to read the producer's line: release what single pops consumed first, so a
        // producer waiting for room sees it no later than this end looks for more items.
        self.release_pending();
        // Only reads that may wait politely (by mode and size) feed its state: a read too
        // small to wait (a single pop under the default mode) goes straight to the index,
        // so a spinning pop costs what rtrb's does and its gains never steer the waits of
        // the large reads.
        // (`polite_min` is `usize::MAX` when no read may pause: off, or zero-sized items,
        // whatever a read asks for.)
        if !(may_wait && self.polite_min != usize::MAX && want >= self.polite_min) {
            // Acquire: pairs with the producer's Release store of `tail`, so its slot writes
            // are visible before this end reads them.
            let tail = self.shared.tail.load(Ordering::Acquire);
            self.lines.loaded(tail != self.cached_tail);
            self.cached_tail = tail;
            return self.cached_tail.wrapping_sub(self.head);
        }
        let (polite, tail) =
            polite_read(self.polite, &self.shared.tail, self.cached_tail, avail == 0);
        self.lines.loaded(tail != self.cached_tail);
        self.polite = polite;
        self.cached_tail = tail;
        self.cached_tail.wrapping_sub(self.head)
    }

    /// Whether an item is there: the producer's index is loaded only when the cached view
    /// shows none (and kept as the cached view). Releases nothing: for a thread that
    /// looks at many rings and reads few of them.
    #[inline]
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn has_unread(&mut self) -> bool {
        if self.cached_tail != self.head {
            return true;
        }
        // Acquire: as in `available_for`.
        let tail = self.shared.tail.load(Ordering::Acquire);
        self.lines.loaded(tail != self.cached_tail);
        self.cached_tail = tail;
        tail != self.head
    }

    /// Items available now: reloads the producer's index (and keeps it as the cached
    /// view, so the pops that follow do not load it again).
    #[inline]
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn refresh(&mut self) -> usize {
        // Never waits: the caller (the distributor) polls many rings in turn.
        self.load_available(usize::MAX, false)
    }

    /// [`refresh`](Self::refresh) (which releases slots single pops left pending, as
    /// every read of the producer's index does), then asks for the lines of up to `max` of
    /// the items now available (x86_64; the first line of an item larger than a line), so
    /// that a read of them later (the next poll of a thread that polls many rings) finds
    /// them near. Only lines that hold published items; the last of them may also hold
    /// slots the producer has yet to write, which it then takes back on its next write.
    /// The prefetch is a hint: nothing observable changes beyond what `refresh` does.
    #[inline]
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn refresh_and_prefetch(&mut self, max: usize) -> usize {
        let avail = self.refresh();
        #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
        {
            // Zero-sized items have no lines to ask for.
            if let Some(per_line) = 64usize.checked_div(core::mem::size_of::<T>()) {
                let per_line = per_line.max(1);
                let n = avail.min(max);
                let fetch = |k: usize| {
                    // SAFETY: a prefetch is a hint: it never faults and changes nothing a
                    // program can observe; SSE is part of the x86_64 baseline. The address
                    // is a slot of this ring's allocation (masked index).
                    unsafe {
                        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                            self.slot(self.head.wrapping_add(k)).cast::<i8>(),
                        );
                    }
                };
                let mut k = 0;
                while k < n {
                    fetch(k);
                    k += per_line;
                }
                // The last item's line, which the steps above miss when `head` is not at
                // the start of a line.
                if n > 0 {
                    fetch(n - 1);
                }
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
        let _ = max;
        avail
    }

    #[inline(always)]
    pub(super) fn slot(&self, index: usize) -> *mut MaybeUninit<T> {
        // SAFETY: `index & mask` is below the slot count: in bounds of the allocation.
        unsafe { self.buf.add(index & self.mask) }
    }

    /// Releases `n` consumed slots to the producer (with any that single pops consumed
    /// before): one store to this end's index line, none if there is nothing to release
    /// (an empty burst or chunk commit on an empty ring: rewriting the value already there
    /// would still take the line from a producer that polls it).
    #[inline(always)]
    pub(super) fn release(&mut self, n: usize) {
        self.head = self.head.wrapping_add(n);
        // `n != 0` first: eager pops leave `released` behind, so it can equal `head` after
        // a release of items (on a 32-bit target, after 2^32 pops).
        if n != 0 || self.has_pending() {
            self.publish_head();
        }
    }

    /// [`release`](Self::release) for `n` items that `head` already moved past (a chunk's
    /// iterator): stores when it took any or single pops left slots pending.
    #[inline(always)]
    pub(super) fn release_taken(&mut self, n: usize) {
        if n != 0 || self.has_pending() {
            self.publish_head();
        }
    }

    /// Whether `head` moved past items without being published: pops left pending by lazy
    /// release, or a chunk's iterator (which switches an eager end to [`EAGER_TRACKED`]
    /// while it is out, and for good if it is forgotten). An eager pop publishes `head` at
    /// once and leaves `released` behind, unread.
    #[inline(always)]
    fn has_pending(&self) -> bool {
        self.release_batch != 1 && self.released != self.head
    }

    /// Before a chunk's iterator moves `head` item by item: an eager end starts keeping
    /// `released` (so a read of `tail` or `release_pending` finds what the iterator took,
    /// even if it is forgotten). The iterator's drop switches back.
    pub(super) fn track_releases(&mut self) {
        if self.release_batch == 1 {
            // An eager end's `head` is published (only an iterator leaves it otherwise,
            // and a forgotten one leaves the end tracked).
            self.released = self.head;
            self.release_batch = EAGER_TRACKED;
        }
    }

    /// After a chunk's iterator: releases what it took, and an end it switched to
    /// [`EAGER_TRACKED`] goes back to eager pops that store one index.
    pub(super) fn end_tracking(&mut self, taken: usize) {
        self.release_taken(taken);
        if self.release_batch == EAGER_TRACKED {
            self.release_batch = 1;
        }
    }

    /// Publishes `head` and marks it released.
    #[inline(always)]
    fn publish_head(&mut self) {
        self.released = self.head;
        self.store_head();
    }

    /// Stores `head` to the shared line (and wakes a producer waiting for room), without
    /// touching `released`: the eager pop's one store of an index.
    #[inline(always)]
    fn store_head(&mut self) {
        self.lines.stored();
        // Release: pairs with the producer's Acquire load of `head`, so this end's reads of
        // the released slots happen before the producer reuses them.
        self.shared.head.store(self.head, Ordering::Release);
        #[cfg(feature = "std")]
        if W::WAITS {
            self.shared.head.notify();
        }
    }

    /// Consumes the slot at `head` for a single pop: released to the producer once
    /// `release_batch` slots are pending (or earlier, see [`release_pending`]).
    ///
    /// [`release_pending`]: Self::release_pending
    #[inline(always)]
    fn consume_one(&mut self) {
        self.head = self.head.wrapping_add(1);
        // Eager (the default): one store, the shared index; `released` is read only with
        // lazy release on (`has_pending`), and turning that on catches it up. One call of
        // `store_head` for both modes keeps `pop` small enough to inline into its loop.
        if self.release_batch != 1 {
            // Lazy: also release when this pop took the last item this end knows of: a
            // consumer that pops what it saw and then waits for something else leaves
            // nothing pending. (A single `release_at` index, re-armed at each release and
            // read of `tail`, saves a comparison here, but cost boxed handles a quarter of
            // their throughput when the cores were far apart.)
            if self.head.wrapping_sub(self.released) < self.release_batch
                && self.head != self.cached_tail
            {
                return;
            }
            self.released = self.head;
        }
        self.store_head();
    }

    /// Releases to the producer the slots that single [`pop`](Self::pop)s consumed and
    /// have not released yet (see "Lazy release" in the [module docs](super)). Bursts,
    /// committed chunks, a pop of the last item this end has seen and dropping this end do
    /// it on their own; call it when this end stops popping while items remain and then
    /// waits for the producer to have room.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(1024).unwrap();
    /// rx.set_lazy_release(true);
    /// tx.push_burst(&[0; 1024]);
    /// rx.pop().unwrap();
    /// assert!(tx.is_full()); // the slot is not released yet
    /// rx.release_pending();
    /// assert!(tx.push(1).is_ok());
    /// ```
    #[inline]
    pub fn release_pending(&mut self) {
        if self.has_pending() {
            self.publish_head();
        }
    }

    /// Turns lazy release of single pops on or off (off by default: every [`pop`](Self::pop)
    /// releases its slot at once, as rtrb's and crossbeam's do). On, single pops release
    /// their slots in groups of [`release_batch_for`]`(capacity)`
    /// (at most 16), and always when a pop takes the last item this end has seen, so the
    /// consumer writes its index line once per group instead of once per item; the
    /// producer then sees up to 15 fewer free slots until a release, and a thread that
    /// stops popping and then waits for room must call
    /// [`release_pending`](Self::release_pending) first (see "Lazy release" in the
    /// [module docs](super), with its measurements). Turning it off releases what is
    /// pending.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(1024).unwrap();
    /// assert_eq!(rx.release_batch(), 1);
    /// rx.set_lazy_release(true);
    /// assert_eq!(rx.release_batch(), 16);
    /// tx.push_burst(&[0; 1024]);
    /// rx.pop().unwrap();
    /// assert!(tx.is_full()); // the slot is not released yet
    /// rx.set_lazy_release(false);
    /// assert!(tx.push(1).is_ok());
    /// ```
    pub fn set_lazy_release(&mut self, on: bool) {
        if on {
            // Eager pops published `head` without moving `released` (a tracked end kept it).
            if self.release_batch == 1 {
                self.released = self.head;
            }
            self.release_batch = super::release_batch_for(self.mask + 1);
        } else {
            // Released while `has_pending` still reads `released`.
            self.release_pending();
            self.release_batch = 1;
        }
    }

    /// How many single pops release their slots together: 1 (each at once) unless lazy
    /// release is on ([`set_lazy_release`](Self::set_lazy_release)).
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::spsc::channel::<u32>(64).unwrap();
    /// assert_eq!(rx.release_batch(), 1);
    /// ```
    #[must_use]
    pub fn release_batch(&self) -> usize {
        self.release_batch.max(1)
    }

    /// Takes the oldest item, if any.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel(2).unwrap();
    /// tx.push('a').unwrap();
    /// assert_eq!(rx.pop(), Some('a'));
    /// assert_eq!(rx.pop(), None);
    /// ```
    #[inline(always)]
    #[must_use = "the item is dropped if it is not used"]
    #[doc(alias = "try_recv")]
    #[doc(alias = "recv")]
    pub fn pop(&mut self) -> Option<T> {
        // A waitable end's pop is always inlined: its wake check, though never taken while
        // both ends run, puts the body just past the compiler's inlining threshold, and a
        // pop called out of line runs at about half the rate in a loop of single items
        // (`docs/performance-notes.md`, section 16). A plain end's is left to the compiler.
        if W::WAITS {
            self.pop_inlined()
        } else {
            self.pop_hinted()
        }
    }

    /// [`pop`](Self::pop) where the compiler decides whether to inline it.
    #[inline]
    fn pop_hinted(&mut self) -> Option<T> {
        self.pop_inlined()
    }

    /// The body of [`pop`](Self::pop).
    #[inline(always)]
    fn pop_inlined(&mut self) -> Option<T> {
        if self.available_for(1) == 0 {
            return None;
        }
        self.shared.tracker.read(self.head & self.mask);
        // `head` itself (it differs from `cached_tail` here), chosen without a branch so
        // that a pop run ahead past the last item seen reads the slot before, not the
        // line the producer is writing (see `fifo::speculation`).
        let at = index_unless_end(self.head as u64, self.cached_tail as u64) as usize;
        // SAFETY: `at` is `head` (`cached_tail` differs from it, checked just above); the
        // slot at `head` was published by the producer (Acquire above) and not yet
        // consumed; reading it moves the item out, and `head` moves past it so it is never
        // read or dropped again.
        let v = unsafe { (*self.slot(at)).assume_init_read() };
        self.consume_one();
        Some(v)
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
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
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

    /// The oldest item, without taking it.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel(2).unwrap();
    /// tx.push(5).unwrap();
    /// assert_eq!(rx.peek(), Some(&5));
    /// assert_eq!(rx.pop(), Some(5));
    /// ```
    #[inline]
    #[must_use]
    pub fn peek(&mut self) -> Option<&T> {
        if self.available_for(1) == 0 {
            return None;
        }
        self.shared.tracker.read(self.head & self.mask);
        // `head`, chosen as `pop` chooses it (see there).
        let at = index_unless_end(self.head as u64, self.cached_tail as u64) as usize;
        // SAFETY: `at` is `head` (`cached_tail` differs from it, checked just above); the
        // slot at `head` holds a published item that stays in place while the returned
        // borrow of `self` lives (only this end consumes).
        Some(unsafe { (*self.slot(at)).assume_init_ref() })
    }

    /// Takes up to `n` published items in place (fewer if fewer are available; possibly
    /// none). Nothing is released to the producer until [`ReadChunk::commit`].
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(4).unwrap();
    /// tx.push_burst(&[1, 2, 3]);
    /// let chunk = rx.read_chunk(8);
    /// let (a, b) = chunk.as_slices();
    /// assert_eq!(a.iter().chain(b).sum::<u32>(), 6);
    /// chunk.commit_all();
    /// assert!(rx.is_empty());
    /// ```
    #[inline]
    #[must_use = "a read chunk releases nothing until it is committed"]
    pub fn read_chunk(&mut self, n: usize) -> ReadChunk<'_, T, W> {
        let len = self.available_for(n).min(n);
        ReadChunk {
            consumer: self,
            len,
        }
    }

    /// Burst: copies as many items as are available (up to `out.len()`) into the front of
    /// `out`, releases them with one index store, and returns how many.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// let mut out = [0; 8];
    /// assert_eq!(rx.pop_burst(&mut out), 2);
    /// assert_eq!(&out[..2], &[1, 2]);
    /// ```
    #[inline(always)]
    #[must_use = "only the first items of `out` hold items: how many is the count"]
    pub fn pop_burst(&mut self, out: &mut [T]) -> usize
    where
        T: Copy,
    {
        let chunk = self.read_chunk(out.len());
        let n = chunk.len;
        let (a, b) = chunk.as_slices();
        raw::copy_from_runs(a, b, out);
        chunk.commit_all();
        n
    }

    /// Bulk: fills all of `out` and returns `true`, or takes nothing and returns `false` if
    /// fewer than `out.len()` items are available.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// let mut out = [0; 3];
    /// assert!(!rx.pop_bulk(&mut out));
    /// assert!(rx.pop_bulk(&mut out[..2]));
    /// ```
    #[inline]
    #[must_use = "`false`: nothing was taken"]
    pub fn pop_bulk(&mut self, out: &mut [T]) -> bool
    where
        T: Copy,
    {
        if self.available_for(out.len()) < out.len() {
            return false;
        }
        let _ = self.pop_burst(out);
        true
    }

    /// Burst into a `Vec`: moves up to `max` available items onto the end of `out` and
    /// returns how many.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<String>(4).unwrap();
    /// tx.push("a".into()).unwrap();
    /// let mut v = Vec::new();
    /// assert_eq!(rx.pop_burst_into(&mut v, 32), 1);
    /// assert_eq!(v, ["a"]);
    /// ```
    pub fn pop_burst_into(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        // One read of the producer's index (a second one, for `pop_burst_with`, would
        // find nothing new after a short burst and end the polite-polling streak).
        let n = self.available_for(max).min(max);
        let start = self.head;
        self.shared
            .tracker
            .read_each(n, |k| start.wrapping_add(k) & self.mask);
        let (first, second) = raw::run_lengths(self.mask + 1, start & self.mask, n);
        // SAFETY: the `n` slots from `head` hold published items (`available_for`), in two
        // disjoint in-bounds runs, not in `out`'s buffer. `append_runs` reserves before it
        // moves anything, and `release(n)` right after passes their slots (nothing between
        // can unwind), so each item is read once and never dropped by the ring.
        unsafe {
            raw::append_runs(
                out,
                (self.slot(start).cast::<T>(), first),
                (self.buf.cast::<T>(), second),
            );
        }
        self.release(n);
        n
    }

    /// Burst to a closure: moves up to `max` available items, oldest first, into `f`, and
    /// releases their slots with one index store; returns how many. No intermediate buffer.
    /// If `f` panics, the items already handed to it stay consumed (none is dropped twice).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u32>(8).unwrap();
    /// tx.push_burst(&[1, 2, 3]);
    /// let mut sum = 0;
    /// assert_eq!(rx.pop_burst_with(8, |v| sum += v), 3);
    /// assert_eq!(sum, 6);
    /// ```
    #[inline]
    pub fn pop_burst_with(&mut self, max: usize, f: impl FnMut(T)) -> usize {
        let n = self.available_for(max).min(max);
        self.take_with(n, f)
    }

    /// Moves the `n` oldest items (`n` at most what is available) into `f` and releases
    /// their slots with one index store; returns `n`.
    #[inline(always)]
    fn take_with(&mut self, n: usize, mut f: impl FnMut(T)) -> usize {
        /// Releases the items taken so far, also when `f` unwinds.
        struct Taken<'a, T, W: WaitMode> {
            consumer: &'a mut Consumer<T, W>,
            n: usize,
        }
        impl<T, W: WaitMode> Drop for Taken<'_, T, W> {
            fn drop(&mut self) {
                self.consumer.release(self.n);
            }
        }
        debug_assert!(n <= self.cached_tail.wrapping_sub(self.head));
        let mut taken = Taken {
            consumer: self,
            n: 0,
        };
        while taken.n < n {
            let c = &*taken.consumer;
            let index = c.head.wrapping_add(taken.n);
            c.shared.tracker.read(index & c.mask);
            // SAFETY: the n slots from `head` hold published items; each is read once, and
            // counted as taken before `f` runs, so the guard releases it even if `f`
            // panics (it is then never read or dropped again).
            let v = unsafe { (*c.slot(index)).assume_init_read() };
            taken.n += 1;
            f(v);
        }
        n
    }

    /// Bulk into a `Vec`: moves exactly `n` items onto `out` and returns `true`, or takes
    /// nothing and returns `false` if fewer are available.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push_burst(&[1, 2]);
    /// let mut v = Vec::new();
    /// assert!(!rx.pop_bulk_into(&mut v, 3));
    /// assert!(rx.pop_bulk_into(&mut v, 2));
    /// ```
    #[must_use = "`false`: nothing was taken"]
    pub fn pop_bulk_into(&mut self, out: &mut Vec<T>, n: usize) -> bool {
        if self.available_for(n) < n {
            return false;
        }
        self.pop_burst_into(out, n);
        true
    }

    /// Chooses which reads of the producer's index, by this end with nothing left to take,
    /// may first wait a moment while this end trails a streaming producer (see "Polite
    /// polling" in the [module docs](super) for when that pays and when it costs). The
    /// default, [`PolitePolling::Off`], never waits; [`PolitePolling::LargeReads`] lets
    /// only reads that ask for at least 256 bytes of items wait.
    ///
    /// ```
    /// use flowline::fifo::spsc::{self, PolitePolling};
    /// let (mut tx, mut rx) = spsc::channel::<u32>(64).unwrap();
    /// rx.set_polite(PolitePolling::On);
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.pop(), Some(1)); // a pause never hides an item that is there
    /// assert_eq!(rx.polite(), PolitePolling::On);
    /// ```
    pub fn set_polite(&mut self, mode: PolitePolling) {
        self.polite.set_enabled(mode != PolitePolling::Off);
        self.polite_mode = mode;
        self.polite_min = mode.min_want(core::mem::size_of::<T>());
    }

    /// Which reads may wait politely ([`set_polite`](Self::set_polite)).
    ///
    /// ```
    /// use flowline::fifo::spsc::{self, PolitePolling};
    /// assert_eq!(spsc::channel::<u8>(8).unwrap().1.polite(), PolitePolling::Off);
    /// ```
    #[must_use]
    pub fn polite(&self) -> PolitePolling {
        self.polite_mode
    }

    /// Slots the ring has.
    ///
    /// ```
    /// assert_eq!(flowline::fifo::spsc::channel::<u8>(5).unwrap().1.capacity(), 8);
    /// ```
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Items available now (a snapshot: the producer may add more meanwhile, so the true
    /// value can only be higher). Reads the producer's line.
    ///
    /// ```
    /// let (mut tx, rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.len(), 1);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        // Acquire: pairs with the producer's Release `tail` store.
        self.shared
            .tail
            .load(Ordering::Acquire)
            .wrapping_sub(self.head)
    }

    /// Free slots now (a snapshot: the true value can only be lower).
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert_eq!(rx.free(), 4);
    /// ```
    #[must_use]
    pub fn free(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Whether nothing is available now (a snapshot).
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::spsc::channel::<u8>(4).unwrap();
    /// assert!(rx.is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the ring is full now (a snapshot).
    ///
    /// ```
    /// let (mut tx, rx) = flowline::fifo::spsc::channel::<u8>(1).unwrap();
    /// tx.push(1).unwrap();
    /// assert!(rx.is_full());
    /// ```
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.free() == 0
    }

    /// Whether the producer has been dropped. Once it has, the items still in the ring are
    /// all there will ever be: a consumer that sees `is_abandoned()` and then an empty ring
    /// is done.
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u8>(2).unwrap();
    /// tx.push(1).unwrap();
    /// drop(tx);
    /// assert!(rx.is_abandoned());
    /// assert_eq!(rx.pop(), Some(1));
    /// ```
    #[must_use]
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release store in the producer's Drop, so the final `tail`
        // is visible to the loads that follow.
        self.shared.producer_gone.load(Ordering::Acquire)
    }
}

impl<T, W: WaitMode> Drop for Consumer<T, W> {
    /// One out-of-line call with the values it needs, as `Producer`'s drop.
    #[inline]
    fn drop(&mut self) {
        // A registration that an async read left (it returned `Pending`): withdrawn, its
        // waker dropped with no lock held, before the end's departure is published.
        #[cfg(any(feature = "futures-io", feature = "tokio-io"))]
        if W::WAITS {
            self.io.withdraw(self.shared.items());
        }
        // SAFETY: taken once, here, and the field is not used again.
        let shared = unsafe { ManuallyDrop::take(&mut self.shared) };
        consumer_gone::<T, W>(shared, self.head);
    }
}

/// What dropping a [`Consumer`] does, given its share of the ring and its index.
#[inline(never)]
// `W` says whether to wake a sleeper, which only a build with `std` can have.
#[cfg_attr(not(feature = "std"), allow(clippy::extra_unused_type_parameters))]
pub(super) fn consumer_gone<T, W: WaitMode>(shared: HandleArc<Shared<T>>, head: usize) {
    // The final index: `Shared::drop` drops what lies between it and `tail`. Stored unless
    // already there (pops left pending, a forgotten chunk iterator: `head` moved past items
    // that are no longer in the ring). Relaxed: this end is the only writer of `head`, so
    // the load reads its own last store.
    if head != shared.head.load(Ordering::Relaxed) {
        // Release: as in `publish_head`.
        shared.head.store(head, Ordering::Release);
    }
    // Release: pairs with the producer's Acquire in `is_abandoned`.
    shared.consumer_gone.store(true, Ordering::Release);
    // A producer sleeping in `push_wait` learns that nothing more will be taken (and that
    // the slots released just above are free).
    #[cfg(feature = "std")]
    if W::WAITS {
        shared.head.notify();
    }
}

impl<T, W: WaitMode> fmt::Debug for Consumer<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spsc::Consumer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}
