//! `lock_*` scenarios: what lock metering costs. `lock_uncontended`: one thread (CPU 0)
//! taking and releasing a lock around a one-word update, ns per lock/unlock pair, for the
//! bare locks and their metered wrappers: `_metered` with the default hold sampling (one
//! uncontended hold in 32 timed), `_exact` timing every hold (TSC timestamps on x86_64),
//! `_off` the wrapper with metering compiled out. `lock_contended_2threads`: two threads
//! (CPU 0 and 1) doing the same on one lock, ns per pair per thread. Each impl runs its own
//! loop (as a user's code would), so one lock's code does not shape another's.

use std::hint::black_box;
use std::time::Instant;

use flowline::lockmeter::{MeteredMutex, MeteredSpinLock, SpinLock};

use crate::harness::{alone, pair, Impl, Metric, Report};

/// `threads` threads (1 or 2) each run `op` `n` times; ns per op per thread.
fn run(n: u64, threads: usize, op: impl Fn() + Sync) -> f64 {
    let body = || {
        let t = Instant::now();
        for _ in 0..n {
            op();
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
            (
                "spin",
                Box::new(move || {
                    let l = SpinLock::new(0u64);
                    vec![run(n, threads, || *l.lock() += black_box(1))]
                }),
            ),
            (
                "spin_metered",
                Box::new(move || {
                    let l = MeteredSpinLock::<u64>::named("report spin", 0);
                    vec![run(n, threads, || *l.lock() += black_box(1))]
                }),
            ),
            (
                "spin_exact",
                Box::new(move || {
                    let l =
                        MeteredSpinLock::<u64>::named("report spin exact", 0).with_hold_sampling(1);
                    vec![run(n, threads, || *l.lock() += black_box(1))]
                }),
            ),
            (
                "spin_off",
                Box::new(move || {
                    let l = MeteredSpinLock::<u64, false>::named("report spin off", 0);
                    vec![run(n, threads, || *l.lock() += black_box(1))]
                }),
            ),
            (
                "mutex",
                Box::new(move || {
                    let l = std::sync::Mutex::new(0u64);
                    vec![run(n, threads, || *l.lock().unwrap() += black_box(1))]
                }),
            ),
            (
                "mutex_metered",
                Box::new(move || {
                    let l = MeteredMutex::<u64>::named("report mutex", 0);
                    vec![run(n, threads, || *l.lock().unwrap() += black_box(1))]
                }),
            ),
            (
                "mutex_exact",
                Box::new(move || {
                    let l =
                        MeteredMutex::<u64>::named("report mutex exact", 0).with_hold_sampling(1);
                    vec![run(n, threads, || *l.lock().unwrap() += black_box(1))]
                }),
            ),
        ];
        r.scenario(
            name,
            &ns,
            impls,
            &[
                ("spin_metered", "spin"),
                ("spin_exact", "spin"),
                ("spin_off", "spin"),
                ("mutex_metered", "mutex"),
                ("mutex_exact", "mutex"),
            ],
        );
    }
}
