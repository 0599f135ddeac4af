//! The report's measuring harness: pinned threads, the placement probe, alternation of the
//! compared implementations, medians, and the output format: `name value unit` lines,
//! then `ratio_<scenario>_<a>_vs_<b> value x` lines.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

/// Where the two measuring threads run: producer / writer / distributor side, and the
/// consumer / reader / worker side.
pub const CPU_A: usize = 0;
pub const CPU_B: usize = 1;

/// The time-stamp counter (0 off x86_64).
#[inline]
pub fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// TSC ticks per nanosecond, measured once against `Instant` over 20 ms.
pub fn tsc_per_ns() -> f64 {
    static RATE: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *RATE.get_or_init(|| {
        let (t, c) = (std::time::Instant::now(), tsc());
        while t.elapsed() < std::time::Duration::from_millis(20) {}
        (tsc() - c) as f64 / t.elapsed().as_nanos() as f64
    })
}

/// The CPU list of `REPORT_CPUS=a,b,c,...` (empty entries skipped), or empty when it is not
/// set. Exits with a message on an entry that is not a CPU number.
pub fn cpu_map() -> &'static [usize] {
    static MAP: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    MAP.get_or_init(|| {
        let Ok(list) = std::env::var("REPORT_CPUS") else {
            return Vec::new();
        };
        list.split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(|c| {
                c.parse().unwrap_or_else(|_| {
                    eprintln!("REPORT_CPUS={list}: {c:?} is not a CPU number");
                    std::process::exit(2)
                })
            })
            .collect()
    })
}

/// Pins the calling thread to the report's CPU number `cpu`: CPU `cpu` itself, or with
/// `REPORT_CPUS=a,b,c,...` set, the `cpu`-th CPU of that list (so that a machine whose
/// CPUs 0 and 1 are hyper-thread siblings can put the pairs on separate cores), wrapping
/// around the list. Warns once on stderr if the OS refuses.
pub fn pin(cpu: usize) {
    let map = cpu_map();
    let cpu = if map.is_empty() {
        cpu
    } else {
        map[cpu % map.len()]
    };
    if let Err(e) = flowline::topology::pin_current_thread(cpu) {
        static WARNED: AtomicBool = AtomicBool::new(false);
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!("# warning: could not pin to CPU {cpu}: {e}; figures are unpinned");
        }
    }
}

/// Runs `a` on CPU_A and `b` on CPU_B, started together behind a barrier; returns both
/// results.
pub fn pair<RA: Send, RB: Send>(
    a: impl FnOnce() -> RA + Send,
    b: impl FnOnce() -> RB + Send,
) -> (RA, RB) {
    let start = Barrier::new(2);
    std::thread::scope(|s| {
        let ha = s.spawn(|| {
            pin(CPU_A);
            start.wait();
            a()
        });
        let hb = s.spawn(|| {
            pin(CPU_B);
            start.wait();
            b()
        });
        (ha.join().unwrap(), hb.join().unwrap())
    })
}

/// Runs `f` on CPU_A alone.
pub fn alone<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(CPU_A);
            f()
        })
        .join()
        .unwrap()
    })
}

