//! Bounded packet FIFOs: one cache-line transfer moves many packets.
//!
//! * [`spsc`]: single producer, single consumer.
//! * [`mpsc`]: many producers (cloned handles), one consumer; a stalled producer blocks
//!   no other producer.
//! * [`niche`]: single producer, single consumer, for items that travel as one non-null
//!   pointer (packet pointers, non-zero handles): no shared index, the slots themselves
//!   say full or empty (FastForward).
//!
//! Shared by the index rings (`spsc`, `mpsc`): capacity is fixed at creation and rounded up to a power of two
//! (every slot usable); the producer's and the consumer's indices live on separate
//! `CachePadded` lines; each side keeps a private copy of the other side's index and
//! reloads it only when that copy says full (producer) or empty (consumer), so a burst
//! costs one read of the remote line at most, and usually none. Burst operations take as
//! many items as fit; bulk operations all or nothing; chunks hand out slots to fill or read
//! in place.

use core::fmt;

/// The async forms of a waitable ring's waits (feature `async`), the same for both rings:
/// expanded inside `spsc` and `mpsc`, where `Consumer`, `Producer`, their `pop`, `push`,
/// `pop_burst_into`, `is_abandoned`, re-checks and sleeper slots have the same names.
#[cfg(feature = "async")]
macro_rules! async_waits {
    ($ring:ident) => {
        /// The future of [`Consumer::pop_async`]: the next item, or
        /// [`WaitError::Disconnected`] once every producer is gone and the ring is empty.
        ///
        /// Dropping it while it waits withdraws its registration; a wake it missed goes to
        /// nobody, and the items stay in the ring. Polling it again after it completed
        /// panics (it never takes a second item).
        #[must_use = "futures do nothing unless polled"]
        pub struct PopFuture<'a, T> {
            consumer: &'a mut Consumer<T, Wait>,
            /// This task's registration on the ring's item sleepers, if any.
            key: Option<u64>,
            /// Times it yielded to the executor before registering.
            yielded: u32,
            /// It returned `Ready`.
            done: bool,
        }

        impl<T> core::future::Future for PopFuture<'_, T> {
            type Output = Result<T, WaitError>;

            /// Inlined into the awaiting task is only the busy ring's case (nothing
            /// registered, budget left, an item there); the rest is out of line.
            #[inline]
            fn poll(
                self: core::pin::Pin<&mut Self>,
                cx: &mut core::task::Context<'_>,
            ) -> core::task::Poll<Self::Output> {
                let this = self.get_mut();
                if this.key.is_none() && !this.done && this.consumer.coop.has_left() {
                    if let Some(v) = this.consumer.pop() {
                        this.consumer.coop.spend_one();
                        this.done = true;
                        return core::task::Poll::Ready(Ok(v));
                    }
                }
                this.poll_slow(cx)
            }
        }

        impl<T> PopFuture<'_, T> {
            /// [`Future::poll`](core::future::Future::poll) past its busy case.
            #[inline(never)]
            fn poll_slow(
                &mut self,
                cx: &mut core::task::Context<'_>,
            ) -> core::task::Poll<Result<T, WaitError>> {
                assert!(
                    !self.done,
                    concat!(stringify!($ring), "::PopFuture polled after it completed")
                );
                let r = self
                    .consumer
                    .poll_pop_one(&mut self.key, &mut self.yielded, cx);
                self.done = r.is_ready();
                r
            }
        }

        impl<T> Drop for PopFuture<'_, T> {
            fn drop(&mut self) {
                self.consumer.shared.items().deregister(&mut self.key);
            }
        }

        impl<T> fmt::Debug for PopFuture<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(concat!(stringify!($ring), "::PopFuture"))
                    .field("registered", &self.key.is_some())
                    .finish()
            }
        }

        /// The future of [`Consumer::pop_burst_async`]: how many items it moved (at least
        /// one), or [`WaitError::Disconnected`]. Polling it again after it completed
        /// panics (it never takes a second burst).
        #[must_use = "futures do nothing unless polled"]
        pub struct PopBurstFuture<'a, T> {
            consumer: &'a mut Consumer<T, Wait>,
            out: &'a mut Vec<T>,
            max: usize,
            key: Option<u64>,
            yielded: u32,
            done: bool,
        }

        impl<T> core::future::Future for PopBurstFuture<'_, T> {
            type Output = Result<usize, WaitError>;

            fn poll(
                self: core::pin::Pin<&mut Self>,
                cx: &mut core::task::Context<'_>,
            ) -> core::task::Poll<Self::Output> {
                let this = self.get_mut();
                assert!(
                    !this.done,
                    concat!(stringify!($ring), "::PopBurstFuture polled after it completed")
                );
                if this.max == 0 {
                    this.done = true;
                    return core::task::Poll::Ready(Ok(0));
                }
                let (out, max) = (&mut *this.out, this.max);
                let strategy = this.consumer.strategy;
                let r = wait::poll_async(
                    &mut *this.consumer,
                    &mut this.key,
                    &mut this.yielded,
                    strategy,
                    cx,
                    |c| wait::poll_items(c, |c| c.pop_burst_into(out, max), Consumer::is_abandoned),
                    Consumer::has_items_or_closed,
                    |c| c.shared.items(),
                    |c| &mut c.coop,
                );
                this.done = r.is_ready();
                r
            }
        }

        impl<T> Drop for PopBurstFuture<'_, T> {
            fn drop(&mut self) {
                self.consumer.shared.items().deregister(&mut self.key);
            }
        }

        impl<T> fmt::Debug for PopBurstFuture<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(concat!(stringify!($ring), "::PopBurstFuture"))
                    .field("max", &self.max)
                    .field("registered", &self.key.is_some())
                    .finish()
            }
        }

        /// The future of [`Producer::push_async`]: `Ok` once the item is in, or the item
        /// back with [`WaitError::Disconnected`] if the consumer is gone (checked first).
        /// Dropping it before it completes drops the item.
        #[must_use = "futures do nothing unless polled"]
        pub struct PushFuture<'a, T> {
            producer: &'a mut Producer<T, Wait>,
            value: Option<T>,
            key: Option<u64>,
            yielded: u32,
        }

        // The item is moved in and out of the future, never pinned (no `Pin<&mut T>` is
        // ever made), so the future may move whatever `T` is.
        impl<T> Unpin for PushFuture<'_, T> {}

        impl<T> core::future::Future for PushFuture<'_, T> {
            type Output = Result<(), PushWaitError<T>>;

            /// Inlined into the awaiting task is only the busy ring's case (nothing
            /// registered, budget left, the consumer there by a Relaxed look as in
            /// `push_wait`, room for the item); the rest is out of line.
            #[inline]
            fn poll(
                self: core::pin::Pin<&mut Self>,
                cx: &mut core::task::Context<'_>,
            ) -> core::task::Poll<Self::Output> {
                let this = self.get_mut();
                // The item is taken before the look at the consumer's flag: an atomic load
                // would keep the compiler from knowing what the future holds.
                if this.key.is_none() && this.producer.coop.has_left() {
                    if let Some(value) = this.value.take() {
                        if !this.producer.consumer_gone_now() {
                            match this.producer.push(value) {
                                Ok(()) => {
                                    this.producer.coop.spend_one();
                                    return core::task::Poll::Ready(Ok(()));
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

        impl<T> PushFuture<'_, T> {
            /// [`Future::poll`](core::future::Future::poll) past its busy case.
            #[inline(never)]
            fn poll_slow(
                &mut self,
                cx: &mut core::task::Context<'_>,
            ) -> core::task::Poll<Result<(), PushWaitError<T>>> {
                let this = self;
                let slot = &mut this.value;
                let strategy = this.producer.strategy;
                let r = wait::poll_async(
                    &mut *this.producer,
                    &mut this.key,
                    &mut this.yielded,
                    strategy,
                    cx,
                    |p| wait::poll_push(p, slot, Producer::push, Producer::is_abandoned),
                    Producer::has_room_or_closed,
                    |p| p.shared.room(),
                    |p| &mut p.coop,
                );
                match r {
                    core::task::Poll::Pending => core::task::Poll::Pending,
                    core::task::Poll::Ready(Ok(())) => core::task::Poll::Ready(Ok(())),
                    core::task::Poll::Ready(Err(error)) => match this.value.take() {
                        Some(value) => core::task::Poll::Ready(Err(PushWaitError { error, value })),
                        None => panic!(concat!(
                            stringify!($ring),
                            "::PushFuture polled after it completed"
                        )),
                    },
                }
            }
        }

        impl<T> Drop for PushFuture<'_, T> {
            fn drop(&mut self) {
                self.producer.shared.room().deregister(&mut self.key);
            }
        }

        impl<T> fmt::Debug for PushFuture<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(concat!(stringify!($ring), "::PushFuture"))
                    .field("pending_item", &self.value.is_some())
                    .field("registered", &self.key.is_some())
                    .finish()
            }
        }

        /// Async waits (feature `async`): futures that any executor can poll, woken by the
        /// producer's publications through the same sleeper slot as
        /// [`pop_wait`](Consumer::pop_wait) (a publication checks it with one load; see
        /// [`crate::wait`]). A future that finds nothing first yields to its executor as
        /// many times as the end's [`WaitStrategy`](crate::wait::WaitStrategy) has spins
        /// and yields together (136 by default; each a self-wake, so a partner task runs
        /// meanwhile and no registration is needed when it answers in time), then
        /// registers its waker (which costs the heavy barrier of [`crate::wait`]); `Spin`
        /// and `SpinYield` strategies never register (the task stays runnable: busy).
        ///
        /// As with the blocking waits, a consumer that pops single items and then awaits
        /// something else (another ring's `push_async`, say) should call
        /// `release_pending` first, or its producers may wait for room that is already
        /// free (see "Lazy release" in the module docs of either ring).
        #[cfg_attr(docsrs, doc(cfg(feature = "async")))]
        impl<T> Consumer<T, Wait> {
            /// Waits for the next item without blocking the thread: see [`PopFuture`].
            ///
            /// ```
            #[doc = concat!("let (mut tx, mut rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(4).unwrap();")]
            /// let t = std::thread::spawn(move || tx.push(7).unwrap());
            /// # flowline::wait::block_on(async {
            /// assert_eq!(rx.pop_async().await, Ok(7));
            /// t.join().unwrap();
            /// assert!(rx.pop_async().await.is_err()); // the producer is gone
            /// # });
            /// ```
            pub fn pop_async(&mut self) -> PopFuture<'_, T> {
                PopFuture {
                    consumer: self,
                    key: None,
                    yielded: 0,
                    done: false,
                }
            }

            /// One poll of an async wait for the next item, for [`PopFuture`] and the
            /// item stream: `key` and `yielded` are the waiting future's registration and
            /// yield count.
            fn poll_pop_one(
                &mut self,
                key: &mut Option<u64>,
                yielded: &mut u32,
                cx: &mut core::task::Context<'_>,
            ) -> core::task::Poll<Result<T, WaitError>> {
                let strategy = self.strategy;
                wait::poll_async(
                    self,
                    key,
                    yielded,
                    strategy,
                    cx,
                    |c| wait::poll_one(c, Consumer::pop, Consumer::is_abandoned),
                    Consumer::has_items_or_closed,
                    |c| c.shared.items(),
                    |c| &mut c.coop,
                )
            }

            /// Waits until at least one item is there, then moves up to `max` onto `out`:
            /// see [`PopBurstFuture`] (ready at once with 0 for `max == 0`).
            ///
            /// ```
            #[doc = concat!("let (mut tx, mut rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(8).unwrap();")]
            /// tx.push(1).unwrap();
            /// tx.push(2).unwrap();
            /// let mut v = Vec::new();
            /// # flowline::wait::block_on(async {
            /// assert_eq!(rx.pop_burst_async(&mut v, 8).await, Ok(2));
            /// # });
            /// assert_eq!(v, [1, 2]);
            /// ```
            pub fn pop_burst_async<'a>(
                &'a mut self,
                out: &'a mut Vec<T>,
                max: usize,
            ) -> PopBurstFuture<'a, T> {
                PopBurstFuture {
                    consumer: self,
                    out,
                    max,
                    key: None,
                    yielded: 0,
                    done: false,
                }
            }

            /// Sets this end's cooperative budget (default
            /// [`DEFAULT_ASYNC_BUDGET`](crate::wait::DEFAULT_ASYNC_BUDGET), 128): after
            /// `budget` async operations of this end in a row that completed without
            /// waiting, the next one wakes its own task and returns `Pending` once, taking
            /// nothing, so that a task whose ring always has items lets the other tasks of
            /// a single-threaded executor run (tokio's channels do the same through
            /// tokio's own budget, which other crates cannot reach). Any wait refills it.
            /// `0`: never yield (the task may then starve others while items keep
            /// coming). The synchronous operations are not affected.
            ///
            /// ```
            #[doc = concat!("let (mut tx, mut rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(8).unwrap();")]
            /// rx.set_async_budget(2);
            /// assert_eq!(rx.async_budget(), 2);
            /// for v in 0..3 {
            ///     tx.push(v).unwrap();
            /// }
            /// use core::{future::Future, pin::pin, task::{Context, Poll, Waker}};
            /// let mut cx = Context::from_waker(Waker::noop());
            /// assert_eq!(pin!(rx.pop_async()).poll(&mut cx), Poll::Ready(Ok(0)));
            /// assert_eq!(pin!(rx.pop_async()).poll(&mut cx), Poll::Ready(Ok(1)));
            /// // Two in a row: the next future yields once, then takes the item.
            /// let mut third = pin!(rx.pop_async());
            /// assert_eq!(third.as_mut().poll(&mut cx), Poll::Pending);
            /// assert_eq!(third.poll(&mut cx), Poll::Ready(Ok(2)));
            /// ```
            pub fn set_async_budget(&mut self, budget: u32) {
                self.coop.set(budget);
            }

            /// This end's cooperative budget: see
            /// [`set_async_budget`](Self::set_async_budget).
            ///
            /// ```
            #[doc = concat!("let (_tx, rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(8).unwrap();")]
            /// assert_eq!(rx.async_budget(), flowline::wait::DEFAULT_ASYNC_BUDGET);
            /// ```
            pub fn async_budget(&self) -> u32 {
                self.coop.budget()
            }
        }

        /// Async waits (feature `async`): see the consumer's.
        #[cfg_attr(docsrs, doc(cfg(feature = "async")))]
        impl<T> Producer<T, Wait> {
            /// Waits for room without blocking the thread, then pushes `value`: see
            /// [`PushFuture`].
            ///
            /// ```
            #[doc = concat!("let (mut tx, mut rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(1).unwrap();")]
            /// tx.push(1).unwrap();
            /// let t = std::thread::spawn(move || {
            ///     std::thread::sleep(std::time::Duration::from_millis(10));
            ///     assert_eq!(rx.pop(), Some(1));
            ///     rx
            /// });
            /// # flowline::wait::block_on(async {
            /// tx.push_async(2).await.unwrap();
            /// # });
            /// assert_eq!(t.join().unwrap().pop(), Some(2));
            /// ```
            pub fn push_async(&mut self, value: T) -> PushFuture<'_, T> {
                PushFuture {
                    producer: self,
                    value: Some(value),
                    key: None,
                    yielded: 0,
                }
            }

            /// Sets this end's cooperative budget: as
            /// [`Consumer::set_async_budget`], for pushes (a push that yields keeps its
            /// item in the future).
            ///
            /// ```
            #[doc = concat!("let (mut tx, _rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(8).unwrap();")]
            /// tx.set_async_budget(0); // never yield
            /// assert_eq!(tx.async_budget(), 0);
            /// ```
            pub fn set_async_budget(&mut self, budget: u32) {
                self.coop.set(budget);
            }

            /// This end's cooperative budget: see
            /// [`set_async_budget`](Self::set_async_budget).
            ///
            /// ```
            #[doc = concat!("let (tx, _rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(8).unwrap();")]
            /// assert_eq!(tx.async_budget(), flowline::wait::DEFAULT_ASYNC_BUDGET);
            /// ```
            pub fn async_budget(&self) -> u32 {
                self.coop.budget()
            }
        }

        /// The consumer as a [`futures_core::Stream`] of its items (feature `stream`), made
        /// by [`Consumer::into_stream`]: each item as [`pop_async`](Consumer::pop_async)
        /// takes it, waiting the same way, and `None` once every producer is gone and the
        /// ring is empty (then always `None`: it is a
        /// [`FusedStream`](futures_core::stream::FusedStream)). Dropping it withdraws a
        /// pending registration and drops the consumer (the items left in the ring are
        /// dropped once, with the last end).
        ///
        /// ```
        /// use core::pin::Pin;
        /// use futures_core::Stream;
        #[doc = concat!("let (mut tx, rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(4).unwrap();")]
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
        pub struct ItemStream<T> {
            /// `None` only inside `into_inner`, which moves it out.
            consumer: Option<Consumer<T, Wait>>,
            key: Option<u64>,
            yielded: u32,
            /// It returned `None`.
            done: bool,
        }

        #[cfg(feature = "stream")]
        impl<T> ItemStream<T> {
            /// The consumer back, with its registration (if any) withdrawn.
            ///
            /// ```
            #[doc = concat!("let (mut tx, rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(4).unwrap();")]
            /// tx.push(5).unwrap();
            /// let mut rx = rx.into_stream().into_inner();
            /// assert_eq!(rx.pop(), Some(5));
            /// ```
            pub fn into_inner(mut self) -> Consumer<T, Wait> {
                let consumer = self.consumer.take().expect("present until into_inner");
                consumer.shared.items().deregister(&mut self.key);
                consumer
            }

            /// [`Consumer::release_pending`] on the stream's consumer: a task that takes
            /// items from the stream and then awaits something else (another ring's
            /// `push_async`, say) calls it first, or this ring's producers may wait for
            /// room that is already free (see "Lazy release" in the [module docs](self)).
            ///
            /// ```
            #[doc = concat!("let (mut tx, rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(1024).unwrap();")]
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
                    c.release_pending();
                }
            }
        }

        #[cfg(feature = "stream")]
        impl<T> futures_core::Stream for ItemStream<T> {
            type Item = T;

            fn poll_next(
                self: core::pin::Pin<&mut Self>,
                cx: &mut core::task::Context<'_>,
            ) -> core::task::Poll<Option<T>> {
                use core::task::Poll;
                let this = self.get_mut();
                if this.done {
                    return Poll::Ready(None);
                }
                let consumer = this.consumer.as_mut().expect("present until into_inner");
                match consumer.poll_pop_one(&mut this.key, &mut this.yielded, cx) {
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
        impl<T> futures_core::stream::FusedStream for ItemStream<T> {
            fn is_terminated(&self) -> bool {
                self.done
            }
        }

        #[cfg(feature = "stream")]
        impl<T> Drop for ItemStream<T> {
            fn drop(&mut self) {
                if let Some(c) = self.consumer.as_mut() {
                    c.shared.items().deregister(&mut self.key);
                }
            }
        }

        #[cfg(feature = "stream")]
        impl<T> fmt::Debug for ItemStream<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(concat!(stringify!($ring), "::ItemStream"))
                    .field("registered", &self.key.is_some())
                    .field("terminated", &self.done)
                    .finish()
            }
        }

        #[cfg(feature = "stream")]
        #[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
        impl<T> Consumer<T, Wait> {
            /// This consumer as a [`futures_core::Stream`] of its items: see [`ItemStream`].
            ///
            /// ```
            #[doc = concat!("let (mut tx, rx) = flowline::fifo::", stringify!($ring), "::waitable::<u32>(4).unwrap();")]
            /// tx.push(1).unwrap();
            /// drop(tx);
            /// let s = rx.into_stream();
            /// assert!(!futures_core::stream::FusedStream::is_terminated(&s));
            /// ```
            pub fn into_stream(self) -> ItemStream<T> {
                ItemStream {
                    consumer: Some(self),
                    key: None,
                    yielded: 0,
                    done: false,
                }
            }
        }
    };
}

