//! `spsc_*` scenarios: 8-byte items carrying sequence numbers through a 1024-slot ring,
//! producer on CPU 0, consumer on CPU 1, bursts of 1, 8 and 32 (DPDK's `ring_perf` shape:
//! the producer loops until its whole batch is in; the consumer takes up to a burst). The
//! consumer sums what it receives and the sum is checked.
//!
//! flowline and rtrb are driven through the same code shape: single `push`/`pop` at burst
//! 1, write and read chunks (one index publication per chunk on each side) for bursts. At
//! burst 1 each runs in two handle placements: `_stack` (each handle moved onto its
//! thread's stack) and `_boxed` (both handles boxed one after the other on the main thread,
//! so they sit side by side on the heap, as in a struct that holds both). `raw` (burst 32)
//! is the streaming bound of the two cores: a 64 Ki-item buffer moved in 4 KiB chunks, one
//! index store per chunk each way, as DPDK's `raw_xfer_chunk4k_ring64k`.
//! `spsc_pingpong` is the one-item round trip over two rings (lower is better).
//! `spsc_paced40ns_latency` and `spsc_paced100ns_latency`: the producer pushes one item
//! every 40 (100) ns, stamped with the TSC, and the consumer's p50 and p99 of push-to-pop
//! time (lower is better), for `fifo::spsc` by default and with polite polling on for
//! every read (`flowline_polite`), and rtrb. At burst 1, `flowline_lazy` releases single
//! pops' slots in groups (`set_lazy_release(true)`). At bursts of 8 and 32, `flowline` is
//! the ring's default (no polite polling), `flowline_large` pauses reads of 256 bytes or
//! more (bursts of 32 `u64`s, not of 8) and `flowline_polite` every read.
//! `flowline_niche` is the index-free ring (`fifo::niche`, `NonZeroU64` items: item `v`
//! travels as `v + 1`) in the same scenarios, single `push`/`pop` at burst 1 and its
//! slice bursts (`push_burst`/`pop_burst`) at 8 and 32.
//!
//! **Layouts.** Throughput of a ring at a fixed burst depends on where its bursts fall
//! relative to cache lines, in the ring and in the caller's buffers: bursts of 32 moved
//! about 1x to 2x rtrb's figure from one layout to another (`docs/performance-notes.md`,
//! "Memory layouts"), and each ring has its own slow layouts. One layout is one
//! sample of that spread, so the ring scenarios (and the `mpsc` ones, which share
//! [`measure`]) move through [`LAYOUTS`], one per repetition (every implementation of a
//! repetition gets the same one): before its run each ring or queue is advanced by the
//! layout's first number of items (pushed and popped one at a time), and the harness's
//! burst buffers start that layout's second number of items past a 128-byte boundary. `--reps 8` runs each layout once. `REPORT_LAYOUT=a,o` fixes one
//! layout for every repetition (`REPORT_LAYOUT=0,0`: fresh rings, line-aligned buffers).
//! The burst scenarios of flowline's and rtrb's chunks copy as the compiler likes
//! (`memcpy`); `REPORT_COPY=items` makes both copy one 8-byte item at a time (volatile
//! accesses, which the compiler cannot merge).

use std::collections::VecDeque;
use std::hint::spin_loop;
use std::mem::MaybeUninit;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use flowline::fifo::spsc::PolitePolling;

use crate::harness::{pair, repetition, tsc, tsc_per_ns, Impl, Metric, Report};

pub const RING: usize = 1024;

/// (items each ring is advanced by before a run, offset in items of the burst buffers from
/// a 128-byte boundary), one per repetition in this order (see "Layouts" in the module
/// docs). Every advance and every offset appears twice, and so does every difference
/// between the two (mod 8 items, a 64-byte line).
pub const LAYOUTS: [(usize, usize); 8] = [
    (0, 0),
    (2, 4),
    (4, 2),
    (6, 6),
    (0, 4),
    (2, 0),
    (4, 6),
    (6, 2),
];

