//! The demo: generator -> distributor -> workers -> returns, with live statistics.
//!
//! ```text
//! cargo run --release --example pipeline -- [--seconds 10] [--flows 1024] [--zipf 1.0]
//!     [--workers N] [--resched 0.01] [--drop 0.001] [--work 40] [--burst 32] [--credit 256]
//! ```
//!
//! A generator makes packets of many flows (Zipf-skewed), the distributor (this thread,
//! pinned to CPU 0) routes them to the workers (pinned to CPUs 1..), which spin a little per
//! packet, re-tag a fraction into a second-stage flow (the reschedule path), drop a
//! fraction, and return the rest. On the way out the distributor's thread checks that every
//! flow's packets come back in order and that every packet comes back exactly once
//! (returned or dropped). A line per second shows Mpps, each worker's share, packets in
//! flight, reschedules and drops; the summary says whether the checks held.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use flowline::distributor::{self, Config};
use flowline::topology;
use flowline::wait::WaitError;

#[derive(Clone, Copy, Debug)]
struct Packet {
    /// Current flow tag. Second-stage flows are `flows + original`.
    flow: u32,
    /// Position in its original flow.
    seq: u32,
    /// Unique id, for the exactly-once check.
    id: u64,
}

struct Opts {
    seconds: f64,
    flows: u32,
    zipf: f64,
    workers: usize,
    resched: f64,
    drop: f64,
    work: u32,
    burst: usize,
    credit: usize,
}

const HELP: &str = "\
pipeline: generator -> flowline distributor -> workers -> returns, with live stats

options:
  --seconds S   run time (default 10)
  --flows N     number of flows (default 1024)
  --zipf S      Zipf exponent of flow popularity, 0 = uniform (default 1.0)
  --workers N   worker threads (default: CPUs - 1, at least 1)
  --resched F   fraction of packets a worker re-tags into a second-stage flow (default 0.01)
  --drop F      fraction of packets a worker drops (default 0.001)
  --work N      spin iterations of work per packet (default 40)
  --burst N     distributor burst size (default 32)
  --credit N    packets a worker may hold (default 256)
  -h, --help    this text";

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        seconds: 10.0,
        flows: 1024,
        zipf: 1.0,
        workers: topology::available_cpus().saturating_sub(1).max(1),
        resched: 0.01,
        drop: 0.001,
        work: 40,
        burst: 32,
        credit: 256,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-h" || a == "--help" {
            println!("{HELP}");
            std::process::exit(0);
        }
        let v = args
            .next()
            .ok_or_else(|| format!("{a} needs a value; see --help"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{a} {v}: {e}");
        match a.as_str() {
            "--seconds" => o.seconds = v.parse().map_err(|e| bad(&e))?,
            "--flows" => o.flows = v.parse().map_err(|e| bad(&e))?,
            "--zipf" => o.zipf = v.parse().map_err(|e| bad(&e))?,
            "--workers" => o.workers = v.parse().map_err(|e| bad(&e))?,
            "--resched" => o.resched = v.parse().map_err(|e| bad(&e))?,
            "--drop" => o.drop = v.parse().map_err(|e| bad(&e))?,
            "--work" => o.work = v.parse().map_err(|e| bad(&e))?,
            "--burst" => o.burst = v.parse().map_err(|e| bad(&e))?,
            "--credit" => o.credit = v.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown option {a}; see --help")),
        }
    }
    if o.flows == 0 || o.flows > 1 << 30 {
        return Err("--flows must be 1 to 2^30".into());
    }
    if !(0.0..=1.0).contains(&o.resched) || !(0.0..=1.0).contains(&o.drop) {
        return Err("--resched and --drop are fractions between 0 and 1".into());
    }
    if o.burst == 0 || o.seconds.is_nan() || o.seconds <= 0.0 {
        return Err("--burst and --seconds must be positive".into());
    }
    Ok(o)
}

