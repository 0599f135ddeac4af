//! The pipeline demo's `--stages` form: one pipeline distributor
//! (`distributor::new_pipeline`) whose workers take packets of every stage, do a stage's
//! work, and forward them to the next stage or complete them at the last.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowline::distributor::{self, Config, StageType, Worker};
use flowline::topology;
use flowline::wait::WaitError;

use super::{zipf_cdf, Opts, Packet, Rng};

/// Parses `--stages`: stage types by letter or word, comma-separated or not
/// (`oap`, `o,a,p`, `ordered,atomic,parallel`).
pub(crate) fn parse_stages(s: &str) -> Result<Vec<StageType>, String> {
    let mut v = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part {
            "atomic" => v.push(StageType::Atomic),
            "ordered" => v.push(StageType::Ordered),
            "parallel" => v.push(StageType::Parallel),
            letters => {
                for c in letters.chars() {
                    v.push(match c {
                        'a' => StageType::Atomic,
                        'o' => StageType::Ordered,
                        'p' => StageType::Parallel,
                        _ => {
                            return Err(format!(
                            "--stages: unknown stage type {part:?}; use atomic (a), ordered (o) or parallel (p)"
                        ))
                        }
                    });
                }
            }
        }
    }
    if v.is_empty() || v.len() > distributor::MAX_STAGES {
        return Err(format!("--stages: 1 to {} stages", distributor::MAX_STAGES));
    }
    Ok(v)
}

/// What the workers check: per (stage, flow) of the atomic stages before the first
/// parallel one, the next position the flow may show (a flow keeps its input order
/// through them: atomic stages keep it, ordered ones restore it); the violations.
struct Checks {
    flows: u32,
    /// The stages before the first parallel one.
    ordered_stages: usize,
    /// Which stages are atomic (an ordered stage's workers see a flow in any order).
    atomic: Vec<bool>,
    next: Vec<AtomicU32>,
    violations: AtomicU64,
}

