//! The parts of the `spsc` and `mpsc` ends that differ only in the ring's name, written
//! once as macros each ring expands in its own module: the names of the async futures
//! ([`crate::fifo::futures`]) and the methods that make them, and `std::io` for byte rings.

/// The async waits of a ring's waitable ends (feature `async`), expanded in the ring's
/// module (`$ring`: its name, for messages and examples): the ring's names for the
/// futures of [`crate::fifo::futures`], the sealed end traits, and the methods.
#[cfg(feature = "async")]
macro_rules! async_ends {
    ($ring:literal) => {
        use crate::fifo::futures::{self as f, sealed};

        /// The future of [`Consumer::pop_async`]: see [`f::PopFuture`].
        pub type PopFuture<'a, T> = f::PopFuture<'a, Consumer<T, Wait>>;
        /// The future of [`Consumer::pop_burst_async`]: see [`f::PopBurstFuture`].
        pub type PopBurstFuture<'a, T> = f::PopBurstFuture<'a, Consumer<T, Wait>>;
        /// The future of [`Producer::push_async`]: see [`f::PushFuture`].
        pub type PushFuture<'a, T> = f::PushFuture<'a, Producer<T, Wait>>;
        /// The consumer as a stream, made by [`Consumer::into_stream`]: see [`f::ItemStream`].
        #[cfg(feature = "stream")]
        #[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
        pub type ItemStream<T> = f::ItemStream<Consumer<T, Wait>>;

        // Sealed: the trait cannot be named outside the crate, so neither can these methods.
        #[allow(private_interfaces)]
        impl<T> sealed::Consumer for Consumer<T, Wait> {
            type Item = T;
            const RING: &'static str = $ring;

            #[inline(always)]
            fn pop_one(&mut self) -> Option<T> {
                self.pop()
            }

            #[inline(always)]
            fn pop_into(&mut self, out: &mut Vec<T>, max: usize) -> usize {
                self.pop_burst_into(out, max)
            }

            #[inline(always)]
            fn abandoned(&self) -> bool {
                self.is_abandoned()
            }

            #[inline(always)]
            fn ready_or_closed(&self) -> bool {
                self.has_items_or_closed()
            }

            #[inline(always)]
            fn release(&mut self) {
                self.release_pending();
            }

            #[inline(always)]
            fn strategy(&self) -> WaitStrategy {
                self.strategy
            }

            #[inline(always)]
            fn coop(&mut self) -> &mut wait::Coop {
                &mut self.coop
            }

            #[inline(always)]
            fn items(&self) -> &Sleepers {
                self.shared.items()
            }
        }

        #[allow(private_interfaces)]
        impl<T> sealed::Producer for Producer<T, Wait> {
            type Item = T;
            const RING: &'static str = $ring;

            #[inline(always)]
            fn push_one(&mut self, value: T) -> Result<(), T> {
                self.push(value).map_err(crate::fifo::PushError::into_inner)
            }

            #[inline(always)]
            fn abandoned(&self) -> bool {
                self.is_abandoned()
            }

            #[inline(always)]
            fn gone_now(&self) -> bool {
                self.consumer_gone_now()
            }

            #[inline(always)]
            fn ready_or_closed(&self) -> bool {
                self.has_room_or_closed()
            }

            #[inline(always)]
            fn strategy(&self) -> WaitStrategy {
                self.strategy
            }

            #[inline(always)]
            fn coop(&mut self) -> &mut wait::Coop {
                &mut self.coop
            }

            #[inline(always)]
            fn room(&self) -> &Sleepers {
                self.shared.room()
            }
        }

        /// Async waits (feature `async`): futures that any executor can poll (see
        /// [`crate::fifo::futures`] for how they wait).
        #[cfg_attr(docsrs, doc(cfg(feature = "async")))]
        impl<T> Consumer<T, Wait> {
            /// Waits for the next item without blocking the thread: see [`PopFuture`].
            ///
            /// ```
            #[doc = concat!(" let (mut tx, mut rx) = flowline::fifo::", $ring, "::waitable::<u32>(4).unwrap();")]
            /// let t = std::thread::spawn(move || tx.push(7).unwrap());
            /// # flowline::wait::block_on(async {
            /// assert_eq!(rx.pop_async().await, Ok(7));
            /// t.join().unwrap();
            /// assert!(rx.pop_async().await.is_err()); // the producer is gone
            /// # });
            /// ```
            pub fn pop_async(&mut self) -> PopFuture<'_, T> {
                f::PopFuture::new(self)
            }

            /// Waits until at least one item is there, then moves up to `max` onto `out`: see
            /// [`PopBurstFuture`] (ready at once with 0 for `max == 0`).
            ///
            /// ```
            #[doc = concat!(" let (mut tx, mut rx) = flowline::fifo::", $ring, "::waitable::<u32>(8).unwrap();")]
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
                f::PopBurstFuture::new(self, out, max)
            }

            /// Sets this end's cooperative budget (default
            /// [`DEFAULT_ASYNC_BUDGET`](crate::wait::DEFAULT_ASYNC_BUDGET), 128): after `budget`
            /// async operations of this end in a row that completed without waiting, the next one
            /// wakes its own task and returns `Pending` once, taking nothing, so that a task whose
            /// ring always has items lets the other tasks of a single-threaded executor run
            /// (tokio's channels do the same through tokio's own budget, which other crates cannot
            /// reach). Any wait refills it. `0`: never yield (the task may then starve others
            /// while items keep coming). The synchronous operations are not affected.
            ///
            /// ```
            #[doc = concat!(" let (mut tx, mut rx) = flowline::fifo::", $ring, "::waitable::<u32>(8).unwrap();")]
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

            /// This end's cooperative budget: see [`set_async_budget`](Self::set_async_budget).
            ///
            /// ```
            #[doc = concat!(" let (_tx, rx) = flowline::fifo::", $ring, "::waitable::<u32>(8).unwrap();")]
            /// assert_eq!(rx.async_budget(), flowline::wait::DEFAULT_ASYNC_BUDGET);
            /// ```
            #[must_use]
            pub fn async_budget(&self) -> u32 {
                self.coop.budget()
            }

            /// This consumer as a [`futures_core::Stream`] of its items: see [`ItemStream`].
            ///
            /// ```
            #[doc = concat!(" let (mut tx, rx) = flowline::fifo::", $ring, "::waitable::<u32>(4).unwrap();")]
            /// tx.push(1).unwrap();
            /// drop(tx);
            /// let s = rx.into_stream();
            /// assert!(!futures_core::stream::FusedStream::is_terminated(&s));
            /// ```
            #[cfg(feature = "stream")]
            #[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
            pub fn into_stream(self) -> ItemStream<T> {
                f::ItemStream::new(self)
            }
        }

        /// Async waits (feature `async`): see the consumer's.
        #[cfg_attr(docsrs, doc(cfg(feature = "async")))]
        impl<T> Producer<T, Wait> {
            /// Waits for room without blocking the thread, then pushes `value`: see
            /// [`PushFuture`].
            ///
            /// ```
            #[doc = concat!(" let (mut tx, mut rx) = flowline::fifo::", $ring, "::waitable::<u32>(1).unwrap();")]
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
                f::PushFuture::new(self, value)
            }

            /// Sets this end's cooperative budget: as [`Consumer::set_async_budget`], for pushes
            /// (a push that yields keeps its item in the future).
            ///
            /// ```
            #[doc = concat!(" let (mut tx, _rx) = flowline::fifo::", $ring, "::waitable::<u32>(8).unwrap();")]
            /// tx.set_async_budget(0); // never yield
            /// assert_eq!(tx.async_budget(), 0);
            /// ```
            pub fn set_async_budget(&mut self, budget: u32) {
                self.coop.set(budget);
            }

            /// This end's cooperative budget: see [`set_async_budget`](Self::set_async_budget).
            ///
            /// ```
            #[doc = concat!(" let (tx, _rx) = flowline::fifo::", $ring, "::waitable::<u32>(8).unwrap();")]
            /// assert_eq!(tx.async_budget(), flowline::wait::DEFAULT_ASYNC_BUDGET);
            /// ```
            #[must_use]
            pub fn async_budget(&self) -> u32 {
                self.coop.budget()
            }
        }
    };
}
#[cfg(feature = "async")]
pub(crate) use async_ends;

