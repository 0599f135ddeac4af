//! Stress: sequence numbers through SPSC rings with random burst sizes, checked for order
//! and count; and 8 producer/consumer pairs on 2 cores (oversubscribed, so ends are
//! preempted mid-operation all the time); boxed packets through the index-free `niche`
//! ring. A watchdog turns a hang into a failure.
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use flowline::fifo::spsc;

use crate::support::rng::Rng;

fn run_pair(n: u64, cap: usize, seed: u64) {
    let (mut tx, mut rx) = spsc::channel::<u64>(cap).unwrap();
    let producer = std::thread::spawn(move || {
        let mut r = Rng::new(seed);
        let mut buf = [0u64; 64];
        let mut next = 0u64;
        while next < n {
            let want = (1 + r.next_u64() % 64).min(n - next) as usize;
            match r.next_u64() % 3 {
                0 => {
                    for (i, b) in buf[..want].iter_mut().enumerate() {
                        *b = next + i as u64;
                    }
                    next += tx.push_burst(&buf[..want]) as u64;
                }
                1 => {
                    if tx.push(next).is_ok() {
                        next += 1;
                    }
                }
                _ => {
                    let mut c = tx.write_chunk(want);
                    let k = c.len();
                    let (a, b) = c.as_mut_slices();
                    for (i, s) in a.iter_mut().chain(b.iter_mut()).enumerate() {
                        s.write(next + i as u64);
                    }
                    // SAFETY: all k reserved slots were written just above.
                    unsafe { c.commit(k) };
                    next += k as u64;
                }
            }
            if tx.is_full() {
                std::thread::yield_now();
            }
        }
    });
    let mut r = Rng::new(seed.rotate_left(17));
    let mut buf = [0u64; 64];
    let mut expect = 0u64;
    let deadline = Instant::now() + Duration::from_secs(300);
    while expect < n {
        let want = (1 + r.next_u64() % 64) as usize;
        let got = match r.next_u64() % 3 {
            0 => {
                let k = rx.pop_burst(&mut buf[..want]);
                buf[..k].to_vec()
            }
            1 => rx.pop().into_iter().collect(),
            _ => {
                let c = rx.read_chunk(want);
                let (a, b) = c.as_slices();
                let v: Vec<u64> = a.iter().chain(b).copied().collect();
                c.commit_all();
                v
            }
        };
        if got.is_empty() {
            assert!(
                Instant::now() < deadline,
                "watchdog: stuck at {expect} of {n}"
            );
            std::thread::yield_now();
        }
        for v in got {
            assert_eq!(v, expect, "out of order or lost");
            expect += 1;
        }
    }
    producer.join().unwrap();
    assert!(rx.is_abandoned());
    assert_eq!(rx.pop(), None, "duplicated or extra items");
}

#[test]
fn ten_million_in_order_random_bursts() {
    let n = if cfg!(miri) { 2_000 } else { 10_000_000 };
    run_pair(n, 1024, 0x9e37_79b9_7f4a_7c15);
}

