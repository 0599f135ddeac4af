//! The replay engine of the pcap example: a capture's frames, looped `laps` times with a
//! distinct flow salt per lap, through a flowline distributor and its workers, checked on
//! the way out (exactly once; per flow direction, capture order; for TCP, the sequence
//! numbers the workers parsed). Shared with `bench/tests/pcap.rs` by `#[path]`.
#![allow(dead_code)] // The test and the example use different parts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowline::distributor::{self, Config, StageType};
use flowline::topology;

use super::frames::{parse_frame, Capture, Ingest};

/// A frame in flight: where its bytes are and what the workers found in them.
#[derive(Clone, Copy, Debug)]
pub struct Pkt {
    /// Flow tag: the frame's RSS hash, salted with its lap (`lap << 32 | rss`), or 0 for
    /// every frame with `one_flow`.
    pub tag: u64,
    /// The frame's RSS hash as the capture was parsed.
    pub rss: u32,
    pub frame: u32,
    pub lap: u32,
    /// The TCP sequence number the worker parsed (valid when `tcp`).
    pub seq: u32,
    /// Its stage, in a pipeline (`stages`; 0 otherwise).
    pub stage: u8,
    pub tcp: bool,
    /// The worker's RSS hash agreed with the tag.
    pub rss_ok: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct ReplayConfig {
    pub workers: usize,
    pub credit: usize,
    pub burst: usize,
    pub laps: u32,
    /// Pin the distributor to CPU 0 and the workers to CPUs 1.. .
    pub pin: bool,
    /// An ordered distributor (`distributor::new_ordered`): any worker takes any frame,
    /// and frames leave in capture order.
    pub ordered: bool,
    /// Every frame is tagged as one flow (an elephant): an atomic distributor then keeps
    /// it on one worker, an ordered one spreads it.
    pub one_flow: bool,
    /// A pipeline (`distributor::new_pipeline`) of these stages: the workers parse a frame
    /// at the first and move it on, stage by stage.
    pub stages: Option<Stages>,
}

/// A pipeline's stages: atomic and ordered ones only (a parallel stage promises no order,
/// and the replay checks capture order).
#[derive(Clone, Copy, Debug)]
pub struct Stages {
    kinds: [StageType; 8],
    n: u8,
}

impl Stages {
    /// Parses letters `a` (atomic) and `o` (ordered), commas allowed: `oa`, `o,a,a`.
    pub fn parse(list: &str) -> Result<Stages, String> {
        let mut st = Stages {
            kinds: [StageType::Atomic; 8],
            n: 0,
        };
        for c in list.chars().filter(|&c| c != ',') {
            let kind = match c {
                'a' => StageType::Atomic,
                'o' => StageType::Ordered,
                'p' => return Err("--stages: a parallel stage promises no order, and the replay checks capture order".into()),
                _ => return Err(format!("--stages: unknown stage type {c:?}; use a (atomic) or o (ordered)")),
            };
            if usize::from(st.n) == st.kinds.len() {
                return Err("--stages: at most 8 stages".into());
            }
            st.kinds[usize::from(st.n)] = kind;
            st.n += 1;
        }
        if st.n == 0 {
            return Err("--stages: at least one stage".into());
        }
        Ok(st)
    }

