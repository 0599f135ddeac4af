//! Blocking byte streams: `io::Write` and `io::Read` on the waitable rings of `u8`, end to
//! end through `std::io`'s own helpers (`io::copy`, `write_all`, `read_exact`,
//! `read_to_end`, `BufReader::lines`), and how a stream ends: the end of stream once the
//! producers are gone and the bytes are read, `BrokenPipe` once the consumer is gone.
#![cfg(all(not(loom), feature = "std"))]

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::thread;

/// Bytes through the ring per test: a mebibyte through a ring 256 times smaller.
const LEN: usize = if cfg!(miri) { 3_000 } else { 1 << 20 };
/// The ring's capacity: small, so that both ends wait for each other many times.
const CAP: usize = if cfg!(miri) { 64 } else { 4096 };

/// `len` bytes whose pattern repeats neither at the ring's capacity nor at any power of
/// two, so that a byte lost, doubled or moved shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / 251) as u8)
        .collect()
}

/// The same checks for both rings: `$ring` is `spsc` or `mpsc`.
macro_rules! byte_io_tests {
    ($ring:ident) => {
        mod $ring {
            use super::*;
            use flowline::fifo::$ring;

            #[test]
            fn io_copy_moves_a_mebibyte_through_a_small_ring() {
                let data = pattern(LEN);
                let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                let src = data.clone();
                // The writer's `io::copy` ends with its source; dropping `tx` with the
                // thread ends the reader's.
                let w = thread::spawn(move || io::copy(&mut &src[..], &mut tx).unwrap());
                let mut got = Vec::with_capacity(LEN);
                assert_eq!(io::copy(&mut rx, &mut got).unwrap(), LEN as u64);
                assert_eq!(w.join().unwrap(), LEN as u64);
                assert!(got == data, "the bytes came out changed or out of order");
            }

            #[test]
            fn write_all_then_read_exact_and_read_to_end() {
                let data = pattern(LEN / 4);
                let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                let src = data.clone();
                let w = thread::spawn(move || {
                    tx.write_all(&src).unwrap();
                    tx.flush().unwrap();
                });
                let mut head = vec![0; CAP + 3];
                rx.read_exact(&mut head).unwrap();
                let mut rest = Vec::new();
                assert_eq!(rx.read_to_end(&mut rest).unwrap(), data.len() - head.len());
                w.join().unwrap();
                head.extend_from_slice(&rest);
                assert!(head == data, "the bytes came out changed or out of order");
                // The end of the stream stays the end.
                assert_eq!(rx.read(&mut [0; 8]).unwrap(), 0);
            }

            #[test]
            fn buf_reader_lines_end_to_end() {
                let lines = if cfg!(miri) { 40 } else { 20_000 };
                let (mut tx, rx) = $ring::waitable::<u8>(CAP).unwrap();
                let w = thread::spawn(move || {
                    for i in 0..lines {
                        writeln!(tx, "line {i}: {}", "x".repeat(i % 97)).unwrap();
                    }
                });
                let mut n = 0;
                for (i, line) in BufReader::new(rx).lines().enumerate() {
                    assert_eq!(line.unwrap(), format!("line {i}: {}", "x".repeat(i % 97)));
                    n += 1;
                }
                w.join().unwrap();
                assert_eq!(n, lines);
            }

            #[test]
            fn a_consumer_dropped_mid_stream_is_a_broken_pipe() {
                let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                // The writer keeps the ring full, so it waits in `write` when the consumer
                // goes (or finds it gone at its next call): either way `write` must end.
                let w = thread::spawn(move || loop {
                    if let Err(e) = tx.write(&[7; 1000]) {
                        return (e, tx);
                    }
                });
                let mut some = vec![0; 3 * CAP];
                rx.read_exact(&mut some).unwrap();
                assert!(some.iter().all(|&b| b == 7));
                drop(rx);
                let (e, mut tx) = w.join().unwrap();
                assert_eq!(e.kind(), ErrorKind::BrokenPipe);
                assert!(e.to_string().contains("consumer is gone"), "{e}");
                // Every later write fails the same way, also with room in the ring.
                let e = tx.write_all(b"more").unwrap_err();
                assert_eq!(e.kind(), ErrorKind::BrokenPipe);
                // An empty write has nothing to deliver: it succeeds, as for a pipe.
                assert_eq!(tx.write(&[]).unwrap(), 0);
            }

            #[test]
            fn a_producer_dropped_is_the_end_after_the_remaining_bytes() {
                let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                // The reader waits in `read` before anything is written.
                let r = thread::spawn(move || {
                    let mut got = Vec::new();
                    rx.read_to_end(&mut got).unwrap();
                    got
                });
                tx.write_all(b"the last bytes").unwrap();
                drop(tx);
                assert_eq!(r.join().unwrap(), b"the last bytes");

                // Dropped with bytes left in the ring and nobody reading: they come first.
                let (mut tx, mut rx) = $ring::waitable::<u8>(CAP).unwrap();
                tx.write_all(b"left over").unwrap();
                drop(tx);
                let mut buf = [0; 4];
                assert_eq!(rx.read(&mut buf).unwrap(), 4);
                assert_eq!(&buf, b"left");
                let mut rest = Vec::new();
                assert_eq!(rx.read_to_end(&mut rest).unwrap(), 5);
                assert_eq!(rest, b" over");
                assert_eq!(rx.read(&mut buf).unwrap(), 0);
                // An empty buffer reads nothing, at once.
                assert_eq!(rx.read(&mut []).unwrap(), 0);
            }
        }
    };
}

byte_io_tests!(spsc);
byte_io_tests!(mpsc);

/// The producers of an MPSC ring are writers of one stream: every byte of each arrives,
/// and the stream ends only when the last of them is gone.
#[test]
fn mpsc_cloned_writers_share_one_stream() {
    use flowline::fifo::mpsc;
    let per = LEN / 4;
    let (tx, mut rx) = mpsc::waitable::<u8>(CAP).unwrap();
    let writers: Vec<_> = [b'a', b'b', b'c']
        .into_iter()
        .map(|b| {
            let mut tx = tx.clone();
            thread::spawn(move || tx.write_all(&vec![b; per]).unwrap())
        })
        .collect();
    // One producer still held here: the reader must not see the end yet.
    let mut first = vec![0; per];
    rx.read_exact(&mut first).unwrap();
    drop(tx);
    let mut rest = Vec::new();
    rx.read_to_end(&mut rest).unwrap();
    for w in writers {
        w.join().unwrap();
    }
    first.extend_from_slice(&rest);
    assert_eq!(first.len(), 3 * per);
    for b in [b'a', b'b', b'c'] {
        assert_eq!(first.iter().filter(|&&x| x == b).count(), per);
    }
}

/// The rings made by `channel` keep the non-blocking behaviour: `WouldBlock`.
#[test]
fn channel_rings_do_not_block() {
    use flowline::fifo::{mpsc, spsc};
    let (mut tx, mut rx) = spsc::channel::<u8>(4).unwrap();
    assert_eq!(
        rx.read(&mut [0; 4]).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert_eq!(tx.write(b"hello").unwrap(), 4);
    assert_eq!(tx.write(b"o").unwrap_err().kind(), ErrorKind::WouldBlock);
    let (mut tx, mut rx) = mpsc::channel::<u8>(4).unwrap();
    assert_eq!(
        rx.read(&mut [0; 4]).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert_eq!(tx.write(b"hello").unwrap(), 4);
    assert_eq!(tx.write(b"o").unwrap_err().kind(), ErrorKind::WouldBlock);
}
