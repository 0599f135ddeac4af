//! The async waits of the waitable index rings (feature `async`): futures that any executor
//! can poll and, with feature `stream`, the consumer as a `Stream`, written once for both
//! rings.
//!
//! Each is generic over a waitable ring end, the `spsc` and `mpsc` ends of mode
//! [`Wait`](super::Wait) (a sealed set), and each ring names them for its own ends:
//! [`spsc::PopFuture<'a, T>`](super::spsc::PopFuture) is
//! `PopFuture<'a, spsc::Consumer<T, Wait>>`, made by
//! [`spsc::Consumer::pop_async`](super::spsc::Consumer::pop_async).
//!
//! They are woken by the other end's publications through the same sleeper slot as the
//! blocking waits (a publication checks it with one load; see [`crate::wait`]). A future
//! that finds nothing first yields to its executor as many times as the end's
//! [`WaitStrategy`] has spins and yields together (136 by default; each a self-wake, so a
//! partner task runs meanwhile and no registration is needed when it answers in time),
//! then registers its waker (which costs the heavy barrier of [`crate::wait`]); `Spin` and
//! `SpinYield` strategies never register (the task stays runnable: busy). A future that
//! finds its ring ready completes in its first poll, inlined into the awaiting task; after
//! an end's cooperative budget of such completions in a row (`set_async_budget`), the next
//! one yields once.
//!
//! As with the blocking waits, a consumer with lazy release on (`set_lazy_release`) that
//! pops single items and then awaits something else (another ring's `push_async`, say)
//! should call `release_pending` first, or its producers may wait for room that is
//! already free (see "Lazy release" in the module docs of either ring).

use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::wait::{self, Coop, PushWaitError, Sleepers, WaitError, WaitStrategy};

/// What the futures need of a ring end: implemented by the waitable `spsc` and `mpsc` ends
/// only (the module is not reachable from outside the crate).
pub(super) mod sealed {
    use super::*;

    /// A waitable consumer end.
    #[allow(private_interfaces)] // sealed: nameable only inside the crate
    pub trait Consumer {
        /// The ring's item.
        type Item;
        /// The ring's module, for messages (`"spsc"`).
        const RING: &'static str;
        /// A single pop.
        fn pop_one(&mut self) -> Option<Self::Item>;
        /// Up to `max` items onto `out`; how many.
        fn pop_into(&mut self, out: &mut Vec<Self::Item>, max: usize) -> usize;
        /// Every producer is gone.
        fn abandoned(&self) -> bool;
        /// A re-check for a registered waiter: an item there, or every producer gone.
        fn ready_or_closed(&self) -> bool;
        /// Publishes slots that single pops consumed.
        fn release(&mut self);
        /// The end's wait strategy.
        fn strategy(&self) -> WaitStrategy;
        /// The end's cooperative budget.
        fn coop(&mut self) -> &mut Coop;
        /// The sleepers that the producers' publications wake.
        fn items(&self) -> &Sleepers;
    }

    /// A waitable producer end.
    #[allow(private_interfaces)] // sealed: nameable only inside the crate
    pub trait Producer {
        /// The ring's item.
        type Item;
        /// The ring's module, for messages (`"spsc"`).
        const RING: &'static str;
        /// A single push, or the item back.
        fn push_one(&mut self, value: Self::Item) -> Result<(), Self::Item>;
        /// The consumer is gone (an Acquire load).
        fn abandoned(&self) -> bool;
        /// The consumer is gone, by a Relaxed look (the busy path's check).
        fn gone_now(&self) -> bool;
        /// A re-check for a registered waiter: room, or the consumer gone.
        fn ready_or_closed(&self) -> bool;
        /// The end's wait strategy.
        fn strategy(&self) -> WaitStrategy;
        /// The end's cooperative budget.
        fn coop(&mut self) -> &mut Coop;
        /// The sleepers that the consumer's releases wake.
        fn room(&self) -> &Sleepers;
    }
}

/// One poll of an async wait for the next item, for [`PopFuture`] and [`ItemStream`]:
/// `key` and `yielded` are the waiting future's registration and yield count.
fn poll_pop_one<C: sealed::Consumer>(
    c: &mut C,
    key: &mut Option<u64>,
    yielded: &mut u32,
    cx: &mut Context<'_>,
) -> Poll<Result<C::Item, WaitError>> {
    let strategy = c.strategy();
    wait::poll_async(
        c,
        key,
        yielded,
        strategy,
        cx,
        |c| wait::poll_one(c, C::pop_one, C::abandoned),
        C::ready_or_closed,
        |c| c.items(),
        |c| c.coop(),
    )
}

