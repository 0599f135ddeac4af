//! The demo: generator -> distributor -> workers -> returns, with live statistics.
//!
//! ```text
//! cargo run --release --example pipeline -- [--seconds 10] [--flows 1024] [--zipf 1.0]
//!     [--workers N] [--resched 0.01] [--drop 0.001] [--work 40] [--burst 32] [--credit 256]
//!     [--nodes N] [--migrate-every MS] [--balance CALLS] [--ordered | --two-stage]
//!     [--stages a,p,a]
//! ```
//!
//! A generator makes packets of many flows (Zipf-skewed), the distributor (this thread,
//! pinned to CPU 0) routes them to the workers (pinned to CPUs 1..), which spin a little per
//! packet, re-tag a fraction into a second-stage flow (the reschedule path), drop a
//! fraction, and return the rest. On the way out the distributor's thread checks that every
//! flow's packets come back in order and that every packet comes back exactly once
//! (returned or dropped). A line per second shows Mpps, each worker's share, packets in
//! flight, reschedules and drops; the summary says whether the checks held.
//!
//! With `--nodes N` (N >= 2) it runs the multi-node layout (`distributor::nodes`): N node
//! threads, each generating its own packets into its own node distributor with `--workers`
//! workers of its own; packets of flows another node owns cross a bridge ring. Node CPUs
//! come from `Topology::detect()` (set `FLOWLINE_TOPOLOGY="0;1"` to simulate two nodes on
//! two CPUs); each node's thread and workers are pinned to its node's CPUs. A line per
//! second and node shows packets in, packets processed there, bridge traffic out and in;
//! the summary checks order per (flow, entry node) and exactly once over all nodes. With
//! `--migrate-every MS`, each node moves the bucket of a flow it owns (one it generated
//! last) to the next node every MS milliseconds, when its previous migration is over, and
//! the lines show the handovers completed. With `--balance CALLS`, every node balances its
//! load (`NodeDistributor::set_balance`, the default policy with a sample every CALLS
//! calls): a node whose workers stay out of credit while another's have room moves
//! buckets of its flows there; the lines show the migrations the policy started.
//!
//! With `--ordered`, one ordered distributor (`distributor::new_ordered`) serves the
//! workers: any worker takes any packet, so one heavy flow (`--flows 1`) spreads over all
//! of them, and packets leave in the order they came in (checked, with every flow's order
//! and exactly once). `--two-stage` chains it into an atomic distributor with workers of
//! its own that keep per-flow state (the layout for stateless work such as checksums,
//! then per-flow work); they check that no flow goes backwards.
//!
//! With `--stages LIST` (stage types, `atomic`/`a`, `ordered`/`o` or `parallel`/`p`), one pipeline
//! distributor (`distributor::new_pipeline`) runs every stage: each worker takes packets of
//! any stage, does the stage's work, and forwards them to the next stage or completes them
//! at the last. The checks: the atomic stages before the first parallel one see every
//! flow in order (the workers check; ordered stages restore the order they break), with no
//! parallel stage every flow leaves in order,
//! every returned packet passed every stage, and every packet comes back exactly once. A
//! line per second shows the packets entering each stage.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use flowline::distributor::nodes::{self, NodesConfig};
use flowline::distributor::{self, Config};
use flowline::topology::{self, Topology};
use flowline::wait::WaitError;

#[path = "pipeline/ordered.rs"]
mod ordered;
#[path = "pipeline/stages.rs"]
mod stages;

#[derive(Clone, Copy, Debug)]
struct Packet {
    /// Current flow tag. Second-stage flows are `flows + original`.
    flow: u32,
    /// Position in its original flow.
    seq: u32,
    /// Unique id, for the exactly-once check.
    id: u64,
    /// Its stage (`--stages`; 0 otherwise).
    stage: u8,
}

