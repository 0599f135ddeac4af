//! Unit tests of the lock meter: counts, sampling, estimates and the table.

use super::*;
use std::time::Duration;

fn site(name: &str) -> SiteStats {
    snapshot_of(name).unwrap_or_else(|| panic!("no site {name}"))
}

/// One thread holds the lock for a known time while another waits: the figures match
/// within loose bounds (not exact times: this machine is shared and noisy).
fn held_while_another_waits(spin: bool, name: &'static str) {
    const HOLD: Duration = Duration::from_millis(30);
    // Every hold timed: the figures below compare single holds.
    let spin_lock = MeteredSpinLock::<u32>::named(name, 0).with_hold_sampling(1);
    let mutex = MeteredMutex::<u32>::named(name, 0).with_hold_sampling(1);
    let started = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            if spin {
                let _g = spin_lock.lock();
                started.wait();
                std::thread::sleep(HOLD);
            } else {
                let _g = mutex.lock().unwrap();
                started.wait();
                std::thread::sleep(HOLD);
            }
        });
        started.wait();
        if spin {
            *spin_lock.lock() += 1;
        } else {
            *mutex.lock().unwrap() += 1;
        }
    });
    let s = site(name);
    assert_eq!((s.total, s.contended, s.nowait, s.rejected), (2, 1, 1, 0));
    assert_eq!(s.holds_timed, 2);
    let hold = HOLD.as_nanos() as u64;
    assert!(
        s.hold_max_ns >= hold * 9 / 10,
        "hold max {} ns",
        s.hold_max_ns
    );
    assert!(
        s.hold_max_ns < 5_000_000_000,
        "hold max {} ns",
        s.hold_max_ns
    );
    // The waiter started waiting after the barrier, within the holder's sleep.
    assert!(s.wait_max_ns >= hold / 2, "wait max {} ns", s.wait_max_ns);
    assert!(s.wait_max_ns <= s.hold_max_ns + 1_000_000_000);
    assert!(s.hold_mean_ns() <= s.hold_max_ns as f64);
    assert!(s.wait_mean_ns() <= s.wait_max_ns as f64 + 1.0);
    assert!(s.util() > 0.0 && s.util() <= 1.05, "util {}", s.util());
    assert_eq!(s.contention(), 0.5);
}

/// Acquisitions on one thread, alternating a lock that times every hold and one that
/// times one in 16: the first has every hold timed, the second about a 16th (the
/// expected count is 1/16 of the acquisitions, with a standard deviation of about 1%
/// of that; the bounds are far wider), whatever the interleaving.
#[test]
fn holds_are_timed_at_each_locks_own_rate() {
    let n: u64 = if cfg!(miri) { 640 } else { 64_000 };
    let exact = MeteredSpinLock::<u64>::named("unit-rate-exact", 0).with_hold_sampling(1);
    let sampled = MeteredMutex::<u64>::named("unit-rate-16", 0).with_hold_sampling(16);
    std::thread::spawn(move || {
        for _ in 0..n {
            *exact.lock() += 1;
            *sampled.lock().unwrap() += 1;
        }
    })
    .join()
    .unwrap();
    let (e, s) = (site("unit-rate-exact"), site("unit-rate-16"));
    assert_eq!((e.total, e.holds_timed), (n, n));
    assert_eq!(s.total, n);
    let expected = n / 16;
    assert!(
        s.holds_timed >= expected / 2 && s.holds_timed <= expected * 3 / 2,
        "{} of {n} holds timed, expected about {expected}",
        s.holds_timed
    );
    assert!(s.hold_mean_ns() <= s.hold_max_ns as f64 + 1.0);
}

/// Short-lived threads: each takes a lock 8 times. A thread's first acquisition only
/// fills its sampling budget, so about 7/32 of a hold per thread is timed (about 22 for
/// 100 threads); timing every thread's first hold would give at least 100.
#[test]
fn short_lived_threads_do_not_fill_the_sample_with_first_holds() {
    let threads: u64 = if cfg!(miri) { 12 } else { 100 };
    let l = MeteredSpinLock::<u64>::named("unit-short-threads", 0);
    for _ in 0..threads {
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..8 {
                    *l.lock() += 1;
                }
            });
        });
    }
    let s = site("unit-short-threads");
    assert_eq!(s.total, threads * 8);
    // Expected 7/32 per thread; the bound is that plus five standard deviations.
    let expected = threads as f64 * 7.0 / 32.0;
    assert!(
        (s.holds_timed as f64) < expected + 5.0 * expected.sqrt(),
        "{} holds timed of {} threads' 8 each",
        s.holds_timed,
        threads
    );
}