/// `std::io` for a ring of `u8` (`std`), expanded in the ring's module (`$ring`: its
/// name; `$gone`: how the docs say that its producers are gone): the producer is an
/// `io::Write`, the consumer an `io::Read`, as rtrb's are. Neither blocks: a full ring
/// (write) or an empty one (read) is `WouldBlock`; a read of an empty ring whose producers
/// are gone is the end of the stream (`Ok(0)`).
macro_rules! byte_io {
    ($ring:literal, $gone:literal) => {
        impl<W: WaitMode> ::std::io::Write for Producer<u8, W> {
            /// Pushes what fits of `buf` with one publication; `WouldBlock` if nothing fits.
            ///
            /// ```
            /// use std::io::{ErrorKind, Write};
            #[doc = concat!(" let (mut tx, mut rx) = flowline::fifo::", $ring, "::channel::<u8>(4).unwrap();")]
            /// assert_eq!(tx.write(b"hello").unwrap(), 4);
            /// assert_eq!(tx.write(b"o").unwrap_err().kind(), ErrorKind::WouldBlock);
            /// assert_eq!(rx.pop(), Some(b'h'));
            /// ```
            fn write(&mut self, buf: &[u8]) -> ::std::io::Result<usize> {
                if buf.is_empty() {
                    return Ok(0);
                }
                match self.push_burst(buf) {
                    0 => Err(::std::io::ErrorKind::WouldBlock.into()),
                    n => Ok(n),
                }
            }

            /// Nothing to do: every write is published when it returns.
            fn flush(&mut self) -> ::std::io::Result<()> {
                Ok(())
            }
        }

        impl<W: WaitMode> ::std::io::Read for Consumer<u8, W> {
            /// Takes what is there, up to `buf.len()`, with one release; `WouldBlock` if nothing is
            #[doc = concat!(" there yet, `Ok(0)` (end of stream) once the ring is empty and ", $gone, ".")]
            ///
            /// ```
            /// use std::io::{ErrorKind, Read};
            #[doc = concat!(" let (mut tx, mut rx) = flowline::fifo::", $ring, "::channel::<u8>(8).unwrap();")]
            /// let mut buf = [0; 8];
            /// assert_eq!(rx.read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
            /// assert_eq!(tx.push_burst(b"hi"), 2);
            /// drop(tx);
            /// assert_eq!(rx.read(&mut buf).unwrap(), 2);
            /// assert_eq!(&buf[..2], b"hi");
            /// assert_eq!(rx.read(&mut buf).unwrap(), 0); // end of stream
            /// ```
            fn read(&mut self, buf: &mut [u8]) -> ::std::io::Result<usize> {
                if buf.is_empty() {
                    return Ok(0);
                }
                match self.pop_burst(buf) {
                    0 if self.is_abandoned() => Ok(self.pop_burst(buf)),
                    0 => Err(::std::io::ErrorKind::WouldBlock.into()),
                    n => Ok(n),
                }
            }
        }
    };
}
pub(crate) use byte_io;
