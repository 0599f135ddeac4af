//! Stress of the blocking operations (`flowline::wait`): many wait / wake cycles with
//! random delays on both sides, so that sleeps start and publications land in every order.
//! A lost wake-up shows as a wait that ends with a timeout (the tests fail on any).
//! `STRESS_WAIT_CYCLES` sets the number of items (default 1,000,000 natively; CI's
//! ThreadSanitizer run uses fewer; Miri runs a few hundred). CI runs this file a second
//! time with `FLOWLINE_NO_MEMBARRIER=1`, so the symmetric fences (what runs where
//! membarrier is unavailable) are stressed natively too.
#![cfg(all(not(loom), feature = "std"))]

use std::time::{Duration, Instant};

use flowline::fifo::{mpsc, spsc};
use flowline::wait::{WaitError, WaitStrategy};

use crate::support::rng::Rng;

fn cycles() -> u64 {
    if cfg!(miri) {
        return 200;
    }
    std::env::var("STRESS_WAIT_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// The opt-out of the asymmetric barriers is honoured (the rest of this file then stresses
/// the symmetric fences).
#[test]
fn the_membarrier_opt_out_is_honoured() {
    let _ring = spsc::waitable::<u8>(1).unwrap();
    let opted_out =
        std::env::var_os("FLOWLINE_NO_MEMBARRIER").is_some_and(|v| !v.is_empty() && v != "0");
    let asymmetric = flowline::wait::asymmetric_barriers();
    eprintln!("asymmetric barriers (membarrier): {asymmetric}");
    if opted_out || cfg!(miri) || !cfg!(target_os = "linux") {
        assert!(!asymmetric);
    }
}

/// A wait that must not time out unless a wake-up was lost.
const LONG: Duration = Duration::from_secs(30);

/// The shared xorshift64, seeded with exact states (`Rng::from_state`: the seeds here
/// are used as they are, even ones included), with this file's draws.
impl Rng {
    /// A random strategy, mostly ones that sleep soon.
    fn strategy(&mut self) -> WaitStrategy {
        match self.next_u64() % 8 {
            0 => WaitStrategy::SpinYield { spins: 16 },
            1 => WaitStrategy::default(),
            _ => WaitStrategy::SpinPark {
                spins: (self.next_u64() % 4) as u32,
                yields: (self.next_u64() % 2) as u32,
            },
        }
    }
    /// A random short delay: nothing, a few spins, or (rarely) a yield.
    fn delay(&mut self) {
        match self.next_u64() % 16 {
            0..=7 => {}
            8..=14 => {
                for _ in 0..self.next_u64() % 256 {
                    std::hint::spin_loop();
                }
            }
            _ => std::thread::yield_now(),
        }
    }
}

/// SPSC, items one way through a ring of 1, 2 or 4 slots: the consumer sleeps for items,
/// the producer sleeps for room, both with random strategies and delays; then the
/// producer drops and the consumer's wait ends with `Disconnected`.
#[test]
fn spsc_waits_both_ways_lose_no_wake_up() {
    let n = cycles();
    for (cap, seed) in [(1, 1u64), (2, 2), (4, 3)] {
        let (mut tx, mut rx) = spsc::waitable::<u64>(cap).unwrap();
        let p = std::thread::spawn(move || {
            let mut r = Rng::from_state(seed * 0x9e37_79b9);
            for i in 0..n / 3 {
                if i % 64 == 0 {
                    tx.set_wait_strategy(r.strategy());
                }
                r.delay();
                if i % 2 == 0 {
                    tx.push_wait(i, LONG).unwrap();
                } else {
                    assert_eq!(tx.push_burst_wait(&[i], LONG), Ok(1));
                }
            }
        });
        let mut r = Rng::from_state(seed * 0x7f4a_7c15);
        let mut out = Vec::new();
        let mut next = 0;
        while next < n / 3 {
            if next % 64 == 0 {
                rx.set_wait_strategy(r.strategy());
            }
            r.delay();
            if next % 2 == 0 {
                assert_eq!(rx.pop_wait(LONG), Ok(next));
                next += 1;
            } else {
                out.clear();
                let k = rx.pop_burst_wait(&mut out, 3, LONG).unwrap();
                assert!(k >= 1);
                for &v in &out {
                    assert_eq!(v, next);
                    next += 1;
                }
            }
        }
        p.join().unwrap();
        assert_eq!(rx.pop_wait(LONG), Err(WaitError::Disconnected));
    }
}

/// MPSC: two producers sleep for room in a ring of 2 slots while the consumer sleeps for
/// items; every item arrives once, each producer's in order.
#[test]
fn mpsc_waits_both_ways_lose_no_wake_up() {
    let n = cycles() / 2;
    let (tx, mut rx) = mpsc::waitable::<u64>(2).unwrap();
    let producers: Vec<_> = (0..2u64)
        .map(|id| {
            let mut tx = tx.clone();
            std::thread::spawn(move || {
                let mut r = Rng::from_state(0x1234_5678 + id);
                for i in 0..n / 2 {
                    if i % 64 == 0 {
                        tx.set_wait_strategy(r.strategy());
                    }
                    r.delay();
                    tx.push_wait(id << 32 | i, LONG).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut r = Rng::from_state(0xdead_beef);
    let mut next = [0u64; 2];
    loop {
        if (next[0] + next[1]) % 64 == 0 {
            rx.set_wait_strategy(r.strategy());
        }
        r.delay();
        match rx.pop_wait(LONG) {
            Ok(v) => {
                let id = (v >> 32) as usize;
                assert_eq!(v & 0xffff_ffff, next[id], "producer {id} out of order");
                next[id] += 1;
            }
            Err(WaitError::Disconnected) => break,
            Err(e) => panic!("{e} after {next:?}: a lost wake-up"),
        }
    }
    assert_eq!(next, [n / 2, n / 2]);
    for p in producers {
        p.join().unwrap();
    }
}

#[test]
fn timeouts_are_honoured_and_give_the_item_back() {
    let (mut tx, mut rx) = spsc::waitable::<String>(1).unwrap();
    let t = Instant::now();
    assert_eq!(
        rx.pop_wait(Duration::from_millis(20)),
        Err(WaitError::Timeout)
    );
    assert!(t.elapsed() >= Duration::from_millis(20));
    tx.push("a".into()).unwrap();
    let t = Instant::now();
    let e = tx
        .push_wait("b".into(), Duration::from_millis(20))
        .unwrap_err();
    assert!(t.elapsed() >= Duration::from_millis(20));
    assert_eq!((e.error, e.value.as_str()), (WaitError::Timeout, "b"));
    // Zero timeout: no sleep (at most 64 polls before the first clock read).
    assert_eq!(rx.pop_wait(Duration::ZERO).as_deref(), Ok("a"));
    assert_eq!(rx.pop_wait(Duration::ZERO), Err(WaitError::Timeout));
    let (mut mtx, mut mrx) = mpsc::waitable::<u8>(1).unwrap();
    assert_eq!(
        mrx.pop_wait(Duration::from_millis(5)),
        Err(WaitError::Timeout)
    );
    mtx.push(1).unwrap();
    let e = mtx.push_wait(2, Duration::from_millis(5)).unwrap_err();
    assert_eq!((e.error, e.value), (WaitError::Timeout, 2));
    let mut v = Vec::new();
    assert_eq!(mrx.pop_burst_wait(&mut v, 4, Duration::ZERO), Ok(1));
}

/// A sleeping end is woken by the other end's drop, whatever the strategy, and an item
/// offered to a ring nobody reads comes back.
#[test]
fn a_drop_wakes_the_sleeper_with_disconnected() {
    for strategy in [
        WaitStrategy::Spin,
        WaitStrategy::SpinYield { spins: 10 },
        WaitStrategy::SpinPark {
            spins: 0,
            yields: 0,
        },
    ] {
        let (tx, mut rx) = spsc::waitable::<Box<u8>>(2).unwrap();
        rx.set_wait_strategy(strategy);
        let t = std::thread::spawn(move || rx.pop_wait(LONG));
        std::thread::sleep(Duration::from_millis(if cfg!(miri) { 1 } else { 20 }));
        drop(tx);
        assert_eq!(t.join().unwrap(), Err(WaitError::Disconnected));

        let (mut tx, rx) = spsc::waitable::<Box<u8>>(1).unwrap();
        tx.set_wait_strategy(strategy);
        tx.push(Box::new(1)).unwrap();
        let t = std::thread::spawn(move || tx.push_wait(Box::new(2), LONG));
        std::thread::sleep(Duration::from_millis(if cfg!(miri) { 1 } else { 20 }));
        drop(rx);
        let e = t.join().unwrap().unwrap_err();
        assert_eq!((e.error, *e.value), (WaitError::Disconnected, 2));

        let (tx, mut rx) = mpsc::waitable::<Box<u8>>(2).unwrap();
        rx.set_wait_strategy(strategy);
        let tx2 = tx.clone();
        let t = std::thread::spawn(move || rx.pop_wait(LONG));
        drop(tx);
        std::thread::sleep(Duration::from_millis(if cfg!(miri) { 1 } else { 20 }));
        drop(tx2); // the last producer
        assert_eq!(t.join().unwrap(), Err(WaitError::Disconnected));
    }
}

/// Items pushed just before the producer's drop are still delivered, not reported as a
/// disconnect.
#[test]
fn items_published_before_a_drop_are_delivered() {
    for _ in 0..if cfg!(miri) { 5 } else { 2000 } {
        let (mut tx, mut rx) = spsc::waitable::<u32>(4).unwrap();
        rx.set_wait_strategy(WaitStrategy::SpinPark {
            spins: 0,
            yields: 0,
        });
        let t = std::thread::spawn(move || {
            tx.push(1).unwrap();
            tx.push(2).unwrap();
        });
        assert_eq!(rx.pop_wait(LONG), Ok(1));
        assert_eq!(rx.pop_wait(LONG), Ok(2));
        assert_eq!(rx.pop_wait(LONG), Err(WaitError::Disconnected));
        t.join().unwrap();
    }
}

#[test]
fn mpsc_wait_for_items_stops_at_an_unpublished_reservation() {
    // Producer A reserves a slot and has not written it; producer B publishes after it. The
    // consumer takes items in order, so nothing is ready until A commits: a wait times out,
    // and once A commits both are ready.
    let (mut a, mut rx) = mpsc::waitable::<u32>(4).unwrap();
    let mut b = a.clone();
    let mut chunk = a.write_chunk(1);
    assert_eq!(chunk.len(), 1);
    b.push(2).unwrap();
    assert_eq!(
        rx.wait_for_items(Duration::from_millis(20)),
        Err(WaitError::Timeout)
    );
    assert_eq!(rx.pop(), None);
    chunk.as_mut_slices().0[0].write(1);
    // SAFETY: the one reserved slot was written just above.
    unsafe { chunk.commit(1) };
    assert_eq!(rx.wait_for_items(Duration::from_secs(30)), Ok(2));
    assert_eq!((rx.pop(), rx.pop()), (Some(1), Some(2)));
}

#[test]
fn a_zero_timeout_still_reports_a_closed_or_ready_ring() {
    // With no spins, the wait's first check of the clock comes before any poll of its
    // own; it must still look once more before answering `Timeout`.
    let none = WaitStrategy::SpinPark {
        spins: 0,
        yields: 0,
    };
    let (tx, mut rx) = spsc::waitable::<u32>(4).unwrap();
    rx.set_wait_strategy(none);
    drop(tx);
    assert_eq!(rx.pop_wait(Duration::ZERO), Err(WaitError::Disconnected));
    let (tx, mut rx) = mpsc::waitable::<u32>(4).unwrap();
    rx.set_wait_strategy(none);
    drop(tx);
    assert_eq!(rx.pop_wait(Duration::ZERO), Err(WaitError::Disconnected));
    let (mut tx, rx) = spsc::waitable::<u32>(1).unwrap();
    tx.set_wait_strategy(none);
    tx.push(1).unwrap();
    drop(rx);
    let e = tx.push_wait(2, Duration::ZERO).unwrap_err();
    assert_eq!((e.error, e.value), (WaitError::Disconnected, 2));
    let (mut tx, mut rx) = mpsc::waitable::<u32>(1).unwrap();
    tx.set_wait_strategy(none);
    tx.push(1).unwrap();
    let e = tx.push_wait(2, Duration::ZERO).unwrap_err();
    assert_eq!((e.error, e.value), (WaitError::Timeout, 2));
    assert_eq!(rx.pop(), Some(1));
}

/// `push_wait` checks for a dropped consumer before it pushes, also when the ring has
/// room: the item comes back instead of going into a ring nobody reads.
#[test]
fn push_wait_with_room_but_no_consumer_gives_the_item_back() {
    let (mut tx, rx) = spsc::waitable::<u32>(4).unwrap();
    drop(rx);
    let e = tx.push_wait(7, LONG).unwrap_err();
    assert_eq!((e.error, e.value), (WaitError::Disconnected, 7));
    assert!(tx.is_empty(), "nothing was pushed");
    let (mut tx, rx) = mpsc::waitable::<u32>(4).unwrap();
    drop(rx);
    let e = tx.push_wait(8, LONG).unwrap_err();
    assert_eq!((e.error, e.value), (WaitError::Disconnected, 8));
}