/// More threads on one site than it has shards: the rest count on the shared
/// overflow counters, and the figures stay exact. Not under Miri: 70 interpreted
/// threads for counting logic on plain atomics (the unsafe code, the counter handles'
/// line pointers, runs in every other test here).
#[test]
#[cfg_attr(miri, ignore)]
fn threads_beyond_the_shards_count_exactly() {
    let threads = SHARDS + 6;
    let l = MeteredMutex::<u64>::named("unit-overflow", 0).with_hold_sampling(1);
    let all_in = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                *l.lock().unwrap() += 1;
                // Every thread keeps its shard until it exits: wait for all.
                all_in.wait();
                for _ in 0..4 {
                    *l.lock().unwrap() += 1;
                }
            });
        }
    });
    let s = site("unit-overflow");
    let n = threads as u64 * 5;
    assert_eq!((s.total, s.holds_timed, s.rejected), (n, n, 0));
    assert_eq!(s.nowait + s.contended, n);
}

/// One thread cycling through more sites than its inline cache holds: every site
/// keeps its own exact count.
#[test]
fn many_sites_on_one_thread_count_exactly() {
    let names = ["unit-many-a", "unit-many-b", "unit-many-c", "unit-many-d"];
    let locks = names.map(|n| MeteredSpinLock::<u32>::named(n, 0));
    let unnamed = MeteredSpinLock::<u32>::new(0);
    std::thread::spawn(move || {
        for round in 0..10 {
            for (i, l) in locks.iter().enumerate() {
                for _ in 0..=i {
                    *l.lock() += 1;
                }
            }
            if round % 2 == 0 {
                *unnamed.lock() += 1;
            }
        }
    })
    .join()
    .unwrap();
    for (i, n) in names.iter().enumerate() {
        assert_eq!(site(n).total, 10 * (i as u64 + 1), "{n}");
    }
}

/// A lock taken from a thread-local's destructor, when this thread's lockmeter cache
/// may already be gone: still counted.
#[test]
fn locks_taken_while_thread_locals_are_destroyed_are_counted() {
    static LOCK: OnceLock<MeteredSpinLock<u32>> = OnceLock::new();
    struct TakesTheLockOnDrop;
    impl Drop for TakesTheLockOnDrop {
        fn drop(&mut self) {
            let l = LOCK.get_or_init(|| MeteredSpinLock::named("unit-tls-teardown", 0));
            *l.lock() += 1;
        }
    }
    std::thread_local! {
        static GUARD: std::cell::RefCell<Option<TakesTheLockOnDrop>> =
            const { std::cell::RefCell::new(None) };
    }
    std::thread::spawn(|| {
        let l = LOCK.get_or_init(|| MeteredSpinLock::named("unit-tls-teardown", 0));
        *l.lock() += 1; // this thread's cache now exists
        GUARD.with(|g| *g.borrow_mut() = Some(TakesTheLockOnDrop));
    })
    .join()
    .unwrap();
    assert_eq!(site("unit-tls-teardown").total, 2);
}

#[test]
fn untimed_sites_show_no_hold_figures() {
    let s = SiteStats {
        name: "x".into(),
        total: 3,
        nowait: 3,
        ..Default::default()
    };
    assert!(format_table(&[s]).lines().nth(1).unwrap().contains("  -("));
}

#[test]
fn estimated_total_is_the_timed_mean_times_the_acquisitions() {
    assert_eq!(estimate(100, 4, 40), 1000);
    assert_eq!(estimate(100, 40, 40), 100, "every hold timed: exact");
    assert_eq!(estimate(0, 0, 40), 0, "nothing timed yet");
    assert_eq!(estimate(u64::MAX, 1, 2), u64::MAX, "saturates");
}

#[test]
#[should_panic(expected = "give 1 to time every hold")]
fn zero_hold_sampling_is_refused_with_a_message() {
    let _ = MeteredSpinLock::<u8>::new(0).with_hold_sampling(0);
}