/// The layout of the repetition now running: `REPORT_LAYOUT=a,o` if set, else
/// [`LAYOUTS`] in turn. Exits with a message on a malformed `REPORT_LAYOUT`.
pub fn layout() -> (usize, usize) {
    static FIXED: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
    let fixed = FIXED.get_or_init(|| {
        let v = std::env::var("REPORT_LAYOUT").ok()?;
        let parsed = v.split_once(',').and_then(|(a, o)| {
            let (a, o) = (a.trim().parse().ok()?, o.trim().parse().ok()?);
            (o <= BUF_PAD).then_some((a, o))
        });
        if parsed.is_none() {
            eprintln!(
                "REPORT_LAYOUT={v}: expected `advance,offset` in items, offset at most {BUF_PAD}"
            );
            std::process::exit(2);
        }
        parsed
    });
    fixed.unwrap_or(LAYOUTS[repetition() % LAYOUTS.len()])
}

/// Items of room after a burst buffer's 32 for its layout offset.
const BUF_PAD: usize = 16;

/// A burst buffer that can start at any item offset from a 128-byte boundary.
#[repr(align(128))]
struct BurstBuf([u64; 32 + BUF_PAD]);

/// Advances a fresh ring by the repetition's layout (see "Layouts"): that many items, one
/// `push` and one `pop` at a time, so that its next burst starts that many slots into its
/// buffer.
pub fn advance(mut push: impl FnMut(u64) -> bool, mut pop: impl FnMut() -> Option<u64>) {
    for i in 0..layout().0 as u64 {
        assert!(push(i), "advancing an empty ring");
        assert_eq!(pop(), Some(i), "advancing an empty ring");
    }
}

/// Runs one repetition: `produce` gets the batch to send, `consume` returns how many it
/// took into the buffer; returns Mitems/s from the common start to the consumer's last item.
pub fn measure<P, C>(n: u64, burst: usize, mut produce: P, mut consume: C) -> f64
where
    P: FnMut(&[u64]) -> usize + Send,
    C: FnMut(&mut [u64]) -> usize + Send,
{
    let off = layout().1;
    let (_, (elapsed, sum)) = pair(
        move || {
            let mut storage = BurstBuf([0; 32 + BUF_PAD]);
            let buf = &mut storage.0[off..off + 32];
            let mut i = 0u64;
            while i < n {
                let k = (burst as u64).min(n - i) as usize;
                for (j, b) in buf[..k].iter_mut().enumerate() {
                    *b = i + j as u64;
                }
                let mut sent = 0;
                while sent < k {
                    let s = produce(&buf[sent..k]);
                    if s == 0 {
                        spin_loop();
                    }
                    sent += s;
                }
                i += k as u64;
            }
        },
        move || {
            let mut storage = BurstBuf([0; 32 + BUF_PAD]);
            let buf = &mut storage.0[off..off + 32];
            let t = Instant::now();
            let mut got = 0u64;
            let mut sum = 0u64;
            while got < n {
                let k = consume(&mut buf[..burst]);
                if k == 0 {
                    spin_loop();
                }
                for &v in &buf[..k] {
                    sum = sum.wrapping_add(v);
                }
                got += k as u64;
            }
            (t.elapsed(), sum)
        },
    );
    assert_eq!(sum, n * (n - 1) / 2, "consumer's checksum");
    n as f64 / elapsed.as_secs_f64() / 1e6
}

/// `fifo::spsc` at `burst`, with polite polling in `mode` (the ring's default: `Off`).
pub fn flowline(n: u64, burst: usize, mode: PolitePolling) -> f64 {
    let (mut tx, mut rx) = flowline_ring(mode);
    let items = itemwise();
    if burst == 1 {
        measure(
            n,
            1,
            move |b| usize::from(tx.push(b[0]).is_ok()),
            move |out| match rx.pop() {
                Some(v) => {
                    out[0] = v;
                    1
                }
                None => 0,
            },
        )
    } else {
        // Chunks on both sides, as rtrb below: reserve, copy in place, commit.
        measure(
            n,
            burst,
            move |b| {
                let mut chunk = tx.write_chunk(b.len());
                let k = chunk.len();
                let (s1, s2) = chunk.as_mut_slices();
                let (b1, b2) = b[..k].split_at(s1.len());
                copy_uninit(s1, b1, items);
                copy_uninit(s2, b2, items);
                // SAFETY: all k slots of the chunk were written just above.
                unsafe { chunk.commit(k) };
                k
            },
            move |out| {
                let chunk = rx.read_chunk(out.len());
                let k = chunk.len();
                let (s1, s2) = chunk.as_slices();
                copy_out(&mut out[..s1.len()], s1, items);
                copy_out(&mut out[s1.len()..k], s2, items);
                chunk.commit_all();
                k
            },
        )
    }
}

