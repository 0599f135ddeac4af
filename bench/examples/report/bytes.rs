//! `bytes_64k`: a byte stream from one thread to another in writes of 64 KiB, read in
//! reads of 64 KiB, until the writer closes it; MiB/s at the reader. `flowline`: a
//! waitable `u8` ring with blocking `io::Write::write_all` / `io::Read::read`;
//! `flowline_async`: the same ring's ends as tokio `AsyncWrite` / `AsyncRead`, each on a
//! current-thread runtime of its own thread; `tokio_duplex`: `tokio::io::duplex`, the same
//! way; `unix`: a std `UnixStream` pair, blocking. The rings and the duplex hold 256 KiB
//! (a Linux Unix socket's default buffer is in that range); each read's first and last
//! bytes are checked against their stream positions, and the total.

use std::io::{Read, Write};
use std::time::Instant;

use flowline::fifo::spsc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{pair, Metric, Report};

/// What each writer writes at once, and each reader reads at most.
const CHUNK: usize = 64 << 10;
/// The rings' and the duplex's capacity.
const BUFFER: usize = 256 << 10;

/// The writer's chunk: bytes that differ from chunk to chunk position, so a lost, doubled
/// or reordered chunk shows in the check.
fn chunk() -> Vec<u8> {
    (0..CHUNK).map(|i| (i % 251) as u8).collect()
}

/// The reader's check of `buf`, read after `got` bytes: its first and last bytes are
/// those of their stream positions (a byte lost, doubled or moved shifts every later
/// read's), at a cost that does not depend on the read's size.
fn check(got: u64, buf: &[u8]) {
    let at = |k: usize| ((got as usize + k) % CHUNK % 251) as u8;
    let last = buf.len() - 1;
    assert_eq!(
        (buf[0], buf[last]),
        (at(0), at(last)),
        "a read at byte {got}"
    );
}

/// `total` bytes through a blocking writer and reader on the two pinned threads: MiB/s.
fn blocking<W: Write + Send, R: Read + Send>(total: u64, mut w: W, mut r: R) -> f64 {
    let (_, (elapsed, got)) = pair(
        move || {
            let c = chunk();
            for _ in 0..total / CHUNK as u64 {
                w.write_all(&c).unwrap();
            }
            drop(w);
        },
        move || {
            let t = Instant::now();
            let mut buf = vec![0u8; CHUNK];
            let mut got = 0u64;
            loop {
                let n = r.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                check(got, &buf[..n]);
                got += n as u64;
            }
            (t.elapsed(), got)
        },
    );
    assert_eq!(got, total);
    total as f64 / elapsed.as_secs_f64() / (1u64 << 20) as f64
}

/// The same with async ends, each driven by a current-thread runtime on its thread.
fn on_runtimes<W, R>(total: u64, mut w: W, mut r: R) -> f64
where
    W: tokio::io::AsyncWrite + Unpin + Send,
    R: tokio::io::AsyncRead + Unpin + Send,
{
    let rt = || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    };
    let (_, (elapsed, got)) = pair(
        move || {
            rt().block_on(async move {
                let c = chunk();
                for _ in 0..total / CHUNK as u64 {
                    w.write_all(&c).await.unwrap();
                }
                drop(w);
            })
        },
        move || {
            rt().block_on(async move {
                let t = Instant::now();
                let mut buf = vec![0u8; CHUNK];
                let mut got = 0u64;
                loop {
                    let n = r.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    check(got, &buf[..n]);
                    got += n as u64;
                }
                (t.elapsed(), got)
            })
        },
    );
    assert_eq!(got, total);
    total as f64 / elapsed.as_secs_f64() / (1u64 << 20) as f64
}

pub fn run(r: &mut Report) {
    let thr = [Metric {
        suffix: "",
        unit: "MiB/s",
        higher_is_better: true,
    }];
    let total: u64 = if r.quick { 4 << 20 } else { 256 << 20 };
    r.scenario(
        "bytes_64k",
        &thr,
        vec![
            (
                "flowline",
                Box::new(move || {
                    let (tx, rx) = spsc::waitable::<u8>(BUFFER).unwrap();
                    vec![blocking(total, tx, rx)]
                }),
            ),
            (
                "flowline_async",
                Box::new(move || {
                    let (tx, rx) = spsc::waitable::<u8>(BUFFER).unwrap();
                    vec![on_runtimes(total, tx, rx)]
                }),
            ),
            (
                "tokio_duplex",
                Box::new(move || {
                    let (a, b) = tokio::io::duplex(BUFFER);
                    vec![on_runtimes(total, a, b)]
                }),
            ),
            (
                "unix",
                Box::new(move || {
                    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
                    vec![blocking(total, a, b)]
                }),
            ),
        ],
        &[
            ("flowline", "unix"),
            ("flowline", "tokio_duplex"),
            ("flowline_async", "tokio_duplex"),
        ],
    );
}