/// The future of `pop_async`: the next item, or [`WaitError::Disconnected`] once every
/// producer is gone and the ring is empty.
///
/// Dropping it while it waits withdraws its registration; a wake it missed goes to nobody,
/// and the items stay in the ring. Polling it again after it completed panics (it never
/// takes a second item).
#[must_use = "futures do nothing unless polled"]
pub struct PopFuture<'a, C: sealed::Consumer> {
    consumer: &'a mut C,
    /// This task's registration on the ring's item sleepers, if any.
    key: Option<u64>,
    /// Times it yielded to the executor before registering.
    yielded: u32,
    /// It returned `Ready`.
    done: bool,
}

impl<'a, C: sealed::Consumer> PopFuture<'a, C> {
    pub(super) fn new(consumer: &'a mut C) -> Self {
        PopFuture {
            consumer,
            key: None,
            yielded: 0,
            done: false,
        }
    }

    /// [`Future::poll`] past its busy case.
    #[inline(never)]
    fn poll_slow(&mut self, cx: &mut Context<'_>) -> Poll<Result<C::Item, WaitError>> {
        assert!(
            !self.done,
            "{}::PopFuture polled after it completed",
            C::RING
        );
        let r = poll_pop_one(self.consumer, &mut self.key, &mut self.yielded, cx);
        self.done = r.is_ready();
        r
    }
}

impl<C: sealed::Consumer> Future for PopFuture<'_, C> {
    type Output = Result<C::Item, WaitError>;

    /// Inlined into the awaiting task is only the busy ring's case (nothing registered,
    /// budget left, an item there); the rest is out of line.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.key.is_none() && !this.done && this.consumer.coop().has_left() {
            if let Some(v) = this.consumer.pop_one() {
                this.consumer.coop().spend_one();
                this.done = true;
                return Poll::Ready(Ok(v));
            }
        }
        this.poll_slow(cx)
    }
}

impl<C: sealed::Consumer> Drop for PopFuture<'_, C> {
    fn drop(&mut self) {
        self.consumer.items().deregister(&mut self.key);
    }
}

/// The name a future's `Debug` shows, as its ring's type alias names it, without
/// allocating: `spsc` if the ring is the SPSC one, else `mpsc`.
fn debug_name(ring: &'static str, spsc: &'static str, mpsc: &'static str) -> &'static str {
    if ring == "spsc" {
        spsc
    } else {
        mpsc
    }
}

impl<C: sealed::Consumer> fmt::Debug for PopFuture<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(debug_name(C::RING, "spsc::PopFuture", "mpsc::PopFuture"))
            .field("registered", &self.key.is_some())
            .finish()
    }
}

/// The future of `pop_burst_async`: how many items it moved (at least one), or
/// [`WaitError::Disconnected`]. Polling it again after it completed panics (it never takes
/// a second burst).
#[must_use = "futures do nothing unless polled"]
pub struct PopBurstFuture<'a, C: sealed::Consumer> {
    consumer: &'a mut C,
    out: &'a mut Vec<C::Item>,
    max: usize,
    key: Option<u64>,
    yielded: u32,
    done: bool,
}

impl<'a, C: sealed::Consumer> PopBurstFuture<'a, C> {
    pub(super) fn new(consumer: &'a mut C, out: &'a mut Vec<C::Item>, max: usize) -> Self {
        PopBurstFuture {
            consumer,
            out,
            max,
            key: None,
            yielded: 0,
            done: false,
        }
    }
}

impl<C: sealed::Consumer> Future for PopBurstFuture<'_, C> {
    type Output = Result<usize, WaitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(
            !this.done,
            "{}::PopBurstFuture polled after it completed",
            C::RING
        );
        if this.max == 0 {
            this.done = true;
            return Poll::Ready(Ok(0));
        }
        let (out, max) = (&mut *this.out, this.max);
        let strategy = this.consumer.strategy();
        let r = wait::poll_async(
            &mut *this.consumer,
            &mut this.key,
            &mut this.yielded,
            strategy,
            cx,
            |c| wait::poll_items(c, |c| c.pop_into(out, max), C::abandoned),
            C::ready_or_closed,
            |c| c.items(),
            |c| c.coop(),
        );
        this.done = r.is_ready();
        r
    }
}

