//! What the meter reports: per-site figures ([`SiteStats`]) summed over the sites' shards,
//! estimates of hold and wait time from the sampled holds, and the lockmeter-style
//! [`table`].

use super::*;

/// One lock site's figures (see the [module docs](super) for each column). Times are in
/// nanoseconds.
///
/// ```
/// let s = flowline::lockmeter::SiteStats { total: 4, nowait: 3, contended: 1, rejected: 1,
///     hold_total_ns: 400, hold_max_ns: 250, wait_total_ns: 90, wait_max_ns: 90,
///     elapsed_ns: 1000, ..Default::default() };
/// assert_eq!((s.hold_mean_ns(), s.wait_mean_ns()), (100.0, 90.0));
/// assert_eq!((s.util(), s.contention(), s.reject_rate()), (0.4, 0.25, 0.2));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteStats {
    /// The lock's name, or the call site as `file:line`.
    pub name: String,
    /// Acquisitions (TOTAL).
    pub total: u64,
    /// Acquisitions that did not wait (NOWAIT).
    pub nowait: u64,
    /// Acquisitions that had to wait (SPIN / CON).
    pub contended: u64,
    /// `try_lock` calls that found the lock taken (RJECT).
    pub rejected: u64,
    /// Time held, summed over acquisitions: exact when every hold was timed, else
    /// estimated as the mean of the timed holds times `total` (see
    /// [`MeteredSpinLock::with_hold_sampling`]).
    pub hold_total_ns: u64,
    /// Longest timed hold (with sampling, the longest of the holds that were timed).
    pub hold_max_ns: u64,
    /// Holds that were timed (`total` when every hold is): what the hold figures rest on.
    pub holds_timed: u64,
    /// Time waited, summed over the contended acquisitions.
    pub wait_total_ns: u64,
    /// Longest wait.
    pub wait_max_ns: u64,
    /// Wall time since the site's first use.
    pub elapsed_ns: u64,
    /// CPUs of the machine, for the share of CPU time spent waiting.
    pub cpus: usize,
}

pub(super) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl SiteStats {
    /// Mean hold time, ns (0 without acquisitions).
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { total: 2, hold_total_ns: 30, ..Default::default() };
    /// assert_eq!(s.hold_mean_ns(), 15.0);
    /// ```
    #[must_use]
    pub fn hold_mean_ns(&self) -> f64 {
        ratio(self.hold_total_ns, self.total)
    }

    /// Mean wait of the acquisitions that waited, ns (0 if none did).
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { contended: 2, wait_total_ns: 10, ..Default::default() };
    /// assert_eq!(s.wait_mean_ns(), 5.0);
    /// ```
    #[must_use]
    pub fn wait_mean_ns(&self) -> f64 {
        ratio(self.wait_total_ns, self.contended)
    }

    /// UTIL: the share of the wall time since the site's first use that the lock was held
    /// from this site. For one lock whose every hold is timed, 0 to 1 (a clock step can
    /// push it slightly past 1). With sampled holds it is an estimate, and a site that
    /// several locks pass through (one name, or one call site used on many locks) can
    /// pass 1: the locks were held at once.
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { hold_total_ns: 25, elapsed_ns: 100, ..Default::default() };
    /// assert_eq!(s.util(), 0.25);
    /// ```
    #[must_use]
    pub fn util(&self) -> f64 {
        ratio(self.hold_total_ns, self.elapsed_ns)
    }

    /// CON: the share of acquisitions that had to wait (0 to 1).
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { total: 4, contended: 1, ..Default::default() };
    /// assert_eq!(s.contention(), 0.25);
    /// ```
    #[must_use]
    pub fn contention(&self) -> f64 {
        ratio(self.contended, self.total)
    }

    /// NOWAIT: the share of acquisitions that did not wait (0 to 1).
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { total: 4, nowait: 3, ..Default::default() };
    /// assert_eq!(s.nowait_rate(), 0.75);
    /// ```
    #[must_use]
    pub fn nowait_rate(&self) -> f64 {
        ratio(self.nowait, self.total)
    }

    /// RJECT: the share of attempts (acquisitions and failed `try_lock`s) that failed.
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { total: 3, rejected: 1, ..Default::default() };
    /// assert_eq!(s.reject_rate(), 0.25);
    /// ```
    #[must_use]
    pub fn reject_rate(&self) -> f64 {
        ratio(self.rejected, self.total.saturating_add(self.rejected))
    }

    /// % CPU: the share of the machine's CPU time (wall time times `cpus`) spent waiting
    /// at this site (0 to 1 for a spinlock, whose waiters burn their CPU; a blocking
    /// mutex's waiters sleep, so with more waiting threads than CPUs it can pass 1).
    ///
    /// ```
    /// let s = flowline::lockmeter::SiteStats { wait_total_ns: 50, elapsed_ns: 100, cpus: 2, ..Default::default() };
    /// assert_eq!(s.cpu_waiting(), 0.25);
    /// ```
    #[must_use]
    pub fn cpu_waiting(&self) -> f64 {
        ratio(
            self.wait_total_ns,
            self.elapsed_ns.saturating_mul(self.cpus.max(1) as u64),
        )
    }
}