pub mod mpsc;
pub mod niche;
mod polite;
mod raw;
pub mod spsc;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::NoWait {}
    #[cfg(feature = "std")]
    impl Sealed for super::Wait {}
}

/// Whether the ends of a ring can wait (sleep) for each other: the second type parameter of
/// the ring handles, chosen when the ring is made, [`NoWait`] unless asked.
///
/// A ring made with `channel` ([`spsc::channel`], [`mpsc::channel`]) is [`NoWait`]: its
/// publications pay nothing for waiting, not even the load of a sleeper count, and its ends
/// have no blocking operations. A ring made with `waitable` ([`spsc::waitable`],
/// [`mpsc::waitable`], `std` only) is [`Wait`]: its ends also have `pop_wait`, `push_wait`
/// and their burst forms, and every publication (one per push, burst or chunk commit) checks
/// whether the other end sleeps (see [`crate::wait`] for that cost).
///
/// ```
/// use flowline::fifo::{spsc, NoWait, WaitMode};
/// let (tx, _rx): (spsc::Producer<u8, NoWait>, _) = spsc::channel(4).unwrap();
/// assert!(!NoWait::WAITS);
/// # drop(tx);
/// ```
pub trait WaitMode: sealed::Sealed + 'static {
    /// Whether publications check for a sleeping other end.
    const WAITS: bool;
}