impl<C: sealed::Consumer> Drop for PopBurstFuture<'_, C> {
    fn drop(&mut self) {
        self.consumer.items().deregister(&mut self.key);
    }
}

impl<C: sealed::Consumer> fmt::Debug for PopBurstFuture<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(debug_name(
            C::RING,
            "spsc::PopBurstFuture",
            "mpsc::PopBurstFuture",
        ))
        .field("max", &self.max)
        .field("registered", &self.key.is_some())
        .finish()
    }
}

/// The future of `push_async`: `Ok` once the item is in, or the item back with
/// [`WaitError::Disconnected`] if the consumer is gone (checked first). Dropping it before
/// it completes drops the item.
#[must_use = "futures do nothing unless polled"]
pub struct PushFuture<'a, P: sealed::Producer> {
    producer: &'a mut P,
    value: Option<P::Item>,
    key: Option<u64>,
    yielded: u32,
}

// The item is moved in and out of the future, never pinned (no `Pin<&mut T>` is ever
// made), so the future may move whatever the item is.
impl<P: sealed::Producer> Unpin for PushFuture<'_, P> {}

impl<'a, P: sealed::Producer> PushFuture<'a, P> {
    pub(super) fn new(producer: &'a mut P, value: P::Item) -> Self {
        PushFuture {
            producer,
            value: Some(value),
            key: None,
            yielded: 0,
        }
    }

    /// [`Future::poll`] past its busy case.
    #[inline(never)]
    fn poll_slow(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), PushWaitError<P::Item>>> {
        let slot = &mut self.value;
        let strategy = self.producer.strategy();
        let r = wait::poll_async(
            &mut *self.producer,
            &mut self.key,
            &mut self.yielded,
            strategy,
            cx,
            |p| wait::poll_push(p, slot, P::push_one, P::abandoned),
            P::ready_or_closed,
            |p| p.room(),
            |p| p.coop(),
        );
        match r {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Ready(Err(error)) => match self.value.take() {
                Some(value) => Poll::Ready(Err(PushWaitError { error, value })),
                None => panic!("{}::PushFuture polled after it completed", P::RING),
            },
        }
    }
}

impl<P: sealed::Producer> Future for PushFuture<'_, P> {
    type Output = Result<(), PushWaitError<P::Item>>;

    /// Inlined into the awaiting task is only the busy ring's case (nothing registered,
    /// budget left, the consumer there by a Relaxed look as in `push_wait`, room for the
    /// item); the rest is out of line.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // The item is taken before the look at the consumer's flag: an atomic load would
        // keep the compiler from knowing what the future holds.
        if this.key.is_none() && this.producer.coop().has_left() {
            if let Some(value) = this.value.take() {
                if !this.producer.gone_now() {
                    match this.producer.push_one(value) {
                        Ok(()) => {
                            this.producer.coop().spend_one();
                            return Poll::Ready(Ok(()));
                        }
                        Err(value) => this.value = Some(value),
                    }
                } else {
                    this.value = Some(value);
                }
            }
        }
        this.poll_slow(cx)
    }
}

impl<P: sealed::Producer> Drop for PushFuture<'_, P> {
    fn drop(&mut self) {
        self.producer.room().deregister(&mut self.key);
    }
}

impl<P: sealed::Producer> fmt::Debug for PushFuture<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(debug_name(P::RING, "spsc::PushFuture", "mpsc::PushFuture"))
            .field("pending_item", &self.value.is_some())
            .field("registered", &self.key.is_some())
            .finish()
    }
}

/// The consumer as a [`futures_core::Stream`] of its items (feature `stream`), made by
/// `into_stream`: each item as `pop_async` takes it, waiting the same way, and `None` once
/// every producer is gone and the ring is empty (then always `None`: it is a
/// [`FusedStream`](futures_core::stream::FusedStream)). Dropping it withdraws a pending
/// registration and drops the consumer (the items left in the ring are dropped once, with
/// the last end).
///
/// ```
/// use core::pin::Pin;
/// use futures_core::Stream;
/// let (mut tx, rx) = flowline::fifo::spsc::waitable::<u32>(4).unwrap();
/// let t = std::thread::spawn(move || {
///     for v in 1..=3 {
///         tx.push_wait(v, std::time::Duration::MAX).unwrap();
///     }
/// });
/// let mut items = rx.into_stream();
/// let mut got = Vec::new();
/// flowline::wait::block_on(async {
///     while let Some(v) = core::future::poll_fn(|cx| Pin::new(&mut items).poll_next(cx)).await {
///         got.push(v);
///     }
/// });
/// t.join().unwrap();
/// assert_eq!(got, [1, 2, 3]);
/// ```
#[cfg(feature = "stream")]
#[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
#[must_use = "streams do nothing unless polled"]
pub struct ItemStream<C: sealed::Consumer> {
    /// `None` only inside `into_inner`, which moves it out.
    consumer: Option<C>,
    key: Option<u64>,
    yielded: u32,
    /// It returned `None`.
    done: bool,
}