#[derive(Clone)]
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
    nodes: usize,
    migrate_ms: u64,
    balance: u32,
    /// `--ordered` (1) or `--two-stage` (2); 0 for the atomic distributor.
    ordered: u8,
    /// `--stages`: a pipeline of these stages.
    stages: Option<Vec<flowline::distributor::StageType>>,
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
  --nodes N     run N node distributors bridged by rings, --workers each (default 1)
  --migrate-every MS  with --nodes: each node migrates a flow bucket to the next node
                every MS milliseconds (default 0: never)
  --ordered     an ordered distributor: any worker takes any packet (one heavy flow
                spreads over every worker), packets leave in the order they came in
  --two-stage   an ordered stage (stateless work), then an atomic stage whose workers
                keep per-flow state; --workers each
  --balance CALLS  with --nodes: balance load between nodes, sampling every CALLS
                calls (default 0: off)
  --stages LIST one pipeline of these stages (atomic or a, ordered or o, parallel or p;
                e.g. o,a,p):
                every worker serves every stage, forwarding packets to the next
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
        nodes: 1,
        migrate_ms: 0,
        balance: 0,
        ordered: 0,
        stages: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-h" || a == "--help" {
            println!("{HELP}");
            std::process::exit(0);
        }
        if a == "--ordered" || a == "--two-stage" {
            o.ordered = if a == "--ordered" { 1 } else { 2 };
            continue;
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
            "--nodes" => o.nodes = v.parse().map_err(|e| bad(&e))?,
            "--migrate-every" => o.migrate_ms = v.parse().map_err(|e| bad(&e))?,
            "--balance" => o.balance = v.parse().map_err(|e| bad(&e))?,
            "--stages" => o.stages = Some(stages::parse_stages(&v)?),
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
    if let Some(list) = &o.stages {
        if o.nodes >= 2 || o.ordered > 0 {
            eprintln!("--stages runs one pipeline distributor: not with --nodes, --ordered or --two-stage");
            return ExitCode::from(2);
        }
        return stages::run(&o, list);
    }
    if o.ordered > 0 {
        if o.nodes >= 2 {
            eprintln!("--ordered and --two-stage run one node; the multi-node layout is atomic");
            return ExitCode::from(2);
        }
        return ordered::run(&o, o.ordered == 2);
    }
    if o.nodes >= 2 {
        return run_nodes(&o);
    }
    let flows = o.flows;
    let (mut dist, workers) = match distributor::new(
        Config::default().workers(o.workers).credit(o.credit),
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
        "pipeline: {}, {} flows (zipf {}), reschedule {}, drop {}, {} s; {} CPUs",
        workers_text(o.workers, ""),
        flows,
        o.zipf,
        o.resched,
        o.drop,
        o.seconds,
        cpus
    );
    let threads: Vec<_> = workers
        .into_iter()
        .map(|w| {
            let (o2, cpu) = (o.clone(), 1 + w.id() % cpus.max(2).saturating_sub(1));
            std::thread::spawn(move || ordered::stateless_worker(w, &o2, cpu))
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
                    stage: 0,
                };
                next_seq[f] += 1;
                checksum_in = checksum_in.wrapping_add(p.id);
                sent += 1;
                input.push(p);
            }
        }
        // Waits (spin, yield, then sleep) while every worker is out of credit, or, once
        // the input stopped, until something comes back: no spin loop here, so the
        // distributor leaves the CPU to its workers when threads outnumber CPUs. The
        // timeouts only bring the loop round for the statistics line.
        let tick = Duration::from_millis(100);
        match dist.distribute_wait(&mut input, tick) {
            Err(WaitError::Disconnected) => {
                eprintln!("all workers left");
                break;
            }
            Ok(_) | Err(WaitError::Timeout) => {}
        }
        if generating {
            dist.collect(&mut out);
        } else {
            // Nothing to place: wait for hand-backs (Disconnected is seen above next time).
            let _ = dist.collect_wait(&mut out, tick);
        }
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