/// Where the ring handles live while a single-item run uses them.
#[derive(Clone, Copy)]
pub enum Placement {
    /// Each handle moved onto its thread's stack.
    Stack,
    /// Both handles boxed one after the other on the main thread (side by side on the
    /// heap), each thread using its box.
    Boxed,
    /// Each handle on its thread's stack, the consumer's loop a function of its own that
    /// takes `&mut` the handle and is never inlined, as a user's `fn f(rx: &mut
    /// Consumer<T>)` is: the handle's fields live in memory, not in registers.
    Called,
}

/// One single-item repetition with the handles in `placement`: the producer pushes
/// 0..n one at a time (retrying while full), the consumer pops until it has n (retrying
/// while empty); returns Mitems/s from the common start to the consumer's last item.
/// `push` and `pop` are generic, so each compiles into its loop as a direct call of the
/// ring's method would: a function pointer would add a call per item, whose cost depends
/// on how each implementation's fast path happens to compile.
pub fn single<P: Send, C: Send>(
    n: u64,
    tx: P,
    rx: C,
    placement: Placement,
    push: impl Fn(&mut P, u64) -> bool + Send,
    pop: impl Fn(&mut C) -> Option<u64> + Send,
) -> f64 {
    fn produce<P>(tx: &mut P, n: u64, push: impl Fn(&mut P, u64) -> bool) {
        for i in 0..n {
            while !push(tx, i) {
                spin_loop();
            }
        }
    }
    fn consume<C>(rx: &mut C, n: u64, pop: impl Fn(&mut C) -> Option<u64>) -> (Duration, u64) {
        let t = Instant::now();
        let (mut got, mut sum) = (0u64, 0u64);
        while got < n {
            match pop(rx) {
                Some(v) => {
                    sum = sum.wrapping_add(v);
                    got += 1;
                }
                None => spin_loop(),
            }
        }
        (t.elapsed(), sum)
    }
    #[inline(never)]
    fn consume_called<C>(
        rx: &mut C,
        n: u64,
        pop: impl Fn(&mut C) -> Option<u64>,
    ) -> (Duration, u64) {
        consume(rx, n, pop)
    }
    let (elapsed, sum) = match placement {
        Placement::Stack | Placement::Called => {
            let called = matches!(placement, Placement::Called);
            pair(
                move || {
                    let mut tx = tx;
                    produce(&mut tx, n, push)
                },
                move || {
                    let mut rx = rx;
                    if called {
                        consume_called(&mut rx, n, pop)
                    } else {
                        consume(&mut rx, n, pop)
                    }
                },
            )
            .1
        }
        Placement::Boxed => {
            let (mut tx, mut rx) = (Box::new(tx), Box::new(rx));
            pair(
                move || produce(&mut *tx, n, push),
                move || consume(&mut *rx, n, pop),
            )
            .1
        }
    };
    assert_eq!(sum, n * (n - 1) / 2, "consumer's checksum");
    n as f64 / elapsed.as_secs_f64() / 1e6
}

/// How a single-item scenario sets up its `fifo::spsc` consumer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Single {
    /// The ring's defaults.
    Default,
    /// Polite polling on for every read.
    Polite,
    /// Lazy release of single pops on.
    Lazy,
}

/// Single items through a `fifo::spsc` ring set up as `how` says.
pub fn flowline_single(n: u64, placement: Placement, how: Single) -> f64 {
    let mode = if how == Single::Polite {
        PolitePolling::On
    } else {
        PolitePolling::default()
    };
    let (tx, mut rx) = flowline_ring(mode);
    rx.set_lazy_release(how == Single::Lazy);
    single(n, tx, rx, placement, |t, v| t.push(v).is_ok(), |r| r.pop())
}

/// A `fifo::spsc` ring of [`RING`] slots with polite polling in `mode`, advanced as the
/// repetition's layout says (its pops' lazy release published, as a fresh ring's).
fn flowline_ring(
    mode: PolitePolling,
) -> (
    flowline::fifo::spsc::Producer<u64>,
    flowline::fifo::spsc::Consumer<u64>,
) {
    let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u64>(RING).unwrap();
    rx.set_polite(mode);
    advance(|v| tx.push(v).is_ok(), || rx.pop());
    rx.release_pending();
    (tx, rx)
}

