//! Real packets through the distributor: a pcap or pcapng capture replayed with 5-tuple
//! flows, checked by TCP sequence numbers.
//!
//! ```text
//! cargo run --release -p flowline-bench --example pcap_replay -- [--pcap FILE] [--loops N] [--workers N]
//!     [--burst N] [--credit N] [--ordered | --stages LIST] [--one-flow]
//! ```
//!
//! Reads the capture (default: `bench/tests/data/loopback.pcap`, real loopback traffic recorded
//! by `scripts/capture_loopback.sh`), parses every frame's Ethernet / VLAN / IPv4 / IPv6 /
//! TCP / UDP headers, and tags it with the symmetric Toeplitz RSS hash of its addresses and
//! ports (both directions of a connection are one flow, as with a NIC's symmetric RSS key).
//! Then it replays the capture `--loops` times, each lap with its own flow salt, through
//! the distributor (this thread, CPU 0) to the workers (CPUs 1..), which parse each frame
//! again and hand it back. On the way out it checks that every frame came back exactly
//! once, that every flow direction's frames came back in capture order, and that every
//! TCP frame carries the sequence number the capture has at that position. Frames that
//! cannot be parsed (unknown link type, cut inside a header, bad header) are counted and
//! still replayed, on hash 0, as a NIC queues what it cannot hash; a damaged capture stops
//! at the damage and the frames before it run.
//!
//! With `--ordered` an ordered distributor (`distributor::new_ordered`) serves the workers:
//! any worker takes any frame and frames leave in capture order, so the same checks hold
//! with a flow spread over every worker; `--one-flow` tags every frame as one flow (an
//! elephant) to show it. With `--stages LIST` (`a` atomic, `o` ordered: `oa` restores
//! capture order at an ordered stage, then keeps per-flow state at an atomic one) one
//! pipeline distributor (`distributor::new_pipeline`) serves the workers, who parse a frame
//! at the first stage and move it on to the next; the same checks hold at the end.

mod frames;
mod replay;

use std::process::ExitCode;
use std::sync::Arc;

use flowline::topology;

use frames::{Ingest, Problem, Proto};
use replay::ReplayConfig;

const HELP: &str = "\
pcap_replay: a capture's frames through the flowline distributor, checked by TCP sequence numbers

options:
  --pcap FILE   pcap or pcapng capture (default bench/tests/data/loopback.pcap)
  --loops N     replay the capture N times, each with its own flow salt (default 2000)
  --workers N   worker threads (default: CPUs - 1, at least 1)
  --burst N     distributor burst size (default 32)
  --credit N    packets a worker may hold (default 256)
  --ordered     an ordered distributor: any worker takes any frame, frames leave in
                capture order (the checks stay the same)
  --one-flow    tag every frame as one flow (an elephant: an atomic distributor keeps it
                on one worker, an ordered one spreads it over every worker)
  --stages LIST a pipeline of atomic (a) and ordered (o) stages, e.g. oa: workers parse
                at the first stage and move frames on (the checks stay the same)
  -h, --help    this text";

