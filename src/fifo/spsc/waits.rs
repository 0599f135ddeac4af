//! Blocking waits of a waitable SPSC ring (`std`): each end waits by its
//! [`WaitStrategy`] for room or items, sleeping on the sleepers beside the other end's
//! index (see [`crate::wait`] for the protocol).

use super::*;

/// Blocking operations (see [`crate::wait`]): they wait by this end's [`WaitStrategy`].
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
impl<T> Producer<T, Wait> {
    /// Sets how [`push_wait`](Self::push_wait) waits (default:
    /// [`WaitStrategy::default`]).
    ///
    /// ```
    /// use flowline::wait::WaitStrategy;
    /// let (mut tx, _rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// tx.set_wait_strategy(WaitStrategy::Spin);
    /// assert_eq!(tx.wait_strategy(), WaitStrategy::Spin);
    /// ```
    pub fn set_wait_strategy(&mut self, strategy: WaitStrategy) {
        self.strategy = strategy;
    }

    /// How [`push_wait`](Self::push_wait) waits.
    ///
    /// ```
    /// let (tx, _rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(tx.wait_strategy(), flowline::wait::WaitStrategy::default());
    /// ```
    #[must_use]
    pub fn wait_strategy(&self) -> WaitStrategy {
        self.strategy
    }

    /// Appends `value`, waiting up to `timeout` for room. A `timeout` too large to add to
    /// the current time (`Duration::MAX`) waits without a deadline. Costs what
    /// [`push`](Self::push) costs when there is room.
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] if the consumer is gone (checked first: an item is never
    /// pushed into a ring whose consumer's drop this thread can already see; a drop racing
    /// the call may come after the push), [`WaitError::Timeout`] if the ring stayed full;
    /// either way the item comes back in the error.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u32>(1).unwrap();
    /// tx.push(1).unwrap();
    /// let t = std::thread::spawn(move || (rx.pop_wait(Duration::from_secs(30)), rx.pop_wait(Duration::from_secs(30))));
    /// tx.push_wait(2, Duration::from_secs(30)).unwrap();
    /// assert_eq!(t.join().unwrap(), (Ok(1), Ok(2)));
    /// ```
    #[inline]
    #[doc(alias = "send")]
    pub fn push_wait(&mut self, value: T, timeout: Duration) -> Result<(), PushWaitError<T>> {
        // The fast path is `push` and one load of a line nobody writes until the drop.
        if self.consumer_gone_now() {
            return Err(PushWaitError {
                error: WaitError::Disconnected,
                value,
            });
        }
        match self.push(value) {
            Ok(()) => Ok(()),
            Err(crate::fifo::PushError::Full(value)) => self.push_wait_slow(value, timeout),
        }
    }

    #[cold]
    #[inline(never)]
    fn push_wait_slow(&mut self, value: T, timeout: Duration) -> Result<(), PushWaitError<T>> {
        let mut slot = Some(value);
        let r = wait::wait_after_miss(
            self,
            self.strategy,
            timeout,
            |p| {
                wait::poll_push(
                    p,
                    &mut slot,
                    |p, v| p.push(v).map_err(crate::fifo::PushError::into_inner),
                    Producer::is_abandoned,
                )
            },
            Producer::has_room_or_closed,
            |p| p.shared.room(),
        );
        match (r, slot) {
            (Ok(()), _) => Ok(()),
            (Err(error), Some(value)) => Err(PushWaitError { error, value }),
            (Err(_), None) => unreachable!("the item is kept until it is pushed"),
        }
    }

    /// Burst with a wait: waits up to `timeout` until at least one slot is free, then
    /// copies as many items from the front of `items` as fit, with one index store, and
    /// returns how many (0 only for an empty `items`).
    ///
    /// # Errors
    ///
    /// As [`push_wait`](Self::push_wait); nothing was pushed.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(tx.push_burst_wait(&[1, 2, 3, 4, 5], Duration::from_secs(1)), Ok(4));
    /// assert_eq!(rx.pop(), Some(1));
    /// assert_eq!(tx.push_burst_wait(&[5], Duration::from_secs(1)), Ok(1));
    /// ```
    #[inline]
    pub fn push_burst_wait(&mut self, items: &[T], timeout: Duration) -> Result<usize, WaitError>
    where
        T: Copy,
    {
        if items.is_empty() {
            return Ok(0);
        }
        wait::push_burst_or_wait(
            self,
            |p| p.strategy,
            timeout,
            Producer::consumer_gone_now,
            Producer::is_abandoned,
            |p| p.push_burst(items),
            Producer::has_room_or_closed,
            |p| p.shared.room(),
        )
    }

    /// The sleeper's re-check: a slot is free, or the consumer is gone.
    pub(super) fn has_room_or_closed(&self) -> bool {
        // Acquire: as in `free_for` and `is_abandoned`.
        self.shared.consumer_gone.load(Ordering::Acquire)
            || self
                .tail
                .wrapping_sub(self.shared.head.load(Ordering::Acquire))
                <= self.mask
    }
}

/// Blocking operations (see [`crate::wait`]): they wait by this end's [`WaitStrategy`].
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
impl<T> Consumer<T, Wait> {
    /// Sets how [`pop_wait`](Self::pop_wait) and
    /// [`pop_burst_wait`](Self::pop_burst_wait) wait (default: [`WaitStrategy::default`]).
    ///
    /// ```
    /// use flowline::wait::WaitStrategy;
    /// let (_tx, mut rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// rx.set_wait_strategy(WaitStrategy::SpinYield { spins: 100 });
    /// assert_eq!(rx.wait_strategy(), WaitStrategy::SpinYield { spins: 100 });
    /// ```
    pub fn set_wait_strategy(&mut self, strategy: WaitStrategy) {
        self.strategy = strategy;
    }