/// Item `v` as the non-zero value the index-free ring carries, and back.
fn nz(v: u64) -> NonZeroU64 {
    NonZeroU64::MIN.saturating_add(v)
}

/// A `fifo::niche` ring of [`RING`] slots, advanced as the repetition's layout says.
fn niche_ring() -> (
    flowline::fifo::niche::Producer<NonZeroU64>,
    flowline::fifo::niche::Consumer<NonZeroU64>,
) {
    let (mut tx, mut rx) = flowline::fifo::niche::channel::<NonZeroU64>(RING).unwrap();
    advance(|v| tx.push(nz(v)).is_ok(), || rx.pop().map(|v| v.get() - 1));
    (tx, rx)
}

pub fn niche_single(n: u64, placement: Placement) -> f64 {
    let (tx, rx) = niche_ring();
    single(
        n,
        tx,
        rx,
        placement,
        |t, v| t.push(nz(v)).is_ok(),
        |r| r.pop().map(|v| v.get() - 1),
    )
}

/// The index-free ring at bursts of 8 and 32: its burst forms (one slot read decides a
/// whole burst that fits), with the items converted to and from their non-zero form.
pub fn niche(n: u64, burst: usize) -> f64 {
    let (mut tx, mut rx) = niche_ring();
    measure(
        n,
        burst,
        move |b| {
            let mut items = [NonZeroU64::MIN; 32];
            for (d, &v) in items.iter_mut().zip(b) {
                *d = nz(v);
            }
            tx.push_burst(&items[..b.len()])
        },
        move |out| {
            let mut items = [NonZeroU64::MIN; 32];
            let k = rx.pop_burst(&mut items[..out.len()]);
            for (o, v) in out.iter_mut().zip(&items[..k]) {
                *o = v.get() - 1;
            }
            k
        },
    )
}

/// An rtrb ring of [`RING`] slots, advanced as the repetition's layout says.
fn rtrb_ring() -> (rtrb::Producer<u64>, rtrb::Consumer<u64>) {
    let (mut tx, mut rx) = rtrb::RingBuffer::<u64>::new(RING);
    advance(|v| tx.push(v).is_ok(), || rx.pop().ok());
    (tx, rx)
}

pub fn rtrb_single(n: u64, placement: Placement) -> f64 {
    let (tx, rx) = rtrb_ring();
    single(
        n,
        tx,
        rx,
        placement,
        |t, v| t.push(v).is_ok(),
        |r| r.pop().ok(),
    )
}

/// One-item round trip: CPU 0 pushes an item into ring A and waits for it to come back
/// through ring B, pushed by CPU 1; returns ns per round trip. Handles on each thread's
/// stack.
pub fn pingpong<P: Send, C: Send>(
    rounds: u64,
    a: (P, C),
    b: (P, C),
    push: fn(&mut P, u64) -> bool,
    pop: fn(&mut C) -> Option<u64>,
) -> f64 {
    let ((atx, arx), (btx, brx)) = (a, b);
    let (elapsed, ()) = pair(
        move || {
            let (mut tx, mut rx) = (atx, brx);
            let t = Instant::now();
            for i in 0..rounds {
                assert!(push(&mut tx, i), "ping ring full");
                loop {
                    match pop(&mut rx) {
                        Some(v) => {
                            assert_eq!(v, i);
                            break;
                        }
                        None => spin_loop(),
                    }
                }
            }
            t.elapsed()
        },
        move || {
            let (mut tx, mut rx) = (btx, arx);
            for _ in 0..rounds {
                let v = loop {
                    match pop(&mut rx) {
                        Some(v) => break v,
                        None => spin_loop(),
                    }
                };
                assert!(push(&mut tx, v), "pong ring full");
            }
        },
    );
    elapsed.as_nanos() as f64 / rounds as f64
}