/// CPU_A <-> CPU_B cache-line round trip in ns, over about 20 ms of ping-pong: the VM's
/// placement (about 100 ns near, 500 ns far) that every cross-core figure moves with.
pub fn probe_rtt_ns() -> f64 {
    let line = CachePadded::new(AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    let (rounds, elapsed) = pair(
        || {
            let t0 = Instant::now();
            let mut i = 0u64;
            while t0.elapsed() < Duration::from_millis(20) {
                line.store(2 * i + 1, Ordering::Release);
                while line.load(Ordering::Acquire) != 2 * i + 2 {
                    std::hint::spin_loop();
                }
                i += 1;
            }
            stop.store(true, Ordering::Release);
            line.store(u64::MAX, Ordering::Release);
            (i, t0.elapsed())
        },
        || {
            let mut i = 0u64;
            loop {
                let v = line.load(Ordering::Acquire);
                if v == u64::MAX || stop.load(Ordering::Relaxed) {
                    break;
                }
                if v == 2 * i + 1 {
                    line.store(2 * i + 2, Ordering::Release);
                    i += 1;
                }
                std::hint::spin_loop();
            }
        },
    )
    .0;
    elapsed.as_nanos() as f64 / rounds.max(1) as f64
}

/// The repetition of the scenario now running (0-based). Scenarios that vary their memory
/// layout from one repetition to the next read it (`spsc::layout`); every implementation
/// of a repetition sees the same value.
static REPETITION: AtomicUsize = AtomicUsize::new(0);

/// See [`REPETITION`].
pub fn repetition() -> usize {
    // Relaxed: written by the main thread before it starts a repetition's threads (the
    // spawn orders it), read by the main thread or the threads it spawns.
    REPETITION.load(Ordering::Relaxed)
}

/// One figure an implementation produces per repetition.
#[derive(Clone, Copy)]
pub struct Metric {
    /// Appended to the scenario name (`""` for the headline figure).
    pub suffix: &'static str,
    pub unit: &'static str,
    pub higher_is_better: bool,
}

/// One implementation of a scenario: its name and a closure that runs one repetition and
/// returns one value per metric.
pub type Impl<'a> = (&'static str, Box<dyn FnMut() -> Vec<f64> + 'a>);

/// Scenarios whose figures move with the rings' memory layout (each repetition runs in
/// the next of [`crate::spsc::LAYOUTS`]): their rows also give the fresh-ring and the best
/// layout's figure. (`REPORT_LAYOUT` fixes one layout for every repetition.)
const LAYOUT_BOUND: &[&str] = &["spsc_r1024_burst8", "spsc_r1024_burst32"];

/// The instruction benchmark (`bench/benches/instructions.rs`) of the same code shape as a
/// scenario's implementation, by (scenario, implementation).
const SAME_SHAPE: &[(&str, &str, &str)] = &[
    ("spsc_r1024_burst1", "flowline_stack", "spsc_single"),
    ("spsc_r1024_burst1", "rtrb_stack", "rtrb_single"),
    ("spsc_r1024_burst1", "flowline_niche_stack", "niche_single"),
    ("spsc_r1024_burst1", "crossbeam", "crossbeam_single"),
    ("spsc_r1024_burst8", "flowline", "spsc_burst8"),
    ("spsc_r1024_burst8", "flowline_niche", "niche_burst8"),
    ("spsc_r1024_burst32", "flowline", "spsc_burst32"),
    ("spsc_r1024_burst32", "rtrb", "rtrb_burst32"),
    ("spsc_r1024_burst32", "flowline_niche", "niche_burst32"),
    ("mpsc_r1024_burst1", "flowline", "mpsc_single"),
    ("mpsc_r1024_burst8", "flowline", "mpsc_burst8"),
    ("mpsc_r1024_burst32", "flowline", "mpsc_burst32"),
    ("wait_spsc_burst1", "flowline", "spsc_single"),
    (
        "wait_spsc_burst1",
        "flowline_waitable",
        "spsc_waitable_single",
    ),
    (
        "wait_spsc_burst1",
        "flowline_wait",
        "spsc_waitable_single_wait",
    ),
    ("wait_spsc_burst32", "flowline", "spsc_burst32"),
    (
        "wait_spsc_burst32",
        "flowline_waitable",
        "spsc_waitable_burst32",
    ),
    (
        "wait_spsc_burst32",
        "flowline_wait",
        "spsc_waitable_burst32_wait",
    ),
    (
        "counter_2writers_inc",
        "flowline_handle",
        "counter_handle_add",
    ),
    ("counter_2writers_inc", "flowline_add", "counter_shared_add"),
    (
        "cell_1thread_unchanged",
        "flowline",
        "cell_assign_unchanged",
    ),
    ("pipe_a_1worker", "flowline_pipe", "pipe_a_1worker"),
    ("pipe_a_1worker", "flowline", "dist_1worker_in_order"),
    ("pipe_ap_1worker", "flowline_pipe", "pipe_ap_1worker"),
    ("pipe_oa_1worker", "flowline_pipe", "pipe_oa_1worker"),
    ("pipe_oap_1worker", "flowline_pipe", "pipe_oap_1worker"),
];

/// Operations per instruction benchmark (its `N`).
const INSTRUCTION_OPS: f64 = 4096.0;

/// The committed instruction counts (`bench/instructions-baseline.txt`, which the CI gate
/// keeps within 3% of the code), by benchmark; empty if the file cannot be read.
fn instruction_counts() -> Vec<(String, f64)> {
    crate::lines::read_counts(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/instructions-baseline.txt"
    ))
}

