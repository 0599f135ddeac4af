//! Async byte streams: tokio's `AsyncRead` / `AsyncWrite` (feature `tokio-io`) and those
//! of `futures-io` (feature `futures-io`) on the waitable rings of `u8`: whole streams
//! through tokio's own helpers on a current-thread runtime and across threads, how a
//! stream ends (the end of stream, `BrokenPipe`), and the registration a pending read or
//! write leaves with its end: woken by the other end, withdrawn when the end is dropped.
#![cfg(all(not(loom), any(feature = "futures-io", feature = "tokio-io")))]

use std::task::{Context, Poll};

use crate::support::waker::counting;

/// Bytes through the ring per stream test, a mebibyte through a ring 256 times smaller.
const LEN: usize = if cfg!(miri) { 3_000 } else { 1 << 20 };
const CAP: usize = if cfg!(miri) { 64 } else { 4096 };

/// `len` bytes whose pattern repeats neither at the ring's capacity nor at any power of
/// two.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / 251) as u8)
        .collect()
}

#[cfg(feature = "tokio-io")]
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// The same checks for both rings: `$ring` is `spsc` or `mpsc`.
macro_rules! async_io_tests {
    ($ring:ident) => {
        mod $ring {
            use super::*;
            use flowline::fifo::$ring;

            #[cfg(feature = "tokio-io")]
            mod with_tokio {
                use super::*;
                use crate::support::waker::REGISTER_AT_ONCE;
                use std::sync::Arc;
                use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

                #[test]
                fn io_copy_from_a_consumer_into_a_sink_and_a_vec() {
                    let data = pattern(LEN);
                    let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                    let (n, got) = runtime().block_on(async {
                        let src = data.clone();
                        // The writer drops `tx` at its end: the copies see the end then.
                        let w = tokio::spawn(async move { tx.write_all(&src).await });
                        let mut got = Vec::new();
                        let mut head = (&mut rx).take((LEN / 2) as u64);
                        let n = tokio::io::copy(&mut head, &mut got).await.unwrap();
                        let rest = tokio::io::copy(&mut rx, &mut tokio::io::sink())
                            .await
                            .unwrap();
                        w.await.unwrap().unwrap();
                        (n + rest, got)
                    });
                    assert_eq!(n, LEN as u64);
                    assert!(got == data[..LEN / 2], "the bytes came out changed");
                }

                #[test]
                fn write_all_in_one_task_read_to_end_in_another() {
                    let data = pattern(LEN);
                    let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                    let got = runtime().block_on(async {
                        let r = tokio::spawn(async move {
                            let mut got = Vec::new();
                            rx.read_to_end(&mut got).await.map(|_| got)
                        });
                        tx.write_all(&data).await.unwrap();
                        tx.flush().await.unwrap();
                        tx.shutdown().await.unwrap();
                        drop(tx);
                        r.await.unwrap().unwrap()
                    });
                    assert!(got == data, "the bytes came out changed or out of order");
                }

                #[test]
                fn a_blocking_writer_thread_and_an_async_reader() {
                    use std::io::Write;
                    let data = pattern(LEN);
                    let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                    let src = data.clone();
                    let w = std::thread::spawn(move || Write::write_all(&mut tx, &src).unwrap());
                    let mut got = Vec::new();
                    runtime().block_on(rx.read_to_end(&mut got)).unwrap();
                    w.join().unwrap();
                    assert!(got == data, "the bytes came out changed or out of order");
                }

                #[test]
                fn a_consumer_dropped_mid_stream_is_a_broken_pipe() {
                    let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                    let e = runtime().block_on(async {
                        let w = tokio::spawn(async move {
                            loop {
                                if let Err(e) = tx.write_all(&[7; 1000]).await {
                                    return e;
                                }
                            }
                        });
                        let mut some = vec![0; 3 * CAP];
                        rx.read_exact(&mut some).await.unwrap();
                        assert!(some.iter().all(|&b| b == 7));
                        // The writer waits for room now (registered, on this one thread).
                        tokio::task::yield_now().await;
                        drop(rx);
                        w.await.unwrap()
                    });
                    assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
                    assert!(e.to_string().contains("consumer is gone"), "{e}");
                }

                #[test]
                fn a_producer_dropped_is_the_end_after_the_remaining_bytes() {
                    let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                    let got = runtime().block_on(async {
                        // The reader waits before anything is written.
                        let r = tokio::spawn(async move {
                            let mut got = Vec::new();
                            rx.read_to_end(&mut got).await.map(|_| (got, rx))
                        });
                        tokio::task::yield_now().await;
                        tx.write_all(b"the last bytes").await.unwrap();
                        drop(tx);
                        let (got, mut rx) = r.await.unwrap().unwrap();
                        // The end of the stream stays the end.
                        assert_eq!(rx.read(&mut [0; 8]).await.unwrap(), 0);
                        got
                    });
                    assert_eq!(got, b"the last bytes");
                }

                #[test]
                fn pending_reads_and_writes_are_woken_and_withdrawn() {
                    let (mut tx, mut rx) = $ring::waitable::<u8>(4).unwrap();
                    rx.set_wait_strategy(REGISTER_AT_ONCE);
                    tx.set_wait_strategy(REGISTER_AT_ONCE);
                    let (count, waker) = counting();
                    let mut cx = Context::from_waker(&waker);
                    let mut buf = [0; 8];
                    let mut rb = ReadBuf::new(&mut buf);
                    // An empty ring: the read registers, and the write wakes it.
                    assert!(std::pin::Pin::new(&mut rx)
                        .poll_read(&mut cx, &mut rb)
                        .is_pending());
                    let w = std::pin::Pin::new(&mut tx).poll_write(&mut cx, b"abcdef");
                    assert!(matches!(w, Poll::Ready(Ok(4))));
                    assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
                    assert!(std::pin::Pin::new(&mut rx)
                        .poll_read(&mut cx, &mut rb)
                        .is_ready());
                    assert_eq!(rb.filled(), b"abcd");
                    // An empty buffer's read is ready at once, with nothing.
                    let mut none = ReadBuf::new(&mut []);
                    assert!(std::pin::Pin::new(&mut rx)
                        .poll_read(&mut cx, &mut none)
                        .is_ready());
                    // A full ring: the write registers; dropping the producer withdraws
                    // its registration (the waker's clone is dropped with it).
                    assert!(matches!(
                        std::pin::Pin::new(&mut tx).poll_write(&mut cx, b"wxyz"),
                        Poll::Ready(Ok(4))
                    ));
                    let before = Arc::strong_count(&count);
                    assert!(std::pin::Pin::new(&mut tx)
                        .poll_write(&mut cx, b"!")
                        .is_pending());
                    assert_eq!(Arc::strong_count(&count), before + 1, "registered");
                    drop(tx);
                    assert_eq!(Arc::strong_count(&count), before, "withdrawn");
                    // The consumer's registration likewise, once the ring is empty.
                    let mut rb = ReadBuf::new(&mut buf);
                    assert!(std::pin::Pin::new(&mut rx)
                        .poll_read(&mut cx, &mut rb)
                        .is_ready());
                    assert_eq!(rb.filled(), b"wxyz");
                    let (_tx2, mut rx2) = $ring::waitable::<u8>(4).unwrap();
                    rx2.set_wait_strategy(REGISTER_AT_ONCE);
                    let mut rb = ReadBuf::new(&mut buf);
                    assert!(std::pin::Pin::new(&mut rx2)
                        .poll_read(&mut cx, &mut rb)
                        .is_pending());
                    assert_eq!(Arc::strong_count(&count), before + 1, "registered");
                    drop(rx2);
                    assert_eq!(Arc::strong_count(&count), before, "withdrawn");
                }
            }

            #[cfg(feature = "futures-io")]
            mod with_futures_io {
                use super::*;
                use core::future::poll_fn;
                use core::pin::Pin;
                use flowline::wait::block_on;
                use futures_io::{AsyncRead, AsyncWrite};

                fn write_all<W: AsyncWrite + Unpin>(
                    w: &mut W,
                    mut buf: &[u8],
                ) -> std::io::Result<()> {
                    block_on(async {
                        while !buf.is_empty() {
                            let n = poll_fn(|cx| Pin::new(&mut *w).poll_write(cx, buf)).await?;
                            buf = &buf[n..];
                        }
                        Ok(())
                    })
                }

                fn read_to_end<R: AsyncRead + Unpin>(
                    r: &mut R,
                    out: &mut Vec<u8>,
                ) -> std::io::Result<()> {
                    block_on(async {
                        let mut buf = [0; 1000];
                        loop {
                            match poll_fn(|cx| Pin::new(&mut *r).poll_read(cx, &mut buf)).await? {
                                0 => return Ok(()),
                                n => out.extend_from_slice(&buf[..n]),
                            }
                        }
                    })
                }

                #[test]
                fn a_stream_between_threads_ends_when_the_writer_is_gone() {
                    let data = pattern(LEN);
                    let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                    let src = data.clone();
                    let w = std::thread::spawn(move || {
                        write_all(&mut tx, &src)?;
                        block_on(poll_fn(|cx| Pin::new(&mut tx).poll_flush(cx)))
                    });
                    let mut got = Vec::new();
                    read_to_end(&mut rx, &mut got).unwrap();
                    w.join().unwrap().unwrap();
                    assert!(got == data, "the bytes came out changed or out of order");
                }

                #[test]
                fn close_does_not_end_the_stream_and_a_gone_consumer_breaks_the_pipe() {
                    let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                    write_all(&mut tx, b"abc").unwrap();
                    block_on(poll_fn(|cx| Pin::new(&mut tx).poll_close(cx))).unwrap();
                    let (_count, waker) = counting();
                    let mut cx = Context::from_waker(&waker);
                    let mut buf = [0; 8];
                    let r = Pin::new(&mut rx).poll_read(&mut cx, &mut buf);
                    assert!(matches!(r, Poll::Ready(Ok(3))));
                    // Closed, not dropped: no end of stream, the read waits.
                    assert!(Pin::new(&mut rx).poll_read(&mut cx, &mut buf).is_pending());
                    // A writer waiting for room in another thread is woken by the drop.
                    write_all(&mut tx, &vec![1; CAP]).unwrap();
                    let w = std::thread::spawn(move || write_all(&mut tx, b"more"));
                    drop(rx);
                    let e = w.join().unwrap().unwrap_err();
                    assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
                }
            }
        }
    };
}

async_io_tests!(spsc);
async_io_tests!(mpsc);