/// Latency while streaming: the producer pushes `n` items, one every `gap_ns` (paced on
/// the TSC), each carrying its push time; the consumer records how long each took to
/// reach it. Returns (p50, p99) in ns. At short gaps a consumer trails the producer (and
/// `fifo::spsc` pauses politely), at long ones it finds the ring empty before each item.
pub fn paced_latency<P: Send, C: Send>(
    n: usize,
    gap_ns: f64,
    tx: P,
    rx: C,
    push: fn(&mut P, u64) -> bool,
    pop: fn(&mut C) -> Option<u64>,
) -> Vec<f64> {
    let rate = tsc_per_ns();
    let gap = (gap_ns * rate) as u64;
    let ((), mut lat) = pair(
        move || {
            let mut tx = tx;
            let mut next = tsc();
            for _ in 0..n {
                while tsc() < next {
                    spin_loop();
                }
                let now = tsc();
                while !push(&mut tx, now) {
                    spin_loop();
                }
                next += gap;
            }
        },
        move || {
            let mut rx = rx;
            let mut lat = Vec::with_capacity(n);
            while lat.len() < n {
                match pop(&mut rx) {
                    Some(sent) => lat.push(tsc().saturating_sub(sent)),
                    None => spin_loop(),
                }
            }
            lat
        },
    );
    lat.sort_unstable();
    let at = |q: f64| lat[((n - 1) as f64 * q) as usize] as f64 / rate;
    vec![at(0.5), at(0.99)]
}

/// The two-core streaming bound (see the module docs): Mitems/s.
pub fn raw(n: u64) -> f64 {
    const CHUNK: usize = 4096 / 8;
    const CHUNKS: usize = 128; // 64 Ki items
    struct Shared {
        buf: Vec<std::cell::UnsafeCell<u64>>,
        prod: CachePadded<AtomicU64>,
        cons: CachePadded<AtomicU64>,
    }
    // SAFETY: a chunk is written by the producer only while the consumer's `cons` says it
    // is free, and read by the consumer only after the producer's `prod` (Release/Acquire)
    // says it is written, so no cell is accessed by both threads at once.
    unsafe impl Sync for Shared {}
    let sh = Shared {
        buf: (0..CHUNK * CHUNKS)
            .map(|_| std::cell::UnsafeCell::new(0))
            .collect(),
        prod: CachePadded::new(AtomicU64::new(0)),
        cons: CachePadded::new(AtomicU64::new(0)),
    };
    let chunks = n / CHUNK as u64;
    let sh = &sh;
    let ((), (elapsed, sum)) = pair(
        move || {
            let mut free_to = CHUNKS as u64;
            for k in 0..chunks {
                while k >= free_to {
                    // Acquire: the consumer's reads of the chunk happen before it is reused.
                    free_to = sh.cons.load(Ordering::Acquire) + CHUNKS as u64;
                    if k >= free_to {
                        spin_loop();
                    }
                }
                let base = (k as usize % CHUNKS) * CHUNK;
                for i in 0..CHUNK {
                    // SAFETY: chunk k is free (checked above) and only this thread writes it.
                    unsafe { *sh.buf[base + i].get() = k * CHUNK as u64 + i as u64 };
                }
                // Release: the chunk's writes happen before the consumer sees it.
                sh.prod.store(k + 1, Ordering::Release);
            }
        },
        move || {
            let t = Instant::now();
            let (mut avail, mut sum) = (0u64, 0u64);
            for k in 0..chunks {
                while avail <= k {
                    // Acquire: pairs with the producer's Release store of `prod`.
                    avail = sh.prod.load(Ordering::Acquire);
                    if avail <= k {
                        spin_loop();
                    }
                }
                let base = (k as usize % CHUNKS) * CHUNK;
                for i in 0..CHUNK {
                    // SAFETY: chunk k is published (Acquire above) and not yet released.
                    sum = sum.wrapping_add(unsafe { *sh.buf[base + i].get() });
                }
                // Release: this end's reads happen before the producer rewrites the chunk.
                sh.cons.store(k + 1, Ordering::Release);
            }
            (t.elapsed(), sum)
        },
    );
    let items = chunks * CHUNK as u64;
    assert_eq!(sum, items * (items - 1) / 2, "raw consumer's checksum");
    items as f64 / elapsed.as_secs_f64() / 1e6
}