/// xorshift64*: a fast, deterministic generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Cumulative Zipf distribution over `n` flows.
fn zipf_cdf(n: u32, s: f64) -> Vec<f64> {
    let mut acc = 0.0;
    let mut cdf: Vec<f64> = (1..=n)
        .map(|k| {
            acc += 1.0 / (k as f64).powf(s);
            acc
        })
        .collect();
    for c in &mut cdf {
        *c /= acc;
    }
    cdf
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let flows = o.flows;
    let (mut dist, workers) = match distributor::new(
        Config {
            workers: o.workers,
            credit: o.credit,
        },
        |p: &Packet| u64::from(p.flow),
    ) {
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
    println!(
        "pipeline: {} workers, {} flows (zipf {}), reschedule {}, drop {}, {} s; {} CPUs",
        o.workers, flows, o.zipf, o.resched, o.drop, o.seconds, cpus
    );
    let resched_cut = (o.resched * u64::MAX as f64) as u64;
    let drop_cut = resched_cut.saturating_add((o.drop * u64::MAX as f64) as u64);
    let threads: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            let work = o.work;
            std::thread::spawn(move || {
                let _ = topology::pin_current_thread(1 + w.id() % cpus.max(2).saturating_sub(1));
                let mut rng = Rng(0x9e37_79b9 ^ (w.id() as u64 + 1));
                let mut burst = Vec::new();
                let mut done = Vec::new();
                // When idle: spin briefly, yield, then sleep until the distributor sends
                // (the default wait strategy); with more threads than CPUs a spinning
                // worker would hold the core the distributor needs.
                loop {
                    match w.recv_burst_wait(&mut burst, 64, Duration::MAX) {
                        Err(WaitError::Disconnected) => return,
                        Err(WaitError::Timeout) => unreachable!("no deadline"),
                        Ok(_) => {}
                    }
                    for mut p in burst.drain(..) {
                        for i in 0..work {
                            std::hint::black_box(i);
                        }
                        let r = rng.next();
                        if r < resched_cut && p.flow < flows {
                            // Hand the packet to a second-stage flow (think: decapsulated).
                            w.done_burst(&mut done).unwrap();
                            p.flow += flows;
                            w.reschedule(p).unwrap();
                        } else if r < drop_cut {
                            w.done_burst(&mut done).unwrap();
                            w.drop_packet(p).unwrap();
                        } else {
                            done.push(p);
                        }
                    }
                    w.done_burst(&mut done).unwrap();
                }
            })
        })
        .collect();

    let cdf = zipf_cdf(flows, o.zipf);
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut next_seq = vec![0u32; flows as usize];
    // Per current flow: next expected position (checked on the way out).
    let mut expect: HashMap<u32, u32> = HashMap::new();
    let mut order_violations = 0u64;
    let mut sent = 0u64;
    let mut returned = 0u64;
    let mut checksum_in = 0u64;
    let mut checksum_out = 0u64;
    let mut input: Vec<Packet> = Vec::with_capacity(o.burst);
    let mut out: Vec<Packet> = Vec::with_capacity(4096);
    let start = Instant::now();
    let run_for = Duration::from_secs_f64(o.seconds);
    let mut last_tick = start;
    let mut last_returned = 0u64;
    let mut last_per_worker: Vec<u64> = (0..o.workers)
        .map(|i| dist.worker_completed(i).unwrap_or(0))
        .collect();
    let stats = dist.stats();
    let mut generating = true;
    loop {
        if generating {
            while input.len() < o.burst {
                let u = rng.unit();
                let f = cdf.partition_point(|&c| c < u).min(flows as usize - 1);
                let p = Packet {
                    flow: f as u32,
                    seq: next_seq[f],
                    id: sent,
                };
                next_seq[f] += 1;
                checksum_in = checksum_in.wrapping_add(p.id);
                sent += 1;
                input.push(p);
            }
        }
        if dist.distribute(&mut input).is_err() {
            eprintln!("all workers left");
            break;
        }
        dist.collect(&mut out);
        for p in out.drain(..) {
            // Order within each current flow. Second-stage flows see a subsequence of their
            // original flow, so positions only have to increase.
            let e = expect.entry(p.flow).or_insert(0);
            if p.seq < *e {
                order_violations += 1;
            }
            *e = p.seq + 1;
            checksum_out = checksum_out.wrapping_add(p.id);
            returned += 1;
        }
        let now = Instant::now();
        if now - last_tick >= Duration::from_secs(1) || (!generating && dist.in_flight() == 0) {
            let secs = (now - last_tick).as_secs_f64();
            let per: Vec<u64> = (0..o.workers)
                .map(|i| dist.worker_completed(i).unwrap_or(0))
                .collect();
            let total: u64 = per.iter().zip(&last_per_worker).map(|(a, b)| a - b).sum();
            let shares: Vec<String> = per
                .iter()
                .zip(&last_per_worker)
                .map(|(a, b)| format!("{:.0}%", 100.0 * (a - b) as f64 / total.max(1) as f64))
                .collect();
            let s = stats.snapshot();
            println!(
                "{:5.1}s  {:7.2} Mpps  share [{}]  in flight {:5}  rescheduled {:8}  dropped {:6}",
                (now - start).as_secs_f64(),
                (returned - last_returned) as f64 / secs / 1e6,
                shares.join(" "),
                dist.in_flight() + input.len(),
                s.get("rescheduled").unwrap_or(0),
                s.get("dropped").unwrap_or(0),
            );
            last_tick = now;
            last_returned = returned;
            last_per_worker = per;
        }
        if generating && now - start >= run_for {
            generating = false;
        }
        if !generating && input.is_empty() && dist.in_flight() == 0 {
            break;
        }
    }
    let mut rest = Vec::new();
    let flushed = dist.flush(&mut rest, Duration::from_secs(10));
    for p in rest {
        checksum_out = checksum_out.wrapping_add(p.id);
        returned += 1;
    }
    let s = stats.snapshot();
    let dropped = s.get("dropped").unwrap_or(0);
    let elapsed = start.elapsed().as_secs_f64();
    drop(dist);
    for t in threads {
        t.join().unwrap();
    }
    let exactly_once = returned + dropped == sent && (dropped > 0 || checksum_in == checksum_out);
    println!(
        "summary: {sent} packets in {elapsed:.1} s ({:.2} Mpps); returned {returned}, dropped {dropped}, \
         rescheduled {}; flush {}",
        sent as f64 / elapsed / 1e6,
        s.get("rescheduled").unwrap_or(0),
        if flushed.is_ok() { "ok" } else { "FAILED" },
    );
    println!(
        "order check: {}; exactly once: {}",
        if order_violations == 0 {
            "every flow in order".to_string()
        } else {
            format!("{order_violations} VIOLATIONS")
        },
        if exactly_once { "yes" } else { "NO" }
    );
    if order_violations == 0 && exactly_once && flushed.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