    pub fn as_slice(&self) -> &[StageType] {
        &self.kinds[..usize::from(self.n)]
    }
}

/// Once a second (and at the end): progress for the live line.
pub struct Tick {
    pub elapsed: Duration,
    pub returned_since: u64,
    pub secs_since: f64,
    /// Per worker, packets completed since the last tick.
    pub per_worker: Vec<u64>,
    pub in_flight: usize,
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub sent: u64,
    pub returned: u64,
    pub elapsed: Duration,
    /// Frames that came back more than once, or never.
    pub duplicates: u64,
    pub missing: u64,
    /// Frames that came back out of capture order within their flow direction.
    pub order_violations: u64,
    /// TCP frames checked by sequence number, and those whose number differed from the
    /// capture's at that position.
    pub tcp_checked: u64,
    pub seq_mismatches: u64,
    /// Frames whose worker-side RSS hash differed from the tag's (a parse disagreement).
    pub rss_mismatches: u64,
    pub flush_ok: bool,
    /// Per worker: packets completed.
    pub per_worker: Vec<u64>,
}

impl Outcome {
    /// Every check held.
    pub fn ok(&self) -> bool {
        self.returned == self.sent
            && self.duplicates == 0
            && self.missing == 0
            && self.order_violations == 0
            && self.seq_mismatches == 0
            && self.rss_mismatches == 0
            && self.flush_ok
    }
}

/// Replays `cap` (parsed into `ing`) through a distributor; `tick` is called about once a
/// second with progress. `Err` for a configuration the distributor refuses.
pub fn replay(
    cap: Arc<Capture>,
    ing: &Ingest,
    cfg: ReplayConfig,
    tick: impl FnMut(&Tick),
) -> Result<Outcome, String> {
    let nf = cap.frames.len();
    if nf == 0 || cfg.laps == 0 {
        return Ok(Outcome {
            flush_ok: true,
            per_worker: vec![0; cfg.workers],
            ..Outcome::default()
        });
    }
    if cfg.burst == 0 {
        return Err("burst must be at least 1".into());
    }
    let config = Config::default().workers(cfg.workers).credit(cfg.credit);
    if let Some(st) = cfg.stages {
        let route = |p: &Pkt| (usize::from(p.stage), p.tag);
        let (dist, workers) =
            distributor::new_pipeline(config, st.as_slice(), route).map_err(|e| e.to_string())?;
        drive(dist, workers, cap, ing, cfg, tick)
    } else if cfg.ordered {
        let window = 4 * cfg.workers * cfg.credit;
        let (dist, workers) =
            distributor::new_ordered(config, window).map_err(|e| e.to_string())?;
        drive(dist, workers, cap, ing, cfg, tick)
    } else {
        let (dist, workers) =
            distributor::new(config, |p: &Pkt| p.tag).map_err(|e| e.to_string())?;
        drive(dist, workers, cap, ing, cfg, tick)
    }
}

/// [`replay`] through `dist` and its `workers`.
fn drive<S: distributor::Schedule<Pkt>>(
    mut dist: distributor::Distributor<Pkt, S>,
    workers: Vec<distributor::Worker<Pkt>>,
    cap: Arc<Capture>,
    ing: &Ingest,
    cfg: ReplayConfig,
    mut tick: impl FnMut(&Tick),
) -> Result<Outcome, String> {
    let nf = cap.frames.len();
    let cpus = topology::available_cpus();
    let last = cfg.stages.map_or(0, |s| s.n - 1);
    if cfg.pin {
        let _ = topology::pin_current_thread(0);
    }
    let threads: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            let cap = Arc::clone(&cap);
            let pin = cfg.pin;
            std::thread::spawn(move || {
                if pin {
                    let _ =
                        topology::pin_current_thread(1 + w.id() % cpus.max(2).saturating_sub(1));
                }
                let mut burst = Vec::new();
                // When idle: spin briefly, yield, then sleep until the distributor sends.
                loop {
                    if w.recv_burst_wait(&mut burst, 64, Duration::MAX).is_err() {
                        return; // the distributor is gone (no deadline: never a timeout)
                    }
                    // The work: parse the frame's headers, as an L3/L4 stage would (in a
                    // pipeline, at the first stage; every stage moves it on to the next).
                    for p in burst.iter_mut() {
                        if p.stage == 0 {
                            let f = cap.frames[p.frame as usize];
                            let parsed = parse_frame(f.link, cap.data(p.frame as usize));
                            p.tcp = parsed.tcp_seq.is_some();
                            p.seq = parsed.tcp_seq.unwrap_or(0);
                            p.rss_ok = parsed.rss == p.rss;
                        }
                        if p.stage < last {
                            p.stage += 1;
                        }
                    }
                    w.done_burst(&mut burst).unwrap();
                }
            })
        })
        .collect();

    let total = nf as u64 * u64::from(cfg.laps);
    let ndirs = ing.dir_frames.len();
    let mut seen = vec![0u64; (total as usize).div_ceil(64)];
    let mut cursor = vec![0u32; ndirs * cfg.laps as usize];
    let mut o = Outcome {
        per_worker: vec![0; cfg.workers],
        ..Outcome::default()
    };
    let mut check = |p: &Pkt, o: &mut Outcome| {
        let id = p.lap as usize * nf + p.frame as usize;
        let (w, b) = (id / 64, 1u64 << (id % 64));
        if seen[w] & b != 0 {
            o.duplicates += 1;
        }
        seen[w] |= b;
        if !p.rss_ok {
            o.rss_mismatches += 1;
        }
        if p.stage != last {
            // Out of the pipeline before its last stage.
            o.order_violations += 1;
        }
        let d = ing.dir_id[p.frame as usize];
        if d != u32::MAX {
            let c = &mut cursor[p.lap as usize * ndirs + d as usize];
            let expect = ing.dir_frames[d as usize].get(*c as usize).copied();
            if expect != Some(p.frame) {
                o.order_violations += 1;
            }
            if ing.dir_tcp[d as usize] {
                o.tcp_checked += 1;
                let want = expect.and_then(|e| ing.parsed[e as usize].tcp_seq);
                if !p.tcp || want != Some(p.seq) {
                    o.seq_mismatches += 1;
                }
            }
            *c += 1;
        }
        o.returned += 1;
    };

    let start = Instant::now();
    let mut input: Vec<Pkt> = Vec::with_capacity(cfg.burst);
    let mut out: Vec<Pkt> = Vec::with_capacity(4096);
    let mut next = 0u64;
    let mut last_tick = start;
    let mut last_returned = 0u64;
    let completed = |d: &distributor::Distributor<Pkt, S>| -> Vec<u64> {
        (0..cfg.workers)
            .map(|i| d.worker_completed(i).unwrap_or(0))
            .collect()
    };
    let mut last_per = completed(&dist);
    loop {
        while input.len() < cfg.burst && next < total {
            let (lap, frame) = ((next / nf as u64) as u32, (next % nf as u64) as u32);
            let rss = ing.parsed[frame as usize].rss;
            input.push(Pkt {
                tag: if cfg.one_flow {
                    0
                } else {
                    u64::from(lap) << 32 | u64::from(rss)
                },
                rss,
                frame,
                lap,
                seq: 0,
                stage: 0,
                tcp: false,
                rss_ok: false,
            });
            next += 1;
        }
        o.sent = next - input.len() as u64;
        if dist.distribute(&mut input).is_err() {
            break;
        }
        o.sent = next - input.len() as u64;
        dist.collect(&mut out);
        for p in out.drain(..) {
            check(&p, &mut o);
        }
        let now = Instant::now();
        let done = next == total && input.is_empty() && dist.in_flight() == 0;
        if now - last_tick >= Duration::from_secs(1) || done {
            let per = completed(&dist);
            tick(&Tick {
                elapsed: now - start,
                returned_since: o.returned - last_returned,
                secs_since: (now - last_tick).as_secs_f64(),
                per_worker: per.iter().zip(&last_per).map(|(a, b)| a - b).collect(),
                in_flight: dist.in_flight() + input.len(),
            });
            last_tick = now;
            last_returned = o.returned;
            last_per = per;
        }
        if done {
            break;
        }
    }
    let mut rest = Vec::new();
    o.flush_ok = dist.flush(&mut rest, Duration::from_secs(10)).is_ok();
    for p in &rest {
        check(p, &mut o);
    }
    o.elapsed = start.elapsed();
    o.per_worker = completed(&dist);
    drop(dist);
    for t in threads {
        t.join()
            .map_err(|_| "a worker thread panicked".to_string())?;
    }
    o.missing = (0..total as usize)
        .filter(|&i| seen[i / 64] & (1 << (i % 64)) == 0)
        .count() as u64;
    Ok(o)
}