/// Ring ends that never sleep (the default): see [`WaitMode`].
///
/// ```
/// use flowline::fifo::{spsc, NoWait};
/// let (mut tx, mut rx): (spsc::Producer<u32, NoWait>, spsc::Consumer<u32>) =
///     spsc::channel(2).unwrap();
/// tx.push(1).unwrap();
/// assert_eq!(rx.pop(), Some(1));
/// ```
#[derive(Debug)]
pub enum NoWait {}

impl WaitMode for NoWait {
    const WAITS: bool = false;
}

/// Ring ends that can sleep in blocking operations: see [`WaitMode`] and [`crate::wait`].
///
/// ```
/// use std::time::Duration;
/// use flowline::fifo::{spsc, Wait};
/// let (mut tx, mut rx): (spsc::Producer<u32, Wait>, _) = spsc::waitable(2).unwrap();
/// tx.push_wait(1, Duration::from_secs(1)).unwrap();
/// assert_eq!(rx.pop_wait(Duration::from_secs(1)), Ok(1));
/// ```
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
#[derive(Debug)]
pub enum Wait {}

#[cfg(feature = "std")]
impl WaitMode for Wait {
    const WAITS: bool = true;
}

/// A ring capacity that cannot be honoured.
///
/// ```
/// use flowline::fifo::{spsc, CapacityError};
/// assert_eq!(spsc::channel::<u64>(0).unwrap_err(), CapacityError::Zero);
/// assert!(matches!(spsc::channel::<u64>(usize::MAX), Err(CapacityError::TooLarge { .. })));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityError {
    /// A capacity of zero: a ring that can hold nothing would make every push fail.
    Zero,
    /// The capacity, rounded up to a power of two, exceeds what the index arithmetic or the
    /// address space allows for this element type.
    TooLarge {
        /// The capacity asked for.
        requested: usize,
        /// The largest capacity this element type allows.
        max: usize,
    },
    /// The allocator could not provide the slots.
    AllocFailed {
        /// Slots asked for (the rounded capacity).
        slots: usize,
        /// Bytes asked for.
        bytes: usize,
    },
}