/// What one node's thread saw: packets it generated (and their id sum), packets it got
/// back (and their id sum), drops at its workers, order violations, bridge traffic.
#[derive(Default)]
struct NodeReport {
    sent: u64,
    sum_in: u64,
    returned: u64,
    sum_out: u64,
    dropped: u64,
    rescheduled: u64,
    violations: u64,
    bridged_out: u64,
    bridged_in: u64,
    migrations: u64,
    flushed: bool,
}

/// The multi-node layout: `o.nodes` node threads, each a generator and a node distributor
/// with `o.workers` workers of its own.
fn run_nodes(o: &Opts) -> ExitCode {
    let n = o.nodes;
    let flows = o.flows;
    let layout = match nodes::new(
        NodesConfig::default()
            .nodes(n)
            .workers_per_node(o.workers)
            .credit(o.credit)
            .bridge(4096),
        |p: &Packet| u64::from(p.flow),
    ) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    // CPUs per node: the detected (or declared) topology's nodes if there are enough,
    // else the available CPUs dealt round robin (simulated nodes).
    // A declaration in FLOWLINE_TOPOLOGY that cannot be honoured is the user's error.
    let topo = match Topology::detect() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("pipeline: {e}");
            return ExitCode::from(2);
        }
    };
    let simulated = topo.nodes().len() < n;
    let placement = if simulated {
        format!(
            "simulated nodes: the {:?} topology's {} node(s) dealt round robin",
            topo.source(),
            topo.nodes().len()
        )
    } else {
        format!("{:?} topology", topo.source())
    };
    let cpus_of: Vec<Vec<usize>> = if !simulated {
        topo.nodes()
            .iter()
            .take(n)
            .map(|nd| nd.cpus.clone())
            .collect()
    } else {
        let all: Vec<usize> = topo.cpus().collect();
        (0..n)
            .map(|k| all.iter().copied().skip(k).step_by(n).collect::<Vec<_>>())
            .map(|v| if v.is_empty() { vec![0] } else { v })
            .collect()
    };
    println!(
        "pipeline: {n} nodes x {}, {} flows (zipf {}), reschedule {}, drop {}, {} s; node CPUs {:?} ({placement}; a node with one CPU runs its workers on its own thread)",
        workers_text(o.workers, ""),
        flows, o.zipf, o.resched, o.drop, o.seconds, cpus_of
    );
    let resched_cut = (o.resched * u64::MAX as f64) as u64;
    let drop_cut = resched_cut.saturating_add((o.drop * u64::MAX as f64) as u64);
    let cdf = std::sync::Arc::new(zipf_cdf(flows, o.zipf));
    let run_for = Duration::from_secs_f64(o.seconds);
    let (burst_n, work, migrate_ms) = (o.burst, o.work, o.migrate_ms);
    let policy = (o.balance > 0).then(|| nodes::BalancePolicy {
        period: o.balance,
        ..nodes::BalancePolicy::default()
    });
    let threads: Vec<_> = layout
        .into_iter()
        .map(|(mut node, workers)| {
            let id = node.id();
            let cpus = cpus_of[id].clone();
            let cdf = cdf.clone();
            node.set_balance(policy).expect("a positive period is a valid policy");
            std::thread::spawn(move || {
                let _ = topology::pin_current_thread(cpus[0]);
                // One worker's turn: process what it received, hand everything back.
                let process = move |w: &mut distributor::Worker<Packet>,
                                    rng: &mut Rng,
                                    burst: &mut Vec<Packet>,
                                    done: &mut Vec<Packet>| {
                    for mut p in burst.drain(..) {
                        for i in 0..work {
                            std::hint::black_box(i);
                        }
                        let r = rng.next();
                        if r < resched_cut && p.flow < flows {
                            w.done_burst(done).unwrap();
                            p.flow += flows;
                            w.reschedule(p).unwrap();
                        } else if r < drop_cut {
                            w.done_burst(done).unwrap();
                            w.drop_packet(p).unwrap();
                        } else {
                            done.push(p);
                        }
                    }
                    w.done_burst(done).unwrap();
                };
                // A node with one CPU runs its workers on its own thread, after each
                // distribute (a worker thread sharing the CPU would only fight for it);
                // otherwise each worker has a thread on the node's other CPUs.
                let mut inline = Vec::new();
                let mut wts = Vec::new();
                for mut w in workers {
                    let seed = 0x9e37_79b9 ^ ((id * 1000 + w.id()) as u64 + 1);
                    if cpus.len() == 1 {
                        inline.push((w, Rng(seed)));
                        continue;
                    }
                    let cpu = cpus[1 + w.id() % (cpus.len() - 1)];
                    wts.push(std::thread::spawn(move || {
                        let _ = topology::pin_current_thread(cpu);
                        let mut rng = Rng(seed);
                        let (mut burst, mut done) = (Vec::new(), Vec::new());
                        while w.recv_burst_wait(&mut burst, 64, Duration::MAX).is_ok() {
                            process(&mut w, &mut rng, &mut burst, &mut done);
                        }
                    }));
                }
                let (mut wburst, mut wdone) = (Vec::new(), Vec::new());
                let mut run_inline = |inline: &mut Vec<(distributor::Worker<Packet>, Rng)>| {
                    for (w, rng) in inline.iter_mut() {
                        if w.recv_burst(&mut wburst, 64).unwrap_or(0) > 0 {
                            process(w, rng, &mut wburst, &mut wdone);
                        }
                    }
                };
                let mut rep = NodeReport::default();
                let mut rng = Rng(0x1234_5678_9abc_def1 ^ (id as u64 + 1));
                let mut next_seq = vec![0u32; flows as usize];
                // Per (current flow, entry node): the next expected position.
                let mut expect: HashMap<(u32, u64), u32> = HashMap::new();
                let mut input: Vec<Packet> = Vec::with_capacity(burst_n);
                let mut out: Vec<Packet> = Vec::with_capacity(4096);
                let check = |out: &mut Vec<Packet>,
                             rep: &mut NodeReport,
                             expect: &mut HashMap<(u32, u64), u32>| {
                    for p in out.drain(..) {
                        let e = expect.entry((p.flow, p.id % n as u64)).or_insert(0);
                        if p.seq < *e {
                            rep.violations += 1;
                        }
                        *e = p.seq + 1;
                        rep.sum_out = rep.sum_out.wrapping_add(p.id);
                        rep.returned += 1;
                    }
                };
                let start = Instant::now();
                let mut last_tick = start;
                let mut last = (0u64, 0u64, nodes::BridgeStats::default());
                let migrate_every = Duration::from_millis(migrate_ms);
                let mut last_migration = start;
                while start.elapsed() < run_for || !input.is_empty() {
                    if migrate_ms > 0
                        && last_migration.elapsed() >= migrate_every
                        && !node.migrating()
                    {
                        // The newest packet's flow, if this node owns it (else next time).
                        if let Some(p) = input.last() {
                            let t = u64::from(p.flow);
                            if node.owns(t)
                                && node.migrate(nodes::bucket_of(t), (id + 1) % n).is_ok()
                            {
                                last_migration = Instant::now();
                            }
                        }
                    }
                    if start.elapsed() < run_for {
                        while input.len() < burst_n {
                            let u = rng.unit();
                            let f = cdf.partition_point(|&c| c < u).min(flows as usize - 1);
                            // Ids are unique over all nodes; `id % n` is the entry node.
                            let p = Packet {
                                flow: f as u32,
                                seq: next_seq[f],
                                id: rep.sent * n as u64 + id as u64,
                                stage: 0,
                            };
                            next_seq[f] += 1;
                            rep.sum_in = rep.sum_in.wrapping_add(p.id);
                            rep.sent += 1;
                            input.push(p);
                        }
                    }
                    if node.distribute(&mut input).is_err() {
                        eprintln!("node {id}: all workers left");
                        break;
                    }
                    run_inline(&mut inline);
                    node.collect(&mut out);
                    check(&mut out, &mut rep, &mut expect);
                    let now = Instant::now();
                    if now - last_tick >= Duration::from_secs(1) {
                        let secs = (now - last_tick).as_secs_f64();
                        let b = node.bridge_stats();
                        println!(
                            "{:5.1}s  node {id}: in {:6.2} Mpps, processed here {:6.2} Mpps, bridged out {:6.2} Mpps ({:.1} pkts/publication), in {:6.2} Mpps, migrations {} ({} by the balance policy)",
                            (now - start).as_secs_f64(),
                            (rep.sent - last.0) as f64 / secs / 1e6,
                            (rep.returned - last.1) as f64 / secs / 1e6,
                            (b.sent - last.2.sent) as f64 / secs / 1e6,
                            (b.sent - last.2.sent) as f64 / (b.bursts - last.2.bursts).max(1) as f64,
                            (b.received - last.2.received) as f64 / secs / 1e6,
                            b.migrations,
                            b.rebalances,
                        );
                        last_tick = now;
                        last = (rep.sent, rep.returned, b);
                    }
                }
                if inline.is_empty() {
                    rep.flushed = node.flush(&mut out, Duration::from_secs(30)).is_ok();
                } else {
                    // Inline workers need this thread: flush in short slices, running them
                    // in between.
                    let deadline = Instant::now() + Duration::from_secs(30);
                    loop {
                        run_inline(&mut inline);
                        match node.flush(&mut out, Duration::ZERO) {
                            Ok(()) => {
                                rep.flushed = true;
                                break;
                            }
                            Err(_) if Instant::now() < deadline => {}
                            Err(_) => break,
                        }
                    }
                }
                check(&mut out, &mut rep, &mut expect);
                let s = node.distributor().stats().snapshot();
                rep.dropped = s.get("dropped").unwrap_or(0);
                rep.rescheduled = s.get("rescheduled").unwrap_or(0);
                let b = node.bridge_stats();
                rep.bridged_out = b.sent;
                rep.bridged_in = b.received;
                rep.migrations = b.migrations;
                drop(node);
                drop(inline);
                for t in wts {
                    t.join().unwrap();
                }
                rep
            })
        })
        .collect();
    let start = Instant::now();
    let reps: Vec<NodeReport> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let elapsed = start.elapsed().as_secs_f64();
    let sum = |f: fn(&NodeReport) -> u64| reps.iter().map(f).fold(0u64, u64::wrapping_add);
    let (sent, returned, dropped) = (sum(|r| r.sent), sum(|r| r.returned), sum(|r| r.dropped));
    let violations = sum(|r| r.violations);
    let exactly_once =
        returned + dropped == sent && (dropped > 0 || sum(|r| r.sum_in) == sum(|r| r.sum_out));
    let flushed = reps.iter().all(|r| r.flushed);
    for (k, r) in reps.iter().enumerate() {
        println!(
            "node {k}: generated {}, processed here {}, dropped {}, rescheduled {}, bridged out {}, bridged in {}, migrations out {}",
            r.sent,
            r.returned + r.dropped,
            r.dropped,
            r.rescheduled,
            r.bridged_out,
            r.bridged_in,
            r.migrations
        );
    }
    println!(
        "summary: {sent} packets in {elapsed:.1} s ({:.2} Mpps over {n} nodes); returned {returned}, dropped {dropped}; flush {}",
        sent as f64 / elapsed / 1e6,
        if flushed { "ok" } else { "FAILED" },
    );
    println!(
        "order check (per flow and entry node): {}; exactly once: {}",
        if violations == 0 {
            "every flow in order".to_string()
        } else {
            format!("{violations} VIOLATIONS")
        },
        if exactly_once { "yes" } else { "NO" }
    );
    if violations == 0 && exactly_once && flushed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// "1 worker", "2 workers" (with `kind` before the noun: "2 ordered workers").
fn workers_text(n: usize, kind: &str) -> String {
    let noun = if n == 1 { "worker" } else { "workers" };
    format!("{n} {kind}{noun}")
}
