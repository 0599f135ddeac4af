//! `lock_*` scenarios: what lock metering costs. `lock_uncontended`: one thread (CPU 0)
//! taking and releasing a lock around a one-word update, ns per lock/unlock pair, for the
//! bare locks and their metered wrappers (TSC timestamps on x86_64; `_off` is the wrapper
//! with metering compiled out). `lock_contended_2threads`: two threads (CPU 0 and 1) doing
//! the same on one lock, ns per pair per thread.

use std::hint::black_box;
use std::time::Instant;

use flowline::lockmeter::{MeteredMutex, MeteredSpinLock, SpinLock};

use crate::harness::{alone, pair, Impl, Metric, Report};

#[derive(Clone, Copy)]
enum Kind {
    Spin,
    SpinMetered,
    SpinOff,
    Mutex,
    MutexMetered,
}

/// `threads` threads (1 or 2) each take the lock `n` times; ns per pair per thread.
fn run(kind: Kind, n: u64, threads: usize) -> f64 {
    let spin = SpinLock::new(0u64);
    let spin_m = MeteredSpinLock::<u64>::named("report lock", 0);
    let spin_off = MeteredSpinLock::<u64, false>::named("report lock off", 0);
    let mutex = std::sync::Mutex::new(0u64);
    let mutex_m = MeteredMutex::<u64>::named("report mutex", 0);
    let body = || {
        let t = Instant::now();
        for _ in 0..n {
            match kind {
                Kind::Spin => *spin.lock() += black_box(1),
                Kind::SpinMetered => *spin_m.lock() += black_box(1),
                Kind::SpinOff => *spin_off.lock() += black_box(1),
                Kind::Mutex => *mutex.lock().unwrap() += black_box(1),
                Kind::MutexMetered => *mutex_m.lock().unwrap() += black_box(1),
            }
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    if threads == 1 {
        alone(body)
    } else {
        let (a, b) = pair(body, body);
        (a + b) / 2.0
    }
}

pub fn run_all(r: &mut Report) {
    let ns = [Metric {
        suffix: "",
        unit: "ns/pair",
        higher_is_better: false,
    }];
    for (name, threads) in [("lock_uncontended", 1), ("lock_contended_2threads", 2)] {
        let n: u64 = match (r.quick, threads) {
            (true, _) => 10_000,
            (false, 1) => 20_000_000,
            (false, _) => 4_000_000,
        };
        let impls: Vec<Impl> = vec![
            ("spin", Box::new(move || vec![run(Kind::Spin, n, threads)])),
            (
                "spin_metered",
                Box::new(move || vec![run(Kind::SpinMetered, n, threads)]),
            ),
            (
                "spin_off",
                Box::new(move || vec![run(Kind::SpinOff, n, threads)]),
            ),
            (
                "mutex",
                Box::new(move || vec![run(Kind::Mutex, n, threads)]),
            ),
            (
                "mutex_metered",
                Box::new(move || vec![run(Kind::MutexMetered, n, threads)]),
            ),
        ];
        r.scenario(
            name,
            &ns,
            impls,
            &[
                ("spin_metered", "spin"),
                ("spin_off", "spin"),
                ("mutex_metered", "mutex"),
            ],
        );
    }
}