fn rtrb(n: u64, burst: usize) -> f64 {
    let (mut tx, mut rx) = rtrb_ring();
    let items = itemwise();
    if burst == 1 {
        return measure(
            n,
            1,
            move |b| usize::from(tx.push(b[0]).is_ok()),
            move |out| match rx.pop() {
                Ok(v) => {
                    out[0] = v;
                    1
                }
                Err(_) => 0,
            },
        );
    }
    // rtrb's chunk API: a chunk of exactly n slots, or the number available.
    measure(
        n,
        burst,
        move |b| {
            let mut chunk = match tx.write_chunk_uninit(b.len()) {
                Ok(c) => c,
                Err(rtrb::chunks::ChunkError::TooFewSlots(0)) => return 0,
                Err(rtrb::chunks::ChunkError::TooFewSlots(k)) => tx.write_chunk_uninit(k).unwrap(),
            };
            let (s1, s2) = chunk.as_mut_slices();
            let k = s1.len() + s2.len();
            let (b1, b2) = b[..k].split_at(s1.len());
            copy_uninit(s1, b1, items);
            copy_uninit(s2, b2, items);
            // SAFETY: all k slots of the chunk were written just above.
            unsafe { chunk.commit_all() };
            k
        },
        move |out| {
            let chunk = match rx.read_chunk(out.len()) {
                Ok(c) => c,
                Err(rtrb::chunks::ChunkError::TooFewSlots(0)) => return 0,
                Err(rtrb::chunks::ChunkError::TooFewSlots(k)) => rx.read_chunk(k).unwrap(),
            };
            let (s1, s2) = chunk.as_slices();
            copy_out(&mut out[..s1.len()], s1, items);
            copy_out(&mut out[s1.len()..s1.len() + s2.len()], s2, items);
            let k = chunk.len();
            chunk.commit_all();
            k
        },
    )
}

/// Whether the chunk scenarios copy one item at a time (`REPORT_COPY=items`) rather than
/// as the compiler likes (`memcpy`, the default; `REPORT_COPY=memcpy`). Exits with a
/// message on another value.
fn itemwise() -> bool {
    match std::env::var("REPORT_COPY").as_deref() {
        Err(_) | Ok("memcpy") => false,
        Ok("items") => true,
        Ok(v) => {
            eprintln!("REPORT_COPY={v}: expected `memcpy` or `items`");
            std::process::exit(2);
        }
    }
}

/// Fills chunk slots from `src`: as the compiler likes, or one volatile 8-byte store per
/// item.
#[inline(always)]
fn copy_uninit(dst: &mut [MaybeUninit<u64>], src: &[u64], items: bool) {
    if items {
        for (d, s) in dst.iter_mut().zip(src) {
            // SAFETY: `d` is a valid, aligned slot of the chunk.
            unsafe { std::ptr::write_volatile(d.as_mut_ptr(), *s) };
        }
    } else {
        for (d, s) in dst.iter_mut().zip(src) {
            d.write(*s);
        }
    }
}

/// Copies items out of a read chunk: `memcpy`, or one volatile load and store per item.
#[inline(always)]
fn copy_out(dst: &mut [u64], src: &[u64], items: bool) {
    if items {
        for (d, s) in dst.iter_mut().zip(src) {
            // SAFETY: both are valid, aligned `u64`s.
            unsafe { std::ptr::write_volatile(d, std::ptr::read_volatile(s)) };
        }
    } else {
        dst.copy_from_slice(src);
    }
}

pub fn crossbeam(n: u64, burst: usize) -> f64 {
    let q = crossbeam_queue::ArrayQueue::<u64>::new(RING);
    advance(|v| q.push(v).is_ok(), || q.pop());
    // No burst API: one push / pop per item.
    measure(
        n,
        burst,
        |b| b.iter().take_while(|&&v| q.push(v).is_ok()).count(),
        |out| {
            let mut k = 0;
            while k < out.len() {
                match q.pop() {
                    Some(v) => {
                        out[k] = v;
                        k += 1;
                    }
                    None => break,
                }
            }
            k
        },
    )
}

pub fn std_channel(n: u64, burst: usize) -> f64 {
    let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(RING);
    advance(|v| tx.try_send(v).is_ok(), || rx.try_recv().ok());
    measure(
        n,
        burst,
        move |b| b.iter().take_while(|&&v| tx.try_send(v).is_ok()).count(),
        move |out| {
            let mut k = 0;
            while k < out.len() {
                match rx.try_recv() {
                    Ok(v) => {
                        out[k] = v;
                        k += 1;
                    }
                    Err(_) => break,
                }
            }
            k
        },
    )
}

