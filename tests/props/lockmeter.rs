//! Property tests of the lockmeter: the statistics' arithmetic (no overflow or panic on any
//! input, mean <= max and rates within 0..=1 for consistent inputs), and single-thread op
//! sequences on metered locks against a model of the counts.
#![cfg(all(not(loom), feature = "std"))]

use flowline::lockmeter::{self, format_table, MeteredMutex, MeteredSpinLock, SiteStats};
use proptest::prelude::*;

/// Site figures that could come from real acquisitions: `total = nowait + contended`, each
/// maximum at most its total, each total at most count times its maximum.
fn consistent() -> impl Strategy<Value = SiteStats> {
    (
        0u64..1 << 40,
        0u64..1 << 40,
        0u64..1 << 40,
        1u64..1 << 50,
        1u64..1 << 50,
        0u64..1 << 50,
        1usize..256,
    )
        .prop_flat_map(
            |(nowait, contended, rejected, hold_max, wait_max, slack, cpus)| {
                let total = nowait + contended;
                let hold_hi = hold_max.saturating_mul(total.max(1));
                let wait_hi = wait_max.saturating_mul(contended.max(1));
                (
                    Just((
                        nowait, contended, rejected, hold_max, wait_max, slack, cpus, total,
                    )),
                    hold_max..=hold_hi.max(hold_max),
                    wait_max..=wait_hi.max(wait_max),
                )
            },
        )
        .prop_map(
            |(
                (nowait, contended, rejected, hold_max, wait_max, slack, cpus, total),
                hold_total,
                wait_total,
            )| {
                SiteStats {
                    name: "p".into(),
                    total,
                    nowait,
                    contended,
                    rejected,
                    hold_total_ns: if total == 0 { 0 } else { hold_total },
                    hold_max_ns: if total == 0 { 0 } else { hold_max },
                    holds_timed: total,
                    wait_total_ns: if contended == 0 { 0 } else { wait_total },
                    wait_max_ns: if contended == 0 { 0 } else { wait_max },
                    // Holds of one lock never overlap; waiters at most fill every CPU.
                    elapsed_ns: hold_total
                        .max(if contended == 0 { 0 } else { wait_total } / cpus as u64 + 1)
                        .saturating_add(slack),
                    cpus,
                }
            },
        )
}

fn arbitrary() -> impl Strategy<Value = SiteStats> {
    (any::<[u64; 10]>(), any::<usize>()).prop_map(|(v, cpus)| SiteStats {
        name: "any".into(),
        total: v[0],
        nowait: v[1],
        contended: v[2],
        rejected: v[3],
        hold_total_ns: v[4],
        hold_max_ns: v[5],
        holds_timed: v[9],
        wait_total_ns: v[6],
        wait_max_ns: v[7],
        elapsed_ns: v[8],
        cpus,
    })
}

#[derive(Clone, Debug)]
enum Op {
    /// `lock` and unlock.
    Lock,
    /// `try_lock` on the free lock (succeeds).
    TryFree,
    /// `try_lock` while this thread holds the lock (rejected).
    TryHeld,
}

proptest! {
    #[test]
    fn consistent_figures_keep_their_bounds(s in consistent()) {
        prop_assert!(s.hold_mean_ns() <= s.hold_max_ns as f64 * (1.0 + 1e-9));
        prop_assert!(s.wait_mean_ns() <= s.wait_max_ns as f64 * (1.0 + 1e-9));
        for r in [s.util(), s.contention(), s.nowait_rate(), s.reject_rate(), s.cpu_waiting()] {
            prop_assert!((0.0..=1.0).contains(&r), "rate {} out of 0..=1 for {:?}", r, s);
        }
        let whole = if s.total == 0 { 0.0 } else { 1.0 };
        prop_assert!((s.contention() + s.nowait_rate() - whole).abs() < 1e-9);
        let t = format_table(&[s]);
        prop_assert_eq!(t.lines().count(), 2);
    }

    #[test]
    fn any_figures_never_panic_or_go_non_finite(s in arbitrary()) {
        for r in [s.hold_mean_ns(), s.wait_mean_ns(), s.util(), s.contention(), s.nowait_rate(), s.reject_rate(), s.cpu_waiting()] {
            prop_assert!(r.is_finite() && r >= 0.0);
        }
        let _ = format_table(&[s]);
    }

    #[test]
    fn op_sequences_count_like_the_model(spin in any::<bool>(), exact in any::<bool>(), ops in proptest::collection::vec(
        prop_oneof![Just(Op::Lock), Just(Op::TryFree), Just(Op::TryHeld)], 0..40)) {
        // A fresh name per case: sites are process-wide. Kept in a static, so the leaked
        // names stay reachable (Miri's leak check).
        static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
        let name: &'static str = {
            let mut names = NAMES.lock().unwrap();
            let n: &'static str = Box::leak(format!("proptest-{}", names.len()).into_boxed_str());
            names.push(n);
            n
        };
        // Every hold timed, or the default sampling (counts are exact either way).
        let one_in = if exact { 1 } else { lockmeter::DEFAULT_HOLD_SAMPLING };
        let spin_lock = MeteredSpinLock::<u32>::named(name, 0).with_hold_sampling(one_in);
        let mutex = MeteredMutex::<u32>::named(name, 0).with_hold_sampling(one_in);
        let (mut total, mut rejected) = (0u64, 0u64);
        for op in &ops {
            match (op, spin) {
                (Op::Lock, true) => *spin_lock.lock() += 1,
                (Op::Lock, false) => *mutex.lock().unwrap() += 1,
                (Op::TryFree, true) => prop_assert!(spin_lock.try_lock().is_some()),
                (Op::TryFree, false) => prop_assert!(mutex.try_lock().is_ok()),
                (Op::TryHeld, true) => {
                    let _g = spin_lock.lock();
                    prop_assert!(spin_lock.try_lock().is_none());
                }
                (Op::TryHeld, false) => {
                    let _g = mutex.lock().unwrap();
                    prop_assert!(mutex.try_lock().is_err());
                }
            }
            total += 1;
            rejected += u64::from(matches!(op, Op::TryHeld));
        }
        let s = lockmeter::snapshot().into_iter().find(|s| s.name == name);
        if ops.is_empty() {
            prop_assert!(s.is_none());
        } else {
            let s = s.unwrap();
            // One thread: nothing ever waits.
            prop_assert_eq!((s.total, s.nowait, s.contended, s.rejected), (total, total, 0, rejected));
            // Sampled, the mean is estimated from the timed holds: still at most their
            // maximum. UTIL is bounded by 1 only when every hold is timed (an estimate from
            // a few holds can pass it).
            prop_assert!(s.holds_timed <= s.total);
            prop_assert!(s.hold_mean_ns() <= s.hold_max_ns as f64 + 1.0);
            if exact {
                prop_assert_eq!(s.holds_timed, s.total);
                prop_assert!(s.util() <= 1.0 + 1e-6, "util {}", s.util());
            }
        }
    }
}
