//! The report as a Markdown page (`--markdown FILE`, which BENCHMARKS.md is made with): a
//! header naming the machine, the toolchain, the commit, the date and the command, then one
//! table per scenario family with each scenario's medians, its same-run ratios, the
//! placement probe around it and its target, and the DPDK anchors when a file of them is
//! given (`--anchors FILE`).

use std::fmt::Write as _;
use std::process::Command;

/// What one scenario produced.
pub struct ScenarioResult {
    pub name: String,
    /// The CPU0-CPU1 round trip before and after the scenario, ns.
    pub probe: (f64, f64),
    /// (implementation, figure suffix, median, unit).
    pub figures: Vec<(String, String, f64, &'static str)>,
    /// (a, b, ratio of the medians, median of the per-repetition ratios): above 1 means
    /// `a` wins.
    pub ratios: Vec<(String, String, f64, f64)>,
}

/// The targets the project holds its figures to, by scenario and compared pair: the
/// paired ratio must reach the bound.
const TARGETS: &[(&str, &str, &str, f64)] = &[
    ("spsc_r1024_burst1", "flowline_stack", "rtrb_stack", 1.0),
    ("spsc_r1024_burst1", "flowline_boxed", "rtrb_boxed", 1.0),
    ("spsc_r1024_burst1", "flowline_called", "rtrb_called", 1.0),
    ("spsc_r1024_burst8", "flowline", "rtrb", 1.3),
    ("spsc_r1024_burst32", "flowline", "rtrb", 1.2),
    ("spsc_r1024_burst32", "flowline", "raw", 0.6),
    ("spsc_pingpong", "flowline", "rtrb", 0.9),
    ("counter_2writers_inc", "flowline_handle", "atomic", 10.0),
    // Never slower than the plain store it replaces where the writers' loops wait for the
    // line (they read it). The write-only loop has no target: its plain stores cost it no
    // more on a shared line than on private ones (`cell_2writers_private`), so it measures
    // the check's own loads and branches (performance notes, section 13).
    ("cell_2writers_unchanged_reading", "flowline", "store", 1.0),
    (
        "dist_any_order_1worker",
        "flowline_any_order",
        "flowline",
        0.6,
    ),
    ("spsc_paced40ns_latency", "flowline", "rtrb", 1.0),
    ("spsc_paced100ns_latency", "flowline", "rtrb", 1.0),
    ("wait_spsc_burst1", "flowline_waitable", "flowline", 0.95),
    ("wait_spsc_burst32", "flowline_wait", "flowline", 0.97),
    ("wait_spsc_burst32", "flowline_waitable", "flowline", 0.97),
    ("wait_async_pingpong_current", "flowline", "tokio", 1.5),
    ("wait_async_pingpong_multi", "flowline", "tokio", 1.0),
    ("bytes_64k", "flowline", "unix", 2.0),
    ("bytes_64k", "flowline", "tokio_duplex", 2.0),
];

/// Same-host comparisons with the DPDK anchors (measured right before the report, so in
/// another moment's placement): scenario, implementation, anchor figure, and the bound
/// its ratio is held to, if any.
const ANCHOR_RATIOS: &[(&str, &str, &str, Option<f64>)] = &[
    (
        "dist_1worker",
        "flowline",
        "rte_distributor_burst_1worker_pps",
        None,
    ),
    (
        "dist_1worker",
        "flowline",
        "evdev_dsw_atomic_1worker_pps",
        None,
    ),
    (
        "dist_1worker",
        "flowline",
        "evdev_sw_atomic_1worker_pps",
        None,
    ),
    (
        "dist_ordered_1worker",
        "flowline_ordered",
        "evdev_sw_ordered_1worker_pps",
        None,
    ),
    (
        "pipe_a_1worker",
        "flowline_pipe",
        "evdev_sw_pipe_a_1worker_pps",
        Some(3.0),
    ),
    (
        "pipe_a_1worker",
        "flowline_pipe",
        "evdev_dsw_pipe_a_1worker_pps",
        Some(1.5),
    ),
    (
        "pipe_ap_1worker",
        "flowline_pipe",
        "evdev_sw_pipe_ap_1worker_pps",
        Some(3.0),
    ),
    (
        "pipe_ap_1worker",
        "flowline_pipe",
        "evdev_dsw_pipe_ap_1worker_pps",
        Some(1.5),
    ),
    (
        "pipe_oa_1worker",
        "flowline_pipe",
        "evdev_sw_pipe_oa_1worker_pps",
        Some(3.0),
    ),
    (
        "pipe_oap_1worker",
        "flowline_pipe",
        "evdev_sw_pipe_oap_1worker_pps",
        Some(3.0),
    ),
];

/// A scenario's ratios against the anchors it is compared with (`a vs anchor: Nx`), and
/// the targets among them.
fn anchor_ratios(
    r: &ScenarioResult,
    anchors: &[(String, f64, String)],
) -> (Vec<String>, Vec<String>) {
    let (mut ratios, mut targets) = (Vec::new(), Vec::new());
    for &(_, imp, anchor, bound) in ANCHOR_RATIOS.iter().filter(|a| a.0 == r.name) {
        let ours = r
            .figures
            .iter()
            .find(|(i, suffix, _, unit)| i == imp && suffix.is_empty() && *unit == "Mpkts/s");
        let theirs = anchors
            .iter()
            .find(|(n, _, unit)| n == anchor && unit == "Mpkts/s");
        let (Some(&(_, _, a, _)), Some(&(_, b, _))) = (ours, theirs) else {
            continue;
        };
        if b <= 0.0 {
            continue;
        }
        let x = a / b;
        ratios.push(format!("{imp} vs `{anchor}` (anchor): {x:.2}x"));
        if let Some(bound) = bound {
            let met = if x >= bound { "met" } else { "**not met**" };
            targets.push(format!("{imp} vs `{anchor}` >= {bound}x: {met}"));
        }
    }
    (ratios, targets)
}

fn target(scenario: &str, a: &str, b: &str) -> Option<f64> {
    TARGETS
        .iter()
        .find(|t| t.0 == scenario && t.1 == a && t.2 == b)
        .map(|t| t.3)
}

/// The family a scenario belongs to: the part of its name before the first `_`.
fn family(name: &str) -> &str {
    name.split('_').next().unwrap_or(name)
}

fn family_title(f: &str) -> &str {
    match f {
        "cell" => "Assign-unless-equal cells",
        "spsc" => "SPSC rings",
        "mpsc" => "MPSC rings",
        "counter" => "Sharded counters",
        "dist" => "The distributor",
        "pipe" => "Pipelines: stages in one distributor",
        "bytes" => "Byte streams",
        "lock" => "Locks and the lock meter",
        "wait" => "Waiting: blocking and async forms",
        "scale" => "Scaling with threads",
        other => other,
    }
}

/// First line of a command's output, or `unknown`.
fn command_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Today's date (UTC) as `YYYY-MM-DD`, from the system clock (days to civil date, after
/// Howard Hinnant's algorithm).
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The commit the report was built from, with `-dirty` when tracked files other than the
/// report's own input and output (`inputs`: the anchors and the page, as given on the
/// command line, relative to the repository root) had changes.
fn commit(inputs: &[&str]) -> String {
    let hash = command_line("git", &["rev-parse", "--short=12", "HEAD"]);
    let status = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output();
    let dirty = match status {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| !inputs.contains(&l.get(3..).unwrap_or("").trim())),
        _ => return format!("{hash} (tree state unknown)"),
    };
    if dirty {
        format!("{hash}-dirty")
    } else {
        hash
    }
}

fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// An anchors file: where its figures came from, and the figures (name, value, unit).
type Anchors = (Vec<String>, Vec<(String, f64, String)>);

/// Reads `name value unit` lines (and `# source: ...` lines naming where they came from)
/// from an anchors file.
fn read_anchors(path: &str) -> Result<Anchors, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut sources = Vec::new();
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(s) = line.strip_prefix("# source:") {
            sources.push(s.trim().to_string());
        } else if line.is_empty() || line.starts_with('#') {
            continue;
        } else {
            let mut parts = line.split_whitespace();
            let (Some(name), Some(value), unit) = (parts.next(), parts.next(), parts.next()) else {
                return Err(format!("{path}:{}: expected `name value unit`", n + 1));
            };
            let value: f64 = value
                .parse()
                .map_err(|_| format!("{path}:{}: `{value}` is not a number", n + 1))?;
            rows.push((name.to_string(), value, unit.unwrap_or("").to_string()));
        }
    }
    Ok((sources, rows))
}

/// The whole page.
pub fn render(
    results: &[ScenarioResult],
    reps: usize,
    quick: bool,
    anchors: Option<&str>,
    page: &str,
) -> Result<String, String> {
    let mut out = String::new();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Generated by the benchmark report (`bench/examples/report`); do not edit by hand. \
         Medians of {reps} repetitions per scenario, the compared implementations \
         alternating in each. A ratio above 1 means the first implementation wins: \
         `ratio` compares the medians, `paired` is the median of the ratios within each \
         repetition (steadier when the placement moves). `probe` is the CPU0-CPU1 round \
         trip before and after the scenario: cross-core figures move with it.\n"
    );
    if quick {
        let _ = writeln!(
            out,
            "**A `--quick` smoke run: every loop is tiny and these figures mean nothing.**\n"
        );
    }
    let _ = writeln!(out, "| | |\n| --- | --- |");
    let _ = writeln!(out, "| CPU | {} |", cpu_model());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let _ = writeln!(out, "| CPUs available | {cores} |");
    let _ = writeln!(out, "| kernel | {} |", command_line("uname", &["-sr"]));
    let _ = writeln!(out, "| rustc | {} |", command_line("rustc", &["--version"]));
    let inputs: Vec<&str> = anchors.into_iter().chain([page]).collect();
    let _ = writeln!(out, "| commit | {} |", commit(&inputs));
    let _ = writeln!(out, "| date | {} |", today());
    let _ = writeln!(
        out,
        "| command | `cargo run --release -p flowline-bench --example report -- {}` |",
        args.join(" ")
    );
    let _ = writeln!(out);
    let anchor_rows = match anchors {
        Some(path) => read_anchors(path)?.1,
        None => Vec::new(),
    };
    let mut families: Vec<&str> = Vec::new();
    for r in results {
        let f = family(&r.name);
        if !families.contains(&f) {
            families.push(f);
        }
    }
    for f in families {
        let _ = writeln!(out, "## {}\n", family_title(f));
        let _ = writeln!(
            out,
            "| scenario | medians | ratio (paired) | target | probe, ns |\n| --- | --- | --- | --- | --- |"
        );
        for r in results.iter().filter(|r| family(&r.name) == f) {
            let figures: Vec<String> = r
                .figures
                .iter()
                .map(|(imp, suffix, v, unit)| format!("{imp}{suffix}: {} {unit}", fmt_value(*v)))
                .collect();
            let (beside, anchor_targets) = anchor_ratios(r, &anchor_rows);
            let mut ratios: Vec<String> = r
                .ratios
                .iter()
                .map(|(a, b, x, p)| format!("{a} vs {b}: {x:.2}x ({p:.2}x)"))
                .collect();
            ratios.extend(beside);
            let mut targets: Vec<String> = r
                .ratios
                .iter()
                .filter_map(|(a, b, _, p)| {
                    target(&r.name, a, b).map(|bound| {
                        let met = if *p >= bound { "met" } else { "**not met**" };
                        format!("{a} vs {b} >= {bound}x: {met}")
                    })
                })
                .collect();
            targets.extend(anchor_targets);
            let probe = if r.probe.0.is_nan() {
                "- (counted)".to_string()
            } else {
                format!("{:.0} / {:.0}", r.probe.0, r.probe.1)
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                r.name,
                figures.join("<br>"),
                if ratios.is_empty() {
                    "-".into()
                } else {
                    ratios.join("<br>")
                },
                if targets.is_empty() {
                    "-".into()
                } else {
                    targets.join("<br>")
                },
                probe
            );
        }
        let _ = writeln!(out);
    }
    if let Some(path) = anchors {
        let (sources, rows) = read_anchors(path)?;
        let _ = writeln!(out, "## Anchors\n");
        let _ = writeln!(
            out,
            "Figures measured outside this report, read from `{path}`{}.\n",
            if sources.is_empty() {
                String::new()
            } else {
                format!(" (source: {})", sources.join("; "))
            }
        );
        let _ = writeln!(out, "| figure | value | unit |\n| --- | ---: | --- |");
        for (name, value, unit) in rows {
            let _ = writeln!(out, "| `{name}` | {} | {unit} |", fmt_value(value));
        }
        let _ = writeln!(out);
    }
    Ok(out)
}