pub fn mutex(n: u64, burst: usize) -> f64 {
    let q = Mutex::new(VecDeque::<u64>::with_capacity(RING));
    advance(
        |v| {
            q.lock().unwrap().push_back(v);
            true
        },
        || q.lock().unwrap().pop_front(),
    );
    // One lock per burst on each side.
    measure(
        n,
        burst,
        |b| {
            let mut g = q.lock().unwrap();
            let k = b.len().min(RING - g.len());
            g.extend(&b[..k]);
            k
        },
        |out| {
            let mut g = q.lock().unwrap();
            let k = out.len().min(g.len());
            for (o, v) in out.iter_mut().zip(g.drain(..k)) {
                *o = v;
            }
            k
        },
    )
}

pub fn run(r: &mut Report) {
    let items = [Metric {
        suffix: "",
        unit: "Mitems/s",
        higher_is_better: true,
    }];
    for burst in [1usize, 8, 32] {
        let n: u64 = match (r.quick, burst) {
            (true, _) => 100_000,
            (false, 1) => 8 << 20,
            (false, _) => 16 << 20,
        };
        let name = format!("spsc_r{RING}_burst{burst}");
        let mut impls: Vec<Impl> = if burst == 1 {
            vec![
                (
                    "flowline_stack",
                    Box::new(move || vec![flowline_single(n, Placement::Stack, Single::Default)]),
                ),
                (
                    "flowline_lazy_stack",
                    Box::new(move || vec![flowline_single(n, Placement::Stack, Single::Lazy)]),
                ),
                (
                    "flowline_polite_stack",
                    Box::new(move || vec![flowline_single(n, Placement::Stack, Single::Polite)]),
                ),
                (
                    "rtrb_stack",
                    Box::new(move || vec![rtrb_single(n, Placement::Stack)]),
                ),
                (
                    "flowline_boxed",
                    Box::new(move || vec![flowline_single(n, Placement::Boxed, Single::Default)]),
                ),
                (
                    "flowline_lazy_boxed",
                    Box::new(move || vec![flowline_single(n, Placement::Boxed, Single::Lazy)]),
                ),
                (
                    "flowline_polite_boxed",
                    Box::new(move || vec![flowline_single(n, Placement::Boxed, Single::Polite)]),
                ),
                (
                    "rtrb_boxed",
                    Box::new(move || vec![rtrb_single(n, Placement::Boxed)]),
                ),
                (
                    "flowline_called",
                    Box::new(move || vec![flowline_single(n, Placement::Called, Single::Default)]),
                ),
                (
                    "rtrb_called",
                    Box::new(move || vec![rtrb_single(n, Placement::Called)]),
                ),
                (
                    "flowline_niche_stack",
                    Box::new(move || vec![niche_single(n, Placement::Stack)]),
                ),
                (
                    "flowline_niche_boxed",
                    Box::new(move || vec![niche_single(n, Placement::Boxed)]),
                ),
            ]
        } else {
            vec![
                (
                    "flowline",
                    Box::new(move || vec![flowline(n, burst, PolitePolling::Off)]),
                ),
                (
                    "flowline_large",
                    Box::new(move || vec![flowline(n, burst, PolitePolling::LargeReads)]),
                ),
                (
                    "flowline_polite",
                    Box::new(move || vec![flowline(n, burst, PolitePolling::On)]),
                ),
                ("rtrb", Box::new(move || vec![rtrb(n, burst)])),
                ("flowline_niche", Box::new(move || vec![niche(n, burst)])),
            ]
        };
        impls.push(("crossbeam", Box::new(move || vec![crossbeam(n, burst)])));
        impls.push(("std", Box::new(move || vec![std_channel(n, burst)])));
        impls.push(("mutex", Box::new(move || vec![mutex(n, burst)])));
        let mut ratios = if burst == 1 {
            vec![
                ("flowline_stack", "rtrb_stack"),
                ("flowline_boxed", "rtrb_boxed"),
                ("flowline_called", "rtrb_called"),
                ("flowline_stack", "flowline_lazy_stack"),
                ("flowline_boxed", "flowline_lazy_boxed"),
                ("flowline_stack", "flowline_polite_stack"),
                ("flowline_boxed", "flowline_polite_boxed"),
                ("flowline_niche_stack", "rtrb_stack"),
                ("flowline_niche_boxed", "rtrb_boxed"),
                ("flowline_stack", "flowline_boxed"),
                ("flowline_niche_stack", "flowline_niche_boxed"),
                ("flowline_stack", "crossbeam"),
                ("flowline_stack", "std"),
                ("flowline_stack", "mutex"),
            ]
        } else {
            vec![
                ("flowline", "rtrb"),
                ("flowline", "flowline_large"),
                ("flowline", "flowline_polite"),
                ("flowline_niche", "rtrb"),
                ("flowline", "crossbeam"),
                ("flowline", "std"),
                ("flowline", "mutex"),
            ]
        };
        if burst == 32 {
            let m = if r.quick { 1 << 20 } else { 64 << 20 };
            impls.push(("raw", Box::new(move || vec![raw(m)])));
            ratios.push(("flowline", "raw"));
            // How close the best peer comes to the bound: 1.2x rtrb is out of reach of any
            // ring in a run where rtrb runs above 1/1.2 (83%) of raw.
            ratios.push(("rtrb", "raw"));
        }
        r.scenario(&name, &items, impls, &ratios);
    }
    let rounds: u64 = if r.quick { 10_000 } else { 400_000 };
    type Ends<P, C> = ((P, C), (P, C));
    r.scenario(
        "spsc_pingpong",
        &[Metric {
            suffix: "",
            unit: "ns",
            higher_is_better: false,
        }],
        vec![
            (
                "flowline",
                Box::new(move || {
                    let c = || flowline::fifo::spsc::channel::<u64>(RING).unwrap();
                    let ends: Ends<_, _> = (c(), c());
                    vec![pingpong(
                        rounds,
                        ends.0,
                        ends.1,
                        |t, v| t.push(v).is_ok(),
                        |r| r.pop(),
                    )]
                }),
            ),
            (
                "rtrb",
                Box::new(move || {
                    let c = || rtrb::RingBuffer::<u64>::new(RING);
                    let ends: Ends<_, _> = (c(), c());
                    vec![pingpong(
                        rounds,
                        ends.0,
                        ends.1,
                        |t, v| t.push(v).is_ok(),
                        |r| r.pop().ok(),
                    )]
                }),
            ),
            (
                "flowline_niche",
                Box::new(move || {
                    let c = || flowline::fifo::niche::channel::<NonZeroU64>(RING).unwrap();
                    let ends: Ends<_, _> = (c(), c());
                    vec![pingpong(
                        rounds,
                        ends.0,
                        ends.1,
                        |t, v| t.push(nz(v)).is_ok(),
                        |r| r.pop().map(|v| v.get() - 1),
                    )]
                }),
            ),
        ],
        &[("flowline", "rtrb"), ("flowline_niche", "rtrb")],
    );
    let n: usize = if r.quick { 20_000 } else { 1 << 20 };
    for gap in [40u32, 100] {
        let lat = |q: &'static str| Metric {
            suffix: q,
            unit: "ns",
            higher_is_better: false,
        };
        let g = f64::from(gap);
        r.scenario(
            &format!("spsc_paced{gap}ns_latency"),
            &[lat("_p50"), lat("_p99")],
            vec![
                (
                    "flowline",
                    Box::new(move || {
                        let (tx, rx) = flowline::fifo::spsc::channel::<u64>(RING).unwrap();
                        paced_latency(n, g, tx, rx, |t, v| t.push(v).is_ok(), |r| r.pop())
                    }),
                ),
                (
                    "flowline_polite",
                    Box::new(move || {
                        let (tx, mut rx) = flowline::fifo::spsc::channel::<u64>(RING).unwrap();
                        rx.set_polite(PolitePolling::On);
                        paced_latency(n, g, tx, rx, |t, v| t.push(v).is_ok(), |r| r.pop())
                    }),
                ),
                (
                    "rtrb",
                    Box::new(move || {
                        let (tx, rx) = rtrb::RingBuffer::<u64>::new(RING);
                        paced_latency(n, g, tx, rx, |t, v| t.push(v).is_ok(), |r| r.pop().ok())
                    }),
                ),
            ],
            &[("flowline", "rtrb"), ("flowline", "flowline_polite")],
        );
    }
}