pub struct Report {
    instructions: Vec<(String, f64)>,
    filters: Vec<String>,
    pub reps: usize,
    pub quick: bool,
    rows: Vec<(String, f64, &'static str)>,
    /// Every scenario's results, for the Markdown page.
    pub results: Vec<crate::markdown::ScenarioResult>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl Report {
    pub fn new(filters: Vec<String>, reps: usize, quick: bool) -> Report {
        Report {
            instructions: instruction_counts(),
            filters,
            reps,
            quick,
            rows: Vec::new(),
            results: Vec::new(),
        }
    }

    pub fn wants(&self, scenario: &str) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|f| scenario.contains(f.as_str()))
    }

    /// The committed instruction count of benchmark `bench`, per operation.
    pub fn instructions_per_op(&self, bench: &str) -> Option<f64> {
        self.instructions
            .iter()
            .find(|(n, _)| n == bench)
            .map(|(_, count)| count / INSTRUCTION_OPS)
    }

    /// Records counted figures (no timing, no placement): `(name, value, unit)` lines,
    /// and a row of the Markdown page under `scenario`.
    pub fn counted(&mut self, scenario: &str, figures: Vec<(String, f64, &'static str)>) {
        let mut result = crate::markdown::ScenarioResult {
            name: scenario.to_string(),
            probe: (f64::NAN, f64::NAN),
            figures: Vec::new(),
            ratios: Vec::new(),
        };
        for (name, value, unit) in figures {
            self.emit(name.clone(), value, unit);
            result.figures.push((name, String::new(), value, unit));
        }
        self.results.push(result);
    }

    fn emit(&mut self, name: String, value: f64, unit: &'static str) {
        println!("{name} {value:.4} {unit}");
        self.rows.push((name, value, unit));
    }

    /// Runs `impls` alternately `reps` times each, in the listed order in even repetitions
    /// and in reverse in odd ones (A B C, C B A, ...), so that no implementation always
    /// runs first or right after the same one; prints the median of every
    /// metric, then the ratio of the headline metric (metrics[0]) for each pair in
    /// `ratios`, oriented so that above 1 means the first impl wins. Prints the placement
    /// probe before and after.
    /// The headline figure of `samples` (one per repetition, repetition `k` in layout
    /// `k` of [`crate::spsc::LAYOUTS`]) at the fresh-ring layout (the first repetition)
    /// and at the best layout run, beside the median.
    fn layout_figures(
        &mut self,
        result: &mut crate::markdown::ScenarioResult,
        impl_name: &str,
        samples: &[f64],
        metric: &Metric,
    ) {
        // One layout for every repetition: no layout to compare with.
        if std::env::var_os("REPORT_LAYOUT").is_some() {
            return;
        }
        let Some(&fresh) = samples.first() else {
            return;
        };
        let best = samples.iter().copied().fold(fresh, |b, v| {
            if metric.higher_is_better == (v > b) {
                v
            } else {
                b
            }
        });
        let layouts = samples.len().min(crate::spsc::LAYOUTS.len());
        for (label, v) in [
            (" (fresh ring)".to_string(), fresh),
            (format!(" (best of {layouts} layouts)"), best),
        ] {
            result
                .figures
                .push((impl_name.to_string(), label, v, metric.unit));
        }
    }

    pub fn scenario(
        &mut self,
        name: &str,
        metrics: &[Metric],
        mut impls: Vec<Impl<'_>>,
        ratios: &[(&'static str, &'static str)],
    ) {
        if !self.wants(name) {
            return;
        }
        let before = probe_rtt_ns();
        self.emit("probe_rtt_ns".into(), before, "ns");
        let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); metrics.len()]; impls.len()];
        for rep in 0..self.reps {
            // Relaxed: see `repetition`.
            REPETITION.store(rep, Ordering::Relaxed);
            let mut order: Vec<usize> = (0..impls.len()).collect();
            if rep % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let values = (impls[i].1)();
                assert_eq!(values.len(), metrics.len());
                for (m, v) in values.into_iter().enumerate() {
                    samples[i][m].push(v);
                }
            }
        }
        let after = probe_rtt_ns();
        let mut result = crate::markdown::ScenarioResult {
            name: name.to_string(),
            probe: (before, after),
            figures: Vec::new(),
            ratios: Vec::new(),
        };
        let mut medians = Vec::new();
        for (i, (impl_name, _)) in impls.iter().enumerate() {
            let mut per_metric = Vec::new();
            for (m, metric) in metrics.iter().enumerate() {
                let v = median(&mut samples[i][m].clone());
                per_metric.push(v);
                result.figures.push((
                    impl_name.to_string(),
                    metric.suffix.to_string(),
                    v,
                    metric.unit,
                ));
                self.emit(
                    format!("{impl_name}_{name}{}", metric.suffix),
                    v,
                    metric.unit,
                );
            }
            if LAYOUT_BOUND.contains(&name) {
                self.layout_figures(&mut result, impl_name, &samples[i][0], &metrics[0]);
            }
            medians.push((*impl_name, per_metric));
            // The counted instructions of the same code shape, per item: a difference a
            // placement cannot explain.
            let bench = SAME_SHAPE
                .iter()
                .find(|(sc, imp, _)| *sc == name && imp == impl_name)
                .and_then(|(_, _, b)| self.instructions.iter().find(|(n, _)| n == b))
                .cloned();
            if let Some((bench, count)) = bench {
                let per_item = count / INSTRUCTION_OPS;
                self.emit(format!("instr_{name}_{impl_name}"), per_item, "instr/item");
                result.figures.push((
                    impl_name.to_string(),
                    format!(" (counted, `{bench}`)"),
                    per_item,
                    "instr/item",
                ));
            }
        }
        for &(a, b) in ratios {
            let va = medians.iter().find(|(n, _)| *n == a).expect("ratio impl").1[0];
            let vb = medians.iter().find(|(n, _)| *n == b).expect("ratio impl").1[0];
            let r = if metrics[0].higher_is_better {
                va / vb
            } else {
                vb / va
            };
            self.emit(format!("ratio_{name}_{a}_vs_{b}"), r, "x");
            // The same ratio taken within each repetition (A and B ran back to back, so
            // mostly in one placement), then the median: steadier when the placement
            // moves between repetitions.
            let ia = impls.iter().position(|(n, _)| *n == a).expect("ratio impl");
            let ib = impls.iter().position(|(n, _)| *n == b).expect("ratio impl");
            let mut paired: Vec<f64> = samples[ia][0]
                .iter()
                .zip(&samples[ib][0])
                .map(|(&x, &y)| {
                    if metrics[0].higher_is_better {
                        x / y
                    } else {
                        y / x
                    }
                })
                .collect();
            let p = median(&mut paired);
            self.emit(format!("pratio_{name}_{a}_vs_{b}"), p, "x");
            result.ratios.push((a.to_string(), b.to_string(), r, p));
        }
        self.results.push(result);
        self.emit("probe_rtt_ns".into(), after, "ns");
        if before.max(after) > 1.5 * before.min(after) {
            eprintln!(
                "# warning: {name}: placement moved during the scenario \
                 (probe {before:.0} ns -> {after:.0} ns); its ratios mix placements"
            );
        }
    }

    /// The human-readable table, after all machine lines.
    pub fn print_table(&self) {
        println!();
        println!("| figure | value | unit |");
        println!("| --- | ---: | --- |");
        for (name, value, unit) in &self.rows {
            println!("| {name} | {value:.3} | {unit} |");
        }
    }
}
