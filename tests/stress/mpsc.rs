//! Stress: producers pass tagged sequence numbers through an MPSC ring with random burst
//! sizes, singles and chunks; the consumer checks per-producer order, and that nothing is
//! lost or duplicated. 2 producers, then 8 producers on 2 cores (oversubscribed: producers
//! are preempted in the middle of reservations all the time). A watchdog turns a hang into
//! a failure.
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use flowline::fifo::mpsc;

use crate::support::rng::Rng;

/// Items are `producer << 48 | sequence`.
fn run(producers: u64, per_producer: u64, cap: usize) {
    let (tx, mut rx) = mpsc::channel::<u64>(cap).unwrap();
    let handles: Vec<_> = (0..producers)
        .map(|p| {
            let mut tx = tx.clone();
            std::thread::spawn(move || {
                let mut r = Rng::new(0x5151 + p);
                let mut buf = [0u64; 32];
                let mut next = 0u64;
                while next < per_producer {
                    let want = (1 + r.next_u64() % 32).min(per_producer - next) as usize;
                    let sent = match r.next_u64() % 3 {
                        0 => {
                            for (i, b) in buf[..want].iter_mut().enumerate() {
                                *b = p << 48 | (next + i as u64);
                            }
                            tx.push_burst(&buf[..want])
                        }
                        1 => usize::from(tx.push(p << 48 | next).is_ok()),
                        _ => {
                            let mut c = tx.write_chunk(want);
                            let k = c.len();
                            let (a, b) = c.as_mut_slices();
                            for (i, s) in a.iter_mut().chain(b.iter_mut()).enumerate() {
                                s.write(p << 48 | (next + i as u64));
                            }
                            // SAFETY: all k reserved slots written above.
                            unsafe { c.commit(k) };
                            k
                        }
                    };
                    next += sent as u64;
                    if sent == 0 {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let mut next = vec![0u64; producers as usize];
    let mut total = 0u64;
    let mut buf = [0u64; 64];
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let k = rx.pop_burst(&mut buf);
        for &v in &buf[..k] {
            let (p, s) = ((v >> 48) as usize, v & ((1 << 48) - 1));
            assert_eq!(s, next[p], "producer {p}: out of order, lost or duplicated");
            next[p] += 1;
        }
        total += k as u64;
        if k == 0 {
            if rx.is_abandoned() && rx.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "watchdog: stuck at {total}");
            std::thread::yield_now();
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(total, producers * per_producer);
    assert!(next.iter().all(|&n| n == per_producer));
}

#[test]
fn two_producers_tagged_sequences() {
    let n = if cfg!(miri) { 300 } else { 2_000_000 };
    run(2, n, 1024);
}

#[test]
fn eight_producers_oversubscribed() {
    let n = if cfg!(miri) { 50 } else { 200_000 };
    let p = if cfg!(miri) { 3 } else { 8 };
    run(p, n, 256);
}