impl Checks {
    fn saw(&self, p: &Packet) {
        let stage = usize::from(p.stage);
        if stage < self.ordered_stages && self.atomic[stage] {
            let e = &self.next[stage * self.flows as usize + p.flow as usize];
            // Relaxed: the distributor's hand-off orders two workers' turns on one flow.
            if e.swap(p.seq + 1, Ordering::Relaxed) > p.seq {
                self.violations.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A worker of every stage: spin `work` per packet, drop a fraction, move the others on
/// to the next stage (the stage advanced in place) or complete them at the last; the
/// burst goes back in the order received (a drop sends back what came before it first).
fn worker(mut w: Worker<Packet>, o: &Opts, last: u8, checks: &Checks, cpu: usize) {
    let _ = topology::pin_current_thread(cpu);
    let drop_cut = (o.drop * u64::MAX as f64) as u64;
    let mut rng = Rng(0x9e37_79b9 ^ (w.id() as u64 + 1));
    let (mut burst, mut back) = (Vec::new(), Vec::new());
    while w.recv_burst_wait(&mut burst, 64, Duration::MAX).is_ok() {
        for mut p in burst.drain(..) {
            checks.saw(&p);
            for i in 0..o.work {
                std::hint::black_box(i);
            }
            if rng.next() < drop_cut {
                w.done_burst(&mut back).unwrap();
                w.drop_packet(p).unwrap();
                continue;
            }
            if p.stage < last {
                p.stage += 1;
            }
            back.push(p);
        }
        w.done_burst(&mut back).unwrap();
    }
}

/// `--stages`: see the module docs. The checks: at the atomic stages before the first
/// parallel one every flow keeps its order (workers check), with no parallel stage every
/// flow leaves in order, every packet comes back exactly once (returned or dropped), and
/// every returned packet passed every stage.
pub(crate) fn run(o: &Opts, stages: &[StageType]) -> ExitCode {
    let config = Config::default().workers(o.workers).credit(o.credit);
    let route = |p: &Packet| (usize::from(p.stage), u64::from(p.flow));
    let (mut dist, workers) = match distributor::new_pipeline(config, stages, route) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let cpus = topology::available_cpus();
    if let Err(e) = topology::pin_current_thread(0) {
        eprintln!("note: not pinned ({e})");
    }
    let names: Vec<&str> = stages
        .iter()
        .map(|s| match s {
            StageType::Atomic => "atomic",
            StageType::Ordered => "ordered",
            _ => "parallel",
        })
        .collect();
    println!(
        "pipeline: stages [{}], {} worker{}, {} flows (zipf {}), drop {}, {} s; {} CPUs",
        names.join(", "),
        o.workers,
        if o.workers == 1 { "" } else { "s" },
        o.flows,
        o.zipf,
        o.drop,
        o.seconds,
        cpus
    );
    let ordered_stages = stages
        .iter()
        .position(|s| *s == StageType::Parallel)
        .unwrap_or(stages.len());
    let checks = Arc::new(Checks {
        flows: o.flows,
        ordered_stages,
        atomic: stages.iter().map(|s| *s == StageType::Atomic).collect(),
        next: (0..ordered_stages * o.flows as usize)
            .map(|_| AtomicU32::new(0))
            .collect(),
        violations: AtomicU64::new(0),
    });
    let last = (stages.len() - 1) as u8;
    let threads: Vec<_> = workers
        .into_iter()
        .map(|w| {
            let (o2, c, cpu) = (
                o.clone(),
                Arc::clone(&checks),
                1 + w.id() % cpus.max(2).saturating_sub(1),
            );
            std::thread::spawn(move || worker(w, &o2, last, &c, cpu))
        })
        .collect();
    let (tally, flushed) = drive(o, &mut dist, last, ordered_stages == stages.len());
    let s = dist.stats().snapshot();
    let dropped = s.get("dropped").unwrap_or(0);
    drop(dist);
    for t in threads {
        t.join().unwrap();
    }
    tally.report(dropped, flushed, checks.violations.load(Ordering::Relaxed))
}

/// What the distributor's thread counted.
#[derive(Default)]
struct Tally {
    sent: u64,
    returned: u64,
    sum_in: u64,
    sum_out: u64,
    /// Returned packets that did not reach the last stage, or left a flow's order.
    bad: u64,
    elapsed: f64,
}

impl Tally {
    fn report(&self, dropped: u64, flushed: bool, worker_violations: u64) -> ExitCode {
        let exactly_once =
            self.returned + dropped == self.sent && (dropped > 0 || self.sum_in == self.sum_out);
        println!(
            "summary: {} packets in {:.1} s ({:.2} Mpps); returned {}, dropped {dropped}; flush {}",
            self.sent,
            self.elapsed,
            self.sent as f64 / self.elapsed / 1e6,
            self.returned,
            if flushed { "ok" } else { "FAILED" },
        );
        let fine = self.bad == 0 && worker_violations == 0;
        println!(
            "order check: {}; exactly once: {}",
            if fine {
                "every stage's promise kept".to_string()
            } else {
                format!(
                    "{} at the output, {worker_violations} at the workers: VIOLATIONS",
                    self.bad
                )
            },
            if exactly_once { "yes" } else { "NO" }
        );
        if fine && exactly_once && flushed {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

/// Generates for `--seconds`, distributes, collects and checks what comes out (every
/// flow's order too if `in_order`), printing a line per second with each stage's share
/// of the packets routed; then flushes.
fn drive<R>(
    o: &Opts,
    dist: &mut distributor::Distributor<Packet, distributor::Pipeline<Packet, R>>,
    last: u8,
    in_order: bool,
) -> (Tally, bool)
where
    R: FnMut(&Packet) -> (usize, u64),
{
    let cdf = zipf_cdf(o.flows, o.zipf);
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut next_seq = vec![0u32; o.flows as usize];
    let mut expect = vec![0u32; o.flows as usize];
    let mut t = Tally::default();
    let (mut input, mut out) = (Vec::new(), Vec::new());
    let start = Instant::now();
    let (mut last_tick, mut last_returned) = (start, 0u64);
    let mut last_entries = dist.stage_entries();
    let tick = Duration::from_millis(100);
    let mut generating = true;
    loop {
        while generating && input.len() < o.burst {
            let f = cdf
                .partition_point(|&c| c < rng.unit())
                .min(o.flows as usize - 1);
            let p = Packet {
                flow: f as u32,
                seq: next_seq[f],
                id: t.sent,
                stage: 0,
            };
            next_seq[f] += 1;
            t.sum_in = t.sum_in.wrapping_add(p.id);
            t.sent += 1;
            input.push(p);
        }
        if let Err(WaitError::Disconnected) = dist.distribute_wait(&mut input, tick) {
            eprintln!("all workers left");
            break;
        }
        if generating {
            dist.collect(&mut out);
        } else {
            let _ = dist.collect_wait(&mut out, tick);
        }
        for p in out.drain(..) {
            let e = &mut expect[p.flow as usize];
            if p.stage != last || (in_order && p.seq < *e) {
                t.bad += 1;
            }
            *e = p.seq + 1;
            t.sum_out = t.sum_out.wrapping_add(p.id);
            t.returned += 1;
        }
        let now = Instant::now();
        if now - last_tick >= Duration::from_secs(1) {
            let entries = dist.stage_entries();
            let moved: Vec<String> = entries
                .iter()
                .zip(&last_entries)
                .map(|(a, b)| {
                    format!(
                        "{:.2}",
                        (a - b) as f64 / (now - last_tick).as_secs_f64() / 1e6
                    )
                })
                .collect();
            println!(
                "{:5.1}s  {:7.2} Mpps out  entering each stage [{}] Mpps  in flight {:5}",
                (now - start).as_secs_f64(),
                (t.returned - last_returned) as f64 / (now - last_tick).as_secs_f64() / 1e6,
                moved.join(" "),
                dist.in_flight(),
            );
            (last_tick, last_returned, last_entries) = (now, t.returned, entries);
        }
        if generating && now - start >= Duration::from_secs_f64(o.seconds) {
            generating = false;
        }
        if !generating && input.is_empty() && dist.in_flight() == 0 {
            break;
        }
    }
    let mut rest = Vec::new();
    let flushed = dist.flush(&mut rest, Duration::from_secs(10)).is_ok();
    for p in rest {
        t.sum_out = t.sum_out.wrapping_add(p.id);
        t.returned += 1;
    }
    t.elapsed = start.elapsed().as_secs_f64();
    (t, flushed)
}