#[test]
fn eight_pairs_oversubscribed() {
    let n = if cfg!(miri) { 200 } else { 500_000 };
    let pairs = if cfg!(miri) { 2 } else { 8 };
    let handles: Vec<_> = (0..pairs)
        .map(|p| std::thread::spawn(move || run_pair(n, 64, 0x1234_5678 + p)))
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// Lazy release must not stall a producer that waits for the consumer to drain what it
/// saw (a drain barrier): popping the last item seen releases everything pending.
#[test]
fn lazy_release_does_not_stall_a_drain_barrier() {
    let (mut tx, mut rx) = spsc::channel::<u32>(1024).unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let p = std::thread::spawn(move || {
        for i in 0..10 {
            tx.push(i).unwrap();
        }
        let t = std::time::Instant::now();
        while !tx.is_empty() {
            assert!(
                t.elapsed().as_secs() < 60,
                "producer never saw the ring drained"
            );
            std::hint::spin_loop();
        }
        done_tx.send(()).unwrap();
    });
    let mut got = 0;
    while got < 10 {
        if rx.pop().is_some() {
            got += 1;
        }
    }
    // Waits for the producer's signal without touching the ring again.
    done_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the drain barrier never completed");
    p.join().unwrap();
}

/// The pattern the docs single out: two threads forwarding to each other over two full
/// rings, popping one item and then waiting for room in the other ring. With
/// `release_pending` before the wait (as documented), items keep circulating.
#[test]
fn forwarding_cycle_over_full_rings_runs_with_release_pending() {
    const CAP: usize = 64;
    let (mut a_tx, a_rx) = spsc::channel::<u32>(CAP).unwrap();
    let (mut b_tx, b_rx) = spsc::channel::<u32>(CAP).unwrap();
    for i in 0..CAP as u32 {
        a_tx.push(i).unwrap();
        b_tx.push(i).unwrap();
    }
    let forward = |mut rx: spsc::Consumer<u32>, mut tx: spsc::Producer<u32>| {
        std::thread::spawn(move || {
            // A stall is 10 s without a single item forwarded (Miri is slow, not stalled).
            let mut progress = std::time::Instant::now();
            for _ in 0..if cfg!(miri) { 300 } else { 20_000 } {
                let v = loop {
                    if let Some(v) = rx.pop() {
                        break v;
                    }
                    std::hint::spin_loop();
                };
                rx.release_pending();
                let mut v = v;
                while let Err(back) = tx.push(v) {
                    v = back.into_inner();
                    assert!(
                        progress.elapsed().as_secs() < 10,
                        "forwarding cycle stalled"
                    );
                    std::hint::spin_loop();
                }
                progress = std::time::Instant::now();
            }
            (rx, tx)
        })
    };
    let x = forward(a_rx, b_tx);
    let y = forward(b_rx, a_tx);
    x.join().unwrap();
    y.join().unwrap();
}

/// The index-free `niche` ring: boxed packets (heap contents written by the producer, read
/// by the consumer: a missing synchronisation edge is a data race under TSan and Miri)
/// with random single, burst and bulk operations on both sides, checked for order and
/// count, on a ring smaller than a cache line of slots and on a larger one.
#[test]
fn niche_boxed_packets_random_ops() {
    use flowline::fifo::niche;
    let n: u64 = if cfg!(miri) { 300 } else { 2_000_000 };
    for (cap, seed) in [(8usize, 7u64), (1024, 11)] {
        let (mut tx, mut rx) = niche::channel::<Box<u64>>(cap).unwrap();
        let producer = std::thread::spawn(move || {
            let mut r = Rng::new(seed);
            let mut next = 0u64;
            while next < n {
                let x = r.next_u64();
                let k = ((x >> 8) % 40).min(n - next) as usize;
                let sent = match x % 3 {
                    0 => u64::from(tx.push(Box::new(next)).is_ok()),
                    1 => {
                        let mut it = (0..k).map(|i| Box::new(next + i as u64));
                        tx.push_burst_iter(&mut it) as u64
                    }
                    _ => {
                        let items = (0..k).map(|i| Box::new(next + i as u64));
                        if tx.push_bulk_iter(items).is_ok() {
                            k as u64
                        } else {
                            0
                        }
                    }
                };
                if sent == 0 {
                    std::thread::yield_now();
                }
                next += sent;
            }
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut r = Rng::new(seed ^ 0xff);
        let mut expect = 0u64;
        let mut buf = Vec::with_capacity(64);
        while expect < n {
            assert!(
                Instant::now() < deadline,
                "niche stress stalled at {expect}"
            );
            let x = r.next_u64();
            let k = ((x >> 8) % 40) as usize;
            buf.clear();
            match x % 3 {
                0 => buf.extend(rx.pop()),
                1 => {
                    rx.pop_burst_into(&mut buf, k);
                }
                _ => {
                    let _ = rx.pop_bulk_into(&mut buf, k.min((n - expect) as usize));
                }
            }
            if buf.is_empty() {
                std::thread::yield_now();
            }
            for v in &buf {
                assert_eq!(**v, expect);
                expect += 1;
            }
        }
        producer.join().unwrap();
        assert!(rx.pop().is_none());
    }
}
