//! The parts of the `spsc` and `mpsc` ends that differ only in the ring's name, written
//! once as macros each ring expands in its own module: the names of the async futures
//! ([`crate::fifo::futures`]) and the methods that make them, `std::io` for byte rings,
//! and the async byte-stream traits of `futures-io` and tokio for waitable byte rings.

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
            #[doc(alias = "recv")]
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
            #[doc(alias = "send")]
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

/// The error of a write into a ring whose consumer is gone: `BrokenPipe`, as a pipe's.
pub(crate) fn consumer_gone(ring: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        format!("the {ring} ring's consumer is gone: nothing written now would be read"),
    )
}

/// The error of a blocking write or read from its wait's error: the consumer gone
/// (`BrokenPipe`), or a deadline passed (`TimedOut`: none of the byte streams' waits has
/// one).
pub(crate) fn wait_error(e: crate::wait::WaitError, ring: &str) -> std::io::Error {
    match e {
        crate::wait::WaitError::Disconnected => consumer_gone(ring),
        crate::wait::WaitError::Timeout => std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("a wait of the {ring} ring timed out"),
        ),
    }
}

/// `std::io` for a ring of `u8` (`std`), expanded in the ring's module (`$ring`: its
/// name; `$gone`: how the docs say that its producers are gone): the producer is an
/// `io::Write`, the consumer an `io::Read`. A waitable ring's ends ([`Wait`](crate::fifo::Wait))
/// block as a pipe's do: a write waits for room for at least one byte, a read for at
/// least one byte. A [`NoWait`](crate::fifo::NoWait) ring's ends never block, as rtrb's:
/// a full ring (write) or an empty one (read) is `WouldBlock`. Either way a read of an
/// empty ring whose producers are gone is the end of the stream (`Ok(0)`).
macro_rules! byte_io {
    ($ring:literal, $gone:literal) => {
        impl ::std::io::Write for Producer<u8, NoWait> {
            /// Pushes what fits of `buf` with one publication; `WouldBlock` if nothing fits
            /// (a ring made by `waitable` waits instead).
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

        impl ::std::io::Read for Consumer<u8, NoWait> {
            /// Takes what is there, up to `buf.len()`, with one release; `WouldBlock` if nothing is
            #[doc = concat!(" there yet (a ring made by `waitable` waits instead), `Ok(0)` (end of stream) once the ring is empty and ", $gone, ".")]
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

        /// A blocking byte stream, as a pipe's writing end: `write` waits (by this end's
        /// [`WaitStrategy`], without a deadline) until at least one byte fits, then pushes as
        /// many as fit with one publication; `write_all` and `io::copy` loop over it.
        ///
        /// The writers of an `mpsc` ring (cloned producers) share one stream: each `write`
        /// reserves its bytes in one piece, so the writers' bytes interleave at the
        /// granularity of the counts their `write` calls return, never within one. A record
        /// arrives whole if one `write` returned its full length; `write_all` (which may
        /// take several `write` calls) and `io::copy` do not keep one writer's bytes
        /// together.
        ///
        /// ```
        /// use std::io::{self, Read};
        #[doc = concat!(" let (mut tx, mut rx) = flowline::fifo::", $ring, "::waitable::<u8>(4096).unwrap();")]
        /// let data: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
        /// let src = data.clone();
        /// // A mebibyte through a ring of 4 KiB: the writer waits for the reader, which
        /// // sees the end of the stream when the writer's thread drops `tx`.
        /// let writer = std::thread::spawn(move || io::copy(&mut &src[..], &mut tx));
        /// let mut got = Vec::new();
        /// rx.read_to_end(&mut got)?;
        /// assert_eq!(writer.join().unwrap()?, 1_000_000);
        /// assert!(got == data);
        /// # Ok::<(), io::Error>(())
        /// ```
        impl ::std::io::Write for Producer<u8, Wait> {
            /// Waits until at least one byte of `buf` fits, then pushes as many as fit and
            /// returns how many (`Ok(0)` only for an empty `buf`).
            ///
            /// # Errors
            ///
            /// [`BrokenPipe`](::std::io::ErrorKind::BrokenPipe) once the consumer is gone,
            /// found before the push or while waiting for room: nothing of `buf` was pushed.
            fn write(&mut self, buf: &[u8]) -> ::std::io::Result<usize> {
                self.push_burst_wait(buf, Duration::MAX)
                    .map_err(|e| crate::fifo::ends::wait_error(e, $ring))
            }

            /// Nothing to do: every write is published, for the consumer to read, when it
            /// returns (neither ring batches publications of its producers).
            fn flush(&mut self) -> ::std::io::Result<()> {
                Ok(())
            }
        }

        /// A blocking byte stream, as a pipe's reading end: `read` waits (by this end's
        #[doc = concat!(" [`WaitStrategy`], without a deadline) until at least one byte is there, then takes what is there, up to the buffer's length; `Ok(0)` is the end of the stream: the ring is empty and ", $gone, ".")]
        ///
        /// ```
        /// use std::io::{BufRead, BufReader, Write};
        #[doc = concat!(" let (mut tx, rx) = flowline::fifo::", $ring, "::waitable::<u8>(64).unwrap();")]
        /// let writer = std::thread::spawn(move || {
        ///     for i in 0..100 {
        ///         writeln!(tx, "line {i}").unwrap();
        ///     }
        /// });
        /// let lines: Vec<String> = BufReader::new(rx).lines().map(Result::unwrap).collect();
        /// writer.join().unwrap();
        /// assert_eq!(lines.len(), 100);
        /// assert_eq!(lines[99], "line 99");
        /// ```
        impl ::std::io::Read for Consumer<u8, Wait> {
            /// Waits until at least one byte is there, then takes up to `buf.len()` with one
            /// release and returns how many; `Ok(0)` at the end of the stream, or for an
            /// empty `buf`. Never an error.
            fn read(&mut self, buf: &mut [u8]) -> ::std::io::Result<usize> {
                if buf.is_empty() {
                    return Ok(0);
                }
                match self.pop_burst(buf) {
                    0 => {}
                    n => return Ok(n),
                }
                let strategy = self.strategy;
                let r = wait::wait_after_miss(
                    self,
                    strategy,
                    Duration::MAX,
                    |c| wait::poll_items(c, |c| c.pop_burst(buf), Consumer::is_abandoned),
                    Consumer::has_items_or_closed,
                    |c| c.shared.items(),
                );
                match r {
                    Ok(n) => Ok(n),
                    Err(WaitError::Disconnected) => Ok(0),
                    Err(e) => Err(crate::fifo::ends::wait_error(e, $ring)),
                }
            }
        }
    };
}
pub(crate) use byte_io;

/// `futures_io::AsyncRead` / `AsyncWrite` (feature `futures-io`) and `tokio::io::AsyncRead`
/// / `AsyncWrite` (feature `tokio-io`) for a waitable ring of `u8`, expanded in the ring's
/// module (`$ring`: its name; `$gone`: how the docs say that its producers are gone): each
/// poll is [`crate::fifo::async_io`]'s, which waits as the ring's futures do.
#[cfg(any(feature = "futures-io", feature = "tokio-io"))]
macro_rules! async_byte_io {
    ($ring:literal, $gone:literal) => {
        impl crate::fifo::async_io::ByteConsumer for Consumer<u8, Wait> {
            #[inline(always)]
            fn pop_bytes(&mut self, out: &mut [u8]) -> usize {
                self.pop_burst(out)
            }

            #[inline(always)]
            fn io_wait(&mut self) -> &mut crate::fifo::async_io::IoWait {
                &mut self.io
            }
        }

        impl crate::fifo::async_io::ByteProducer for Producer<u8, Wait> {
            #[inline(always)]
            fn push_bytes(&mut self, items: &[u8]) -> usize {
                self.push_burst(items)
            }

            #[inline(always)]
            fn io_wait(&mut self) -> &mut crate::fifo::async_io::IoWait {
                &mut self.io
            }
        }

        /// An async byte stream (feature `futures-io`), as a pipe's reading end: a read
        /// waits, without blocking the thread, until at least one byte is there, then takes
        /// what is there up to the buffer's length; `Ok(0)` is the end of the stream: the
        #[doc = concat!(" ring is empty and ", $gone, ".")]
        /// It waits as [`pop_async`](Consumer::pop_async) does (the end's wait strategy
        /// and cooperative budget). A read dropped while it waits leaves its registration
        /// with the end until the next read or the end's drop.
        ///
        /// ```
        /// use core::{future::poll_fn, pin::Pin};
        /// use futures_io::{AsyncRead, AsyncWrite};
        #[doc = concat!(" let (mut tx, mut rx) = flowline::fifo::", $ring, "::waitable::<u8>(16).unwrap();")]
        /// let writer = std::thread::spawn(move || {
        ///     flowline::wait::block_on(async {
        ///         let mut rest = &[7u8; 100][..];
        ///         while !rest.is_empty() {
        ///             let n = poll_fn(|cx| Pin::new(&mut tx).poll_write(cx, rest)).await?;
        ///             rest = &rest[n..];
        ///         }
        ///         Ok::<(), std::io::Error>(())
        ///     })
        /// });
        /// let mut got = Vec::new();
        /// flowline::wait::block_on(async {
        ///     let mut buf = [0; 32];
        ///     loop {
        ///         match poll_fn(|cx| Pin::new(&mut rx).poll_read(cx, &mut buf)).await? {
        ///             0 => return Ok::<(), std::io::Error>(()), // the writer is gone
        ///             n => got.extend_from_slice(&buf[..n]),
        ///         }
        ///     }
        /// })?;
        /// writer.join().unwrap()?;
        /// assert_eq!(got, [7; 100]);
        /// # Ok::<(), std::io::Error>(())
        /// ```
        #[cfg(feature = "futures-io")]
        #[cfg_attr(docsrs, doc(cfg(feature = "futures-io")))]
        impl ::futures_io::AsyncRead for Consumer<u8, Wait> {
            fn poll_read(
                self: ::core::pin::Pin<&mut Self>,
                cx: &mut ::core::task::Context<'_>,
                buf: &mut [u8],
            ) -> ::core::task::Poll<::std::io::Result<usize>> {
                crate::fifo::async_io::poll_read(self.get_mut(), cx, buf)
            }
        }

        /// An async byte stream (feature `futures-io`), as a pipe's writing end: a write
        /// waits, without blocking the thread, until at least one byte fits, then pushes as
        /// many as fit with one publication (as [`push_async`](Producer::push_async) waits);
        /// [`BrokenPipe`](::std::io::ErrorKind::BrokenPipe) once the consumer is gone. The
        /// writers of an `mpsc` ring interleave as their blocking writes do (see
        /// `io::Write`).
        ///
        /// `poll_flush` is ready at once: every write is published when it returns.
        /// `poll_close` is too, and does not close the ring (its consumer sees the end
        /// of the stream when every producer is dropped): drop the producer to close it.
        /// Example: see the consumer's `AsyncRead`.
        #[cfg(feature = "futures-io")]
        #[cfg_attr(docsrs, doc(cfg(feature = "futures-io")))]
        impl ::futures_io::AsyncWrite for Producer<u8, Wait> {
            fn poll_write(
                self: ::core::pin::Pin<&mut Self>,
                cx: &mut ::core::task::Context<'_>,
                buf: &[u8],
            ) -> ::core::task::Poll<::std::io::Result<usize>> {
                crate::fifo::async_io::poll_write(self.get_mut(), cx, buf)
            }

            fn poll_flush(
                self: ::core::pin::Pin<&mut Self>,
                _cx: &mut ::core::task::Context<'_>,
            ) -> ::core::task::Poll<::std::io::Result<()>> {
                ::core::task::Poll::Ready(Ok(()))
            }

            fn poll_close(
                self: ::core::pin::Pin<&mut Self>,
                _cx: &mut ::core::task::Context<'_>,
            ) -> ::core::task::Poll<::std::io::Result<()>> {
                ::core::task::Poll::Ready(Ok(()))
            }
        }

        /// An async byte stream (feature `tokio-io`), as a pipe's reading end: as the
        /// `futures-io` impl, through tokio's `ReadBuf` (a read that adds nothing is the
        /// end of the stream).
        ///
        /// ```
        /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
        #[doc = concat!(" let (mut tx, mut rx) = flowline::fifo::", $ring, "::waitable::<u8>(4096).unwrap();")]
        /// let data: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
        /// let rt = tokio::runtime::Builder::new_current_thread().build()?;
        /// let got = rt.block_on(async {
        ///     let src = data.clone();
        ///     // A mebibyte through a ring of 4 KiB: the tasks take turns as it fills and
        ///     // empties; the reader sees the end of the stream when the writer drops `tx`.
        ///     let writer = tokio::spawn(async move { tx.write_all(&src).await });
        ///     let mut got = Vec::new();
        ///     rx.read_to_end(&mut got).await?;
        ///     writer.await.unwrap()?;
        ///     Ok::<_, std::io::Error>(got)
        /// })?;
        /// assert!(got == data);
        /// # Ok::<(), std::io::Error>(())
        /// ```
        #[cfg(feature = "tokio-io")]
        #[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
        impl ::tokio::io::AsyncRead for Consumer<u8, Wait> {
            fn poll_read(
                self: ::core::pin::Pin<&mut Self>,
                cx: &mut ::core::task::Context<'_>,
                buf: &mut ::tokio::io::ReadBuf<'_>,
            ) -> ::core::task::Poll<::std::io::Result<()>> {
                if buf.remaining() == 0 {
                    return ::core::task::Poll::Ready(Ok(()));
                }
                let r = crate::fifo::async_io::poll_read(
                    self.get_mut(),
                    cx,
                    buf.initialize_unfilled(),
                );
                r.map_ok(|n| buf.advance(n))
            }
        }

        /// An async byte stream (feature `tokio-io`), as a pipe's writing end: as the
        /// `futures-io` impl. `poll_shutdown` is ready at once and does not close the ring
        /// (its consumer sees the end of the stream when every producer is dropped): drop
        /// the producer to close it. Example: see the consumer's `AsyncRead`.
        #[cfg(feature = "tokio-io")]
        #[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
        impl ::tokio::io::AsyncWrite for Producer<u8, Wait> {
            fn poll_write(
                self: ::core::pin::Pin<&mut Self>,
                cx: &mut ::core::task::Context<'_>,
                buf: &[u8],
            ) -> ::core::task::Poll<::std::io::Result<usize>> {
                crate::fifo::async_io::poll_write(self.get_mut(), cx, buf)
            }

            fn poll_flush(
                self: ::core::pin::Pin<&mut Self>,
                _cx: &mut ::core::task::Context<'_>,
            ) -> ::core::task::Poll<::std::io::Result<()>> {
                ::core::task::Poll::Ready(Ok(()))
            }

            fn poll_shutdown(
                self: ::core::pin::Pin<&mut Self>,
                _cx: &mut ::core::task::Context<'_>,
            ) -> ::core::task::Poll<::std::io::Result<()>> {
                ::core::task::Poll::Ready(Ok(()))
            }
        }
    };
}
#[cfg(any(feature = "futures-io", feature = "tokio-io"))]
pub(crate) use async_byte_io;