impl CapacityError {
    /// Validates `requested` for elements of `elem_size` bytes and returns the number of
    /// slots (the next power of two).
    pub(crate) fn slots_for(requested: usize, elem_size: usize) -> Result<usize, CapacityError> {
        // Indices run freely and wrap; tail - head must stay unambiguous, so at most half the
        // index space. Bytes must fit in isize for the allocation.
        let index_max = 1usize << (usize::BITS - 1);
        let byte_max = (isize::MAX as usize)
            .checked_div(elem_size)
            .map_or(index_max, |m| m.min(index_max));
        // The largest power of two not above byte_max.
        let max = 1usize << (usize::BITS - 1 - byte_max.leading_zeros());
        if requested == 0 {
            return Err(CapacityError::Zero);
        }
        match requested.checked_next_power_of_two() {
            Some(slots) if slots <= max => Ok(slots),
            _ => Err(CapacityError::TooLarge { requested, max }),
        }
    }
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapacityError::Zero => write!(f, "ring capacity 0: ask for at least 1 slot"),
            CapacityError::TooLarge { requested, max } => write!(
                f,
                "ring capacity {requested} is too large: at most {max} slots for this element \
                 type (capacities round up to a power of two)"
            ),
            CapacityError::AllocFailed { slots, bytes } => write!(
                f,
                "could not allocate {slots} ring slots ({bytes} bytes): ask for a smaller capacity"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CapacityError {}

/// The ends move to their threads with their items and are never shared between threads
/// (the MPSC producer is `Clone` and `Sync` instead): checked at compile time, so that a
/// change to the handles' fields (their share of the ring is a `sync::HandleArc`) cannot
/// loosen or tighten these bounds unnoticed.
#[cfg(test)]
mod auto_traits {
    use super::{mpsc, niche, spsc};
    use alloc::{boxed::Box, rc::Rc};
    use core::ptr::NonNull;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(spsc::Producer<u8>: Send);
    assert_impl_all!(spsc::Consumer<u8>: Send);
    assert_not_impl_any!(spsc::Producer<u8>: Sync);
    assert_not_impl_any!(spsc::Consumer<u8>: Sync);
    assert_not_impl_any!(spsc::Producer<Rc<u8>>: Send);
    assert_not_impl_any!(spsc::Consumer<Rc<u8>>: Send);
    assert_impl_all!(mpsc::Producer<u8>: Send, Sync, Clone);
    assert_impl_all!(mpsc::Consumer<u8>: Send);
    assert_not_impl_any!(mpsc::Producer<Rc<u8>>: Send, Sync);
    assert_not_impl_any!(mpsc::Consumer<Rc<u8>>: Send);
    assert_impl_all!(niche::Producer<Box<u8>>: Send);
    assert_impl_all!(niche::Consumer<Box<u8>>: Send);
    assert_not_impl_any!(niche::Producer<Box<u8>>: Sync);
    assert_not_impl_any!(niche::Consumer<Box<u8>>: Sync);
    assert_not_impl_any!(niche::Producer<NonNull<u8>>: Send);
    assert_not_impl_any!(niche::Consumer<NonNull<u8>>: Send);
}