struct Opts {
    pcap: String,
    cfg: ReplayConfig,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        pcap: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/loopback.pcap").into(),
        cfg: ReplayConfig {
            workers: topology::available_cpus().saturating_sub(1).max(1),
            credit: 256,
            burst: 32,
            laps: 2000,
            pin: true,
            ordered: false,
            one_flow: false,
            stages: None,
        },
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-h" || a == "--help" {
            println!("{HELP}");
            std::process::exit(0);
        }
        if a == "--ordered" || a == "--one-flow" {
            if a == "--ordered" {
                o.cfg.ordered = true;
            } else {
                o.cfg.one_flow = true;
            }
            continue;
        }
        let v = args
            .next()
            .ok_or_else(|| format!("{a} needs a value; see --help"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{a} {v}: {e}");
        match a.as_str() {
            "--pcap" => o.pcap = v,
            "--loops" => o.cfg.laps = v.parse().map_err(|e| bad(&e))?,
            "--workers" => o.cfg.workers = v.parse().map_err(|e| bad(&e))?,
            "--burst" => o.cfg.burst = v.parse().map_err(|e| bad(&e))?,
            "--credit" => o.cfg.credit = v.parse().map_err(|e| bad(&e))?,
            "--stages" => o.cfg.stages = Some(replay::Stages::parse(&v)?),
            _ => return Err(format!("unknown option {a}; see --help")),
        }
    }
    if o.cfg.ordered && o.cfg.stages.is_some() {
        return Err("--ordered and --stages: one or the other".into());
    }
    if o.cfg.laps == 0 || o.cfg.burst == 0 {
        return Err("--loops and --burst must be positive".into());
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let bytes = match std::fs::read(&o.pcap) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{}: {e}", o.pcap);
            return ExitCode::from(2);
        }
    };
    let cap = match frames::read_capture(&bytes) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{}: {e}", o.pcap);
            return ExitCode::from(2);
        }
    };
    let ing = Ingest::new(&cap);
    report_capture(&o.pcap, &cap, &ing);
    if cap.frames.is_empty() {
        eprintln!("no frames to replay");
        return ExitCode::FAILURE;
    }
    let cfg = o.cfg;
    println!(
        "replay: {} frames x {} loops = {} frames, {} {} workers{}, burst {}, credit {}; {} CPUs",
        cap.frames.len(),
        cfg.laps,
        cap.frames.len() as u64 * u64::from(cfg.laps),
        cfg.workers,
        match (cfg.ordered, cfg.stages) {
            (true, _) => "ordered".to_string(),
            (_, Some(st)) => format!("pipeline {:?}", st.as_slice()),
            _ => "atomic".to_string(),
        },
        if cfg.one_flow { " (one flow)" } else { "" },
        cfg.burst,
        cfg.credit,
        topology::available_cpus()
    );
    let out = replay::replay(Arc::new(cap), &ing, cfg, |t| {
        let total: u64 = t.per_worker.iter().sum();
        let shares: Vec<String> = t
            .per_worker
            .iter()
            .map(|&n| format!("{:.0}%", 100.0 * n as f64 / total.max(1) as f64))
            .collect();
        println!(
            "{:5.1}s  {:7.2} Mfps  share [{}]  in flight {:5}",
            t.elapsed.as_secs_f64(),
            t.returned_since as f64 / t.secs_since.max(1e-9) / 1e6,
            shares.join(" "),
            t.in_flight,
        );
    });
    let out = match out {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let secs = out.elapsed.as_secs_f64();
    println!(
        "summary: {} frames in {secs:.2} s ({:.2} Mfps); returned {}; flush {}",
        out.sent,
        out.sent as f64 / secs / 1e6,
        out.returned,
        if out.flush_ok { "ok" } else { "FAILED" },
    );
    let tcp_dirs = ing.dir_tcp.iter().filter(|&&t| t).count();
    println!(
        "order check: {}; TCP: {} directions x {} loops, {} segments checked, {}",
        if out.order_violations == 0 {
            "every flow direction in capture order".to_string()
        } else {
            format!("{} OUT OF ORDER", out.order_violations)
        },
        tcp_dirs,
        cfg.laps,
        out.tcp_checked,
        if out.seq_mismatches == 0 {
            "sequence numbers as captured".to_string()
        } else {
            format!("{} SEQUENCE NUMBER MISMATCHES", out.seq_mismatches)
        },
    );
    println!(
        "exactly once: {} (duplicates {}, missing {}); worker RSS agreed with the tag: {}",
        if out.duplicates == 0 && out.missing == 0 && out.returned == out.sent {
            "yes"
        } else {
            "NO"
        },
        out.duplicates,
        out.missing,
        if out.rss_mismatches == 0 {
            "yes".to_string()
        } else {
            format!("NO ({})", out.rss_mismatches)
        },
    );
    if out.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What the capture holds: frames by protocol, problems, flows and their sizes.
fn report_capture(path: &str, cap: &frames::Capture, ing: &Ingest) {
    let by_proto = ing.by_proto();
    let protos: Vec<String> = Proto::ALL
        .iter()
        .zip(by_proto)
        .filter(|&(_, n)| n > 0)
        .map(|(p, n)| format!("{} {n}", p.name()))
        .collect();
    println!(
        "capture: {path} ({}): {} frames [{}]",
        cap.format,
        cap.frames.len(),
        protos.join(", ")
    );
    let problems: Vec<String> = Problem::ALL
        .iter()
        .zip(ing.by_problem())
        .filter(|&(_, n)| n > 0)
        .map(|(p, n)| format!("{} {n}", p.name()))
        .collect();
    println!(
        "problems: {}{}",
        if problems.is_empty() {
            "none".to_string()
        } else {
            problems.join(", ")
        },
        match &cap.stopped {
            Some(why) => format!("; capture damaged, read up to the damage: {why}"),
            None => String::new(),
        }
    );
    let tcp_flows = ing.dir_tcp.iter().filter(|&&t| t).count();
    let largest = ing.flow_frames.iter().copied().max().unwrap_or(0);
    println!(
        "flows: {} ({} flow directions, {} of them TCP); largest flow {} frames ({:.0}% of the capture)",
        ing.flow_frames.len(),
        ing.dir_frames.len(),
        tcp_flows,
        largest,
        100.0 * largest as f64 / cap.frames.len().max(1) as f64
    );
    let sizes: Vec<String> = ing
        .flow_sizes()
        .iter()
        .map(|&(upto, n)| format!("<={upto}: {n}"))
        .collect();
    println!("flow sizes (frames per flow: flows): {}", sizes.join(", "));
}