    /// How the blocking pops wait.
    ///
    /// ```
    /// let (_tx, rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(rx.wait_strategy(), flowline::wait::WaitStrategy::default());
    /// ```
    #[must_use]
    pub fn wait_strategy(&self) -> WaitStrategy {
        self.strategy
    }

    /// Takes the oldest item, waiting up to `timeout` for one. A `timeout` too large to add
    /// to the current time (`Duration::MAX`) waits without a deadline. Costs what
    /// [`pop`](Self::pop) costs when an item is there.
    ///
    /// # Errors
    ///
    /// [`WaitError::Disconnected`] once the producer is gone and the ring is empty;
    /// [`WaitError::Timeout`] if nothing came in time.
    ///
    /// Before it sleeps it releases the slots that single pops left pending with lazy
    /// release on (see "Lazy release" in the [module docs](super)). Such a thread that pops
    /// single items here and then blocks elsewhere (in another ring's `push_wait`, say)
    /// should call [`release_pending`](Self::release_pending) first, or this ring's
    /// producer may wait for room that is already free.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u32>(4).unwrap();
    /// std::thread::spawn(move || tx.push(7).unwrap());
    /// assert_eq!(rx.pop_wait(Duration::from_secs(30)), Ok(7));
    /// ```
    #[inline]
    #[doc(alias = "recv")]
    pub fn pop_wait(&mut self, timeout: Duration) -> Result<T, WaitError> {
        match self.pop() {
            Some(v) => Ok(v),
            None => self.pop_wait_slow(timeout),
        }
    }

    #[cold]
    #[inline(never)]
    fn pop_wait_slow(&mut self, timeout: Duration) -> Result<T, WaitError> {
        wait::wait_after_miss(
            self,
            self.strategy,
            timeout,
            |c| wait::poll_one(c, Consumer::pop, Consumer::is_abandoned),
            Consumer::has_items_or_closed,
            |c| c.shared.items(),
        )
    }

    /// Burst with a wait: waits up to `timeout` until at least one item is there, then
    /// moves up to `max` items onto `out` with one index store, and returns how many (0
    /// only for `max == 0`).
    ///
    /// # Errors
    ///
    /// As [`pop_wait`](Self::pop_wait); `out` is unchanged.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u32>(8).unwrap();
    /// std::thread::spawn(move || tx.push_burst(&[1, 2, 3]));
    /// let mut v = Vec::new();
    /// while v.len() < 3 {
    ///     rx.pop_burst_wait(&mut v, 8, Duration::from_secs(30)).unwrap();
    /// }
    /// assert_eq!(v, [1, 2, 3]);
    /// ```
    #[inline]
    pub fn pop_burst_wait(
        &mut self,
        out: &mut Vec<T>,
        max: usize,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        if max == 0 {
            return Ok(0);
        }
        // The fast path is `pop_burst_into`; the wait (and its copy of the strategy) only
        // after it found nothing, out of line.
        match self.pop_burst_into(out, max) {
            0 => self.pop_burst_wait_slow(out, max, timeout),
            n => Ok(n),
        }
    }

    #[cold]
    #[inline(never)]
    fn pop_burst_wait_slow(
        &mut self,
        out: &mut Vec<T>,
        max: usize,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        wait::wait_after_miss(
            self,
            self.strategy,
            timeout,
            |c| wait::poll_items(c, |c| c.pop_burst_into(out, max), Consumer::is_abandoned),
            Consumer::has_items_or_closed,
            |c| c.shared.items(),
        )
    }

    /// Waits until at least one item is there, without taking it; returns how many this
    /// end sees. For a thread that consumes through other calls (chunks, several rings)
    /// and only needs to sleep until there is work.
    ///
    /// # Errors
    ///
    /// [`WaitError::Timeout`] if `timeout` passed first; [`WaitError::Disconnected`] if
    /// the producer is gone and the ring is empty.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowline::wait::WaitError;
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u8>(4).unwrap();
    /// assert_eq!(rx.wait_for_items(Duration::from_millis(1)), Err(WaitError::Timeout));
    /// tx.push(1).unwrap();
    /// assert_eq!(rx.wait_for_items(Duration::from_secs(1)), Ok(1));
    /// assert_eq!(rx.pop(), Some(1));
    /// drop(tx);
    /// assert_eq!(rx.wait_for_items(Duration::from_secs(1)), Err(WaitError::Disconnected));
    /// ```
    pub fn wait_for_items(&mut self, timeout: Duration) -> Result<usize, WaitError> {
        wait::wait_loop(
            self,
            self.strategy,
            timeout,
            |c| wait::poll_items(c, Consumer::refresh, Consumer::is_abandoned),
            Consumer::has_items_or_closed,
            |c| c.shared.items(),
        )
    }

    /// The sleeper's re-check: an item is published, or the producer is gone.
    pub(super) fn has_items_or_closed(&self) -> bool {
        // Acquire: as in `available_for` and `is_abandoned`.
        self.shared.tail.load(Ordering::Acquire) != self.head
            || self.shared.producer_gone.load(Ordering::Acquire)
    }
}