#[test]
#[should_panic(expected = "up to MAX_HOLD_SAMPLING")]
fn absurd_hold_sampling_is_refused_with_a_message() {
    let _ = MeteredMutex::<u8>::new(0).with_hold_sampling(MAX_HOLD_SAMPLING + 1);
}

#[test]
fn spinlock_figures_match_a_known_hold() {
    held_while_another_waits(true, "unit-spin-known-hold");
}

#[test]
fn mutex_figures_match_a_known_hold() {
    held_while_another_waits(false, "unit-mutex-known-hold");
}

/// A holder whose thread panics (the guard dropped while unwinding) unlocks, and the
/// metered hold is still recorded; nothing is poisoned (spinlocks have no poisoning).
#[test]
fn spinlock_holder_that_panics_unlocks() {
    let l = MeteredSpinLock::<u32>::named("unit-spin-panic", 0);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            let mut g = l.lock();
            *g = 7;
            panic!("holder dies");
        })
        .join()
    });
    assert!(r.is_err());
    assert!(!l.lock.is_locked());
    assert_eq!(*l.lock(), 7);
    assert_eq!(site("unit-spin-panic").total, 2);
}

#[test]
fn failed_try_lock_counts_as_rejected() {
    let l = MeteredSpinLock::<()>::named("unit-reject", ());
    let g = l.lock();
    assert!(l.try_lock().is_none());
    assert!(l.try_lock().is_none());
    drop(g);
    assert!(l.try_lock().is_some());
    let m = MeteredMutex::<()>::named("unit-reject-mutex", ());
    let g = m.lock().unwrap();
    assert!(matches!(m.try_lock(), Err(TryLockError::WouldBlock)));
    drop(g);
    let s = site("unit-reject");
    assert_eq!((s.total, s.nowait, s.rejected), (2, 2, 2));
    assert_eq!(s.reject_rate(), 0.5);
    assert_eq!(site("unit-reject-mutex").rejected, 1);
}

#[test]
fn unnamed_locks_are_metered_per_call_site() {
    let l = MeteredSpinLock::<u8>::new(0);
    for _ in 0..3 {
        *l.lock() += 1; // one site
    }
    *l.lock() += 1; // another
    let line_a = line!() - 3;
    let mine: Vec<SiteStats> = snapshot()
        .into_iter()
        .filter(|s| s.name.starts_with(file!()))
        .collect();
    let a = mine
        .iter()
        .find(|s| s.name == format!("{}:{}", file!(), line_a))
        .expect("site of the loop");
    let b = mine
        .iter()
        .find(|s| s.name == format!("{}:{}", file!(), line_a + 2))
        .expect("site after the loop");
    assert_eq!((a.total, b.total), (3, 1));
}

#[test]
fn unmetered_locks_record_nothing() {
    let l = MeteredSpinLock::<u8, false>::named("unit-off", 0);
    *l.lock() += 1;
    assert!(l.try_lock().is_some());
    let m = MeteredMutex::<u8, false>::named("unit-off", 0);
    *m.lock().unwrap() += 1;
    assert!(snapshot().iter().all(|s| s.name != "unit-off"));
}

#[test]
fn poisoned_mutex_is_reported_and_still_metered() {
    let m = std::sync::Arc::new(MeteredMutex::<u8>::named("unit-poison", 0));
    let m2 = std::sync::Arc::clone(&m);
    let _ = std::thread::spawn(move || {
        let _g = m2.lock().unwrap();
        panic!("poison it");
    })
    .join();
    let r = m.lock();
    assert!(r.is_err());
    assert_eq!(*r.unwrap_err().into_inner(), 0);
    assert_eq!(site("unit-poison").total, 2);
}

#[test]
fn table_is_sorted_by_contention() {
    let s = |name: &str, total, contended| SiteStats {
        name: name.into(),
        total,
        contended,
        nowait: total - contended,
        ..Default::default()
    };
    let mut v = vec![s("calm", 10, 0), s("hot", 10, 5)];
    v.sort_by(|a, b| b.contention().total_cmp(&a.contention()));
    let t = format_table(&v);
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].contains("NOWAIT") && lines[0].contains("RJECT"));
    assert!(lines[1].ends_with("hot") && lines[2].ends_with("calm"));
    assert!(lines[1].contains("50.0%"));
}