// The consumer is reached by `&mut` only, never pinned, and `into_inner` moves it out.
#[cfg(feature = "stream")]
impl<C: sealed::Consumer> Unpin for ItemStream<C> {}

#[cfg(feature = "stream")]
impl<C: sealed::Consumer> ItemStream<C> {
    pub(super) fn new(consumer: C) -> Self {
        ItemStream {
            consumer: Some(consumer),
            key: None,
            yielded: 0,
            done: false,
        }
    }

    /// The consumer back, with its registration (if any) withdrawn.
    ///
    /// # Panics
    ///
    /// Never: the consumer is there from `into_stream` until this call, which consumes
    /// the stream.
    ///
    /// ```
    /// let (mut tx, rx) = flowline::fifo::mpsc::waitable::<u32>(4).unwrap();
    /// tx.push(5).unwrap();
    /// let mut rx = rx.into_stream().into_inner();
    /// assert_eq!(rx.pop(), Some(5));
    /// ```
    pub fn into_inner(mut self) -> C {
        let consumer = self.consumer.take().expect("present until into_inner");
        consumer.items().deregister(&mut self.key);
        consumer
    }

    /// `release_pending` on the stream's consumer: with lazy release on, a task that takes
    /// items from the stream and then awaits something else (another ring's `push_async`,
    /// say) calls it first, or this ring's producers may wait for room that is already
    /// free (see "Lazy release" in the module docs of either ring).
    ///
    /// ```
    /// let (mut tx, mut rx) = flowline::fifo::spsc::waitable::<u32>(1024).unwrap();
    /// rx.set_lazy_release(true);
    /// assert_eq!(tx.push_burst(&[0; 1024]), 1024);
    /// let mut s = rx.into_stream();
    /// # use core::pin::Pin; use futures_core::Stream;
    /// # let w = std::task::Waker::noop();
    /// assert!(Pin::new(&mut s).poll_next(&mut std::task::Context::from_waker(&w)).is_ready());
    /// assert!(tx.push(1).is_err()); // the slot is not released yet
    /// s.release_pending();
    /// assert!(tx.push(1).is_ok());
    /// ```
    pub fn release_pending(&mut self) {
        if let Some(c) = self.consumer.as_mut() {
            c.release();
        }
    }
}

#[cfg(feature = "stream")]
impl<C: sealed::Consumer> futures_core::Stream for ItemStream<C> {
    type Item = C::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<C::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let consumer = this.consumer.as_mut().expect("present until into_inner");
        match poll_pop_one(consumer, &mut this.key, &mut this.yielded, cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(v)) => {
                // The next item's wait starts a fresh window, as a new `pop_async`.
                this.yielded = 0;
                Poll::Ready(Some(v))
            }
            // Only `Disconnected`: a stream wait has no deadline.
            Poll::Ready(Err(_)) => {
                this.done = true;
                Poll::Ready(None)
            }
        }
    }
}

#[cfg(feature = "stream")]
impl<C: sealed::Consumer> futures_core::stream::FusedStream for ItemStream<C> {
    fn is_terminated(&self) -> bool {
        self.done
    }
}

#[cfg(feature = "stream")]
impl<C: sealed::Consumer> Drop for ItemStream<C> {
    fn drop(&mut self) {
        if let Some(c) = self.consumer.as_mut() {
            c.items().deregister(&mut self.key);
        }
    }
}

#[cfg(feature = "stream")]
impl<C: sealed::Consumer> fmt::Debug for ItemStream<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(debug_name(C::RING, "spsc::ItemStream", "mpsc::ItemStream"))
            .field("registered", &self.key.is_some())
            .field("terminated", &self.done)
            .finish()
    }
}