/// The figures of every lock site used so far in this process, most contended first (by
/// CON, then by total wait).
///
/// ```
/// let l = flowline::lockmeter::MeteredSpinLock::<_>::named("snapshot-doc", 0);
/// *l.lock() += 1;
/// let all = flowline::lockmeter::snapshot();
/// assert!(all.iter().any(|s| s.name == "snapshot-doc" && s.total == 1));
/// ```
pub fn snapshot() -> Vec<SiteStats> {
    let sites: Vec<Arc<Site>> = registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
        .cloned()
        .collect();
    let now = ticks();
    let cpus = crate::topology::available_cpus();
    let mut out: Vec<SiteStats> = sites.iter().map(|s| s.stats(now, cpus)).collect();
    out.sort_by(|a, b| {
        b.contention()
            .total_cmp(&a.contention())
            .then(b.wait_total_ns.cmp(&a.wait_total_ns))
            .then(a.name.cmp(&b.name))
    });
    out
}

/// One site's figures by name, as [`snapshot`] has them (for tests: reads one site
/// instead of all of them).
#[cfg(all(test, not(loom)))]
pub(super) fn snapshot_of(name: &str) -> Option<SiteStats> {
    let site = registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(name)
        .cloned()?;
    Some(site.stats(ticks(), crate::topology::available_cpus()))
}

impl Site {
    /// This site's figures at tick `now`, on a machine of `cpus` CPUs.
    pub(super) fn stats(&self, now: u64, cpus: usize) -> SiteStats {
        let k = ns_per_tick();
        let ns = |t: u64| (t as f64 * k) as u64;
        // Each shard is read whole (a record lands in one shard, under its sequence
        // word); the shared overflow counters are read once each, but a record there
        // may land between two of those reads, so the parts are clamped to `total`.
        let g = self.group.as_ref().map(|g| g.snapshot());
        let o: [u64; FIELDS] = core::array::from_fn(|i| self.overflow[i].load(Ordering::Relaxed));
        let v = |i: usize| g.as_ref().map_or(0, |g| g[i]).wrapping_add(o[i]);
        let total = v(TOTAL);
        let contended = v(CONTENDED).min(total);
        let timed = v(TIMED).min(total);
        SiteStats {
            name: self.name.clone(),
            total,
            nowait: total - contended,
            contended,
            rejected: v(REJECTED),
            hold_total_ns: ns(estimate(v(HOLD), timed, total)),
            hold_max_ns: ns(self.hold_max.load(Ordering::Relaxed)),
            holds_timed: timed,
            wait_total_ns: ns(v(WAIT)),
            wait_max_ns: ns(self.wait_max.load(Ordering::Relaxed)),
            elapsed_ns: ns(since(self.since.load(Ordering::Relaxed), now)),
            cpus,
        }
    }
}

/// The total hold of `total` acquisitions from the sum of the `timed` ones: their mean times
/// `total` (exact when every hold was timed; 0 when none was).
pub(super) fn estimate(sum: u64, timed: u64, total: u64) -> u64 {
    if timed == 0 || timed >= total {
        sum
    } else {
        let e = u128::from(sum) * u128::from(total) / u128::from(timed);
        u64::try_from(e).unwrap_or(u64::MAX)
    }
}

/// A duration for the table: ns below a microsecond, then us, then ms.
fn us(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.1}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1}us", ns / 1e3)
    } else {
        format!("{ns:.0}ns")
    }
}

/// The lockmeter table of [`snapshot`]: one line per site, most contended first.
///
/// ```
/// let l = flowline::lockmeter::MeteredMutex::<_>::named("table-doc", ());
/// drop(l.lock());
/// let t = flowline::lockmeter::table();
/// assert!(t.lines().next().unwrap().contains("UTIL"));
/// assert!(t.contains("table-doc"));
/// ```
#[must_use]
pub fn table() -> String {
    format_table(&snapshot())
}

/// Formats `sites` in the lockmeter layout (as [`table`] does).
///
/// ```
/// let s = flowline::lockmeter::SiteStats { name: "x".into(), total: 1, nowait: 1, ..Default::default() };
/// assert!(flowline::lockmeter::format_table(&[s]).lines().nth(1).unwrap().ends_with("x"));
/// ```
#[must_use]
pub fn format_table(sites: &[SiteStats]) -> String {
    let mut t = String::from(
        " UTIL    CON      HOLD MEAN(   MAX)       WAIT MEAN(   MAX) (% CPU)      TOTAL NOWAIT   SPIN  RJECT  NAME\n",
    );
    for s in sites {
        // Nothing timed yet (few acquisitions, sampled): no hold figures, rather than 0.
        let untimed = s.total > 0 && s.holds_timed == 0;
        let hold = |ns: f64| if untimed { "-".to_string() } else { us(ns) };
        t.push_str(&format!(
            "{:4.1}% {:5.1}%  {:>9}({:>9})  {:>9}({:>9}) ({:5.2}%) {:>10} {:5.1}% {:5.1}% {:5.1}%  {}\n",
            100.0 * s.util(),
            100.0 * s.contention(),
            hold(s.hold_mean_ns()),
            hold(s.hold_max_ns as f64),
            us(s.wait_mean_ns()),
            us(s.wait_max_ns as f64),
            100.0 * s.cpu_waiting(),
            s.total,
            100.0 * s.nowait_rate(),
            100.0 * s.contention(),
            100.0 * s.reject_rate(),
            s.name,
        ));
    }
    t
}
