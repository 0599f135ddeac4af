//! `spsc_*` scenarios: 8-byte items carrying sequence numbers through a 1024-slot ring,
//! producer on CPU 0, consumer on CPU 1, bursts of 1, 8 and 32 (DPDK's `ring_perf` shape:
//! the producer loops until its whole batch is in; the consumer takes up to a burst). The
//! consumer sums what it receives and the sum is checked.

use std::collections::VecDeque;
use std::hint::spin_loop;
use std::mem::MaybeUninit;
use std::sync::Mutex;
use std::time::Instant;

use crate::harness::{pair, Impl, Metric, Report};

pub const RING: usize = 1024;

/// Runs one repetition: `produce` gets the batch to send, `consume` returns how many it
/// took into the buffer; returns Mitems/s from the common start to the consumer's last item.
pub fn measure<P, C>(n: u64, burst: usize, mut produce: P, mut consume: C) -> f64
where
    P: FnMut(&[u64]) -> usize + Send,
    C: FnMut(&mut [u64]) -> usize + Send,
{
    let (_, (elapsed, sum)) = pair(
        move || {
            let mut buf = [0u64; 32];
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
            let t = Instant::now();
            let mut buf = [0u64; 32];
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

pub fn flowline(n: u64, burst: usize) -> f64 {
    let (mut tx, mut rx) = flowline::fifo::spsc::channel::<u64>(RING).unwrap();
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
        measure(
            n,
            burst,
            move |b| tx.push_burst(b),
            move |out| rx.pop_burst(out),
        )
    }
}

fn rtrb(n: u64, burst: usize) -> f64 {
    let (mut tx, mut rx) = rtrb::RingBuffer::<u64>::new(RING);
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
            copy_uninit(s1, b1);
            copy_uninit(s2, b2);
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
            out[..s1.len()].copy_from_slice(s1);
            out[s1.len()..s1.len() + s2.len()].copy_from_slice(s2);
            let k = chunk.len();
            chunk.commit_all();
            k
        },
    )
}

fn copy_uninit(dst: &mut [MaybeUninit<u64>], src: &[u64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        d.write(*s);
    }
}

pub fn crossbeam(n: u64, burst: usize) -> f64 {
    let q = crossbeam_queue::ArrayQueue::<u64>::new(RING);
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
    for burst in [1usize, 8, 32] {
        let n: u64 = match (r.quick, burst) {
            (true, _) => 100_000,
            (false, 1) => 4 << 20,
            (false, _) => 16 << 20,
        };
        let name = format!("spsc_r{RING}_burst{burst}");
        let impls: Vec<Impl> = vec![
            ("flowline", Box::new(move || vec![flowline(n, burst)])),
            ("rtrb", Box::new(move || vec![rtrb(n, burst)])),
            ("crossbeam", Box::new(move || vec![crossbeam(n, burst)])),
            ("std", Box::new(move || vec![std_channel(n, burst)])),
            ("mutex", Box::new(move || vec![mutex(n, burst)])),
        ];
        r.scenario(
            &name,
            &[Metric {
                suffix: "",
                unit: "Mitems/s",
                higher_is_better: true,
            }],
            impls,
            &[
                ("flowline", "rtrb"),
                ("flowline", "crossbeam"),
                ("flowline", "std"),
                ("flowline", "mutex"),
            ],
        );
    }
}
