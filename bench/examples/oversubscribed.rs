//! A distributor with more threads than cores: the generator and the distributor share one
//! thread and its workers have a thread each. Either every thread waits (`distribute_wait`
//! and `collect_wait`, workers `recv_burst_wait`) or every thread polls (`distribute` and
//! `collect` in a loop, workers `recv_burst` in a loop, as a program written without the
//! waiting calls does), or every thread polls and yields its core when a poll made no
//! progress (`yield`: the best such loop written by hand). Each run moves the same packets
//! (bursts of 32 over 1024 flows) and checks that every packet came back once, in order
//! per flow; the figures are the wall time of the run, from the first packet to the last,
//! and the CPU time the whole process spent in it (user and system, all threads).
//!
//! ```text
//! cargo run --release -p flowline-bench --example oversubscribed -- [--packets 2000000]
//!     [--runs 5] [--workers 1,2] [--modes wait,poll,yield]
//! ```
//!
//! Runs of the configurations alternate (placement drifts over time on a shared host);
//! the output is each configuration's median and range, and each mode's ratio of its
//! median at the largest worker count to its median at the smallest.

use std::time::{Duration, Instant};

use flowline::distributor::{self, Config};
use flowline::wait::{WaitError, WaitStrategy};

const FLOWS: u64 = 1024;
const BURST: usize = 32;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Wait,
    Poll,
    /// Polls, yielding the core after a poll that moved nothing.
    Yield,
}

/// The process's CPU time so far (user and system, every thread).
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` writes the `rusage` it is given and reads nothing else; a zeroed
    // `rusage` is a valid value of the plain C struct.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn run(
    packets: u64,
    workers: usize,
    mode: Mode,
    strategy: Option<WaitStrategy>,
) -> (Duration, Duration) {
    let (mut d, ws) =
        distributor::new(Config::default().workers(workers).credit(256), |p: &u64| {
            *p % FLOWS
        })
        .expect("config");
    if let Some(s) = strategy {
        d.set_wait_strategy(s);
    }
    let threads: Vec<_> = ws
        .into_iter()
        .map(|mut w| {
            if let Some(s) = strategy {
                w.set_wait_strategy(s);
            }
            std::thread::spawn(move || {
                let mut b = Vec::new();
                loop {
                    let got = match mode {
                        Mode::Wait => w.recv_burst_wait(&mut b, 64, Duration::MAX),
                        Mode::Poll => w
                            .recv_burst(&mut b, 64)
                            .map_err(|_| WaitError::Disconnected),
                        Mode::Yield => match w.recv_burst(&mut b, 64) {
                            Ok(0) => {
                                std::thread::yield_now();
                                continue;
                            }
                            r => r.map_err(|_| WaitError::Disconnected),
                        },
                    };
                    match got {
                        Ok(_) => w.done_burst(&mut b).expect("held"),
                        Err(WaitError::Disconnected) => return,
                        Err(WaitError::Timeout) => unreachable!("no deadline"),
                    }
                }
            })
        })
        .collect();
    let mut next = 0u64;
    let mut input: Vec<u64> = Vec::with_capacity(BURST);
    let mut out: Vec<u64> = Vec::with_capacity(4096);
    let mut last = vec![None::<u64>; FLOWS as usize];
    let mut back = 0u64;
    let mut check = |out: &mut Vec<u64>| {
        for p in out.drain(..) {
            let f = (p % FLOWS) as usize;
            assert!(last[f].is_none_or(|l| l < p), "flow {f} out of order");
            last[f] = Some(p);
            back += 1;
        }
    };
    let (start, cpu) = (Instant::now(), cpu_time());
    while next < packets || !input.is_empty() {
        while input.len() < BURST && next < packets {
            input.push(next);
            next += 1;
        }
        match mode {
            Mode::Wait => {
                d.distribute_wait(&mut input, Duration::from_secs(30))
                    .expect("placed");
            }
            Mode::Poll => {
                d.distribute(&mut input).expect("placed");
            }
            Mode::Yield => {
                let placed = d.distribute(&mut input).expect("placed");
                if placed == 0 && d.collect(&mut out) == 0 {
                    std::thread::yield_now();
                }
            }
        }
        d.collect(&mut out);
        check(&mut out);
    }
    match mode {
        Mode::Wait => {
            while d.in_flight() > 0 {
                d.collect_wait(&mut out, Duration::from_secs(30))
                    .expect("collected");
                check(&mut out);
            }
        }
        Mode::Poll => {
            d.flush(&mut out, Duration::from_secs(30)).expect("flushed");
        }
        Mode::Yield => {
            while d.in_flight() > 0 {
                d.distribute(&mut Vec::new()).expect("workers");
                if d.collect(&mut out) == 0 {
                    std::thread::yield_now();
                }
                check(&mut out);
            }
        }
    }
    check(&mut out);
    let took = (start.elapsed(), cpu_time() - cpu);
    assert_eq!(back, packets, "every packet back exactly once");
    drop(d);
    for t in threads {
        t.join().expect("worker");
    }
    took
}

fn list<T>(v: &str, f: impl Fn(&str) -> Option<T>) -> Vec<T> {
    v.split(',')
        .map(|x| f(x).unwrap_or_else(|| bad(x)))
        .collect()
}

fn bad(a: &str) -> ! {
    eprintln!(
        "oversubscribed: bad argument {a:?}; use --packets N --runs N --workers 1,2 --modes wait,poll,yield"
    );
    std::process::exit(2)
}

fn main() {
    let (mut packets, mut runs) = (2_000_000u64, 5usize);
    let mut workers = vec![1usize, 2];
    let mut modes = vec![Mode::Wait, Mode::Poll];
    // None: the distributor's own default (`distributor::default_wait_strategy`).
    let mut strategy = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it.next().map_or_else(|| bad(a), String::as_str);
        match a.as_str() {
            "--strategy" => {
                strategy = Some(match v {
                    "park" => WaitStrategy::default(),
                    "yield" => WaitStrategy::SpinYield { spins: 128 },
                    "spin" => WaitStrategy::Spin,
                    "yieldpark" => WaitStrategy::SpinPark {
                        spins: 0,
                        yields: 8,
                    },
                    _ => bad(v),
                })
            }
            "--packets" => packets = v.parse().unwrap_or_else(|_| bad(v)),
            "--runs" => runs = v.parse().unwrap_or_else(|_| bad(v)),
            "--workers" => workers = list(v, |x| x.parse().ok().filter(|&w| w > 0)),
            "--modes" => {
                modes = list(v, |x| match x {
                    "wait" => Some(Mode::Wait),
                    "poll" => Some(Mode::Poll),
                    "yield" => Some(Mode::Yield),
                    _ => None,
                })
            }
            _ => bad(a),
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("oversubscribed: {packets} packets, {runs} runs each, {cpus} CPUs, threads unpinned");
    let configs: Vec<(Mode, usize)> = modes
        .iter()
        .flat_map(|&m| workers.iter().map(move |&w| (m, w)))
        .collect();
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); configs.len()];
    let mut cpu: Vec<Vec<Duration>> = vec![Vec::new(); configs.len()];
    for _ in 0..runs {
        for (i, &(m, w)) in configs.iter().enumerate() {
            let (wall, used) = run(packets, w, m, strategy);
            times[i].push(wall);
            cpu[i].push(used);
        }
    }
    let name = |m: Mode| match m {
        Mode::Wait => "wait",
        Mode::Poll => "poll",
        Mode::Yield => "yield",
    };
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let mut medians = Vec::new();
    for (i, &(m, w)) in configs.iter().enumerate() {
        let v = &mut times[i];
        let med = median(v);
        let cpu_med = median(&mut cpu[i]);
        medians.push(med);
        println!(
            "{:5} {:2} workers: median {:7.3} s  range {:.3}-{:.3} s  CPU time median {:.3} s",
            name(m),
            w,
            med.as_secs_f64(),
            v[0].as_secs_f64(),
            v[v.len() - 1].as_secs_f64(),
            cpu_med.as_secs_f64()
        );
    }
    let (lo, hi) = (
        *workers.iter().min().expect("workers"),
        *workers.iter().max().expect("workers"),
    );
    for &m in &modes {
        let at = |w: usize| {
            let i = configs.iter().position(|&c| c == (m, w)).expect("config");
            medians[i].as_secs_f64()
        };
        println!(
            "{}: {hi} workers / {lo} worker(s) = {:.2}x",
            name(m),
            at(hi) / at(lo)
        );
    }
    // The waiting calls against the hand-written loop that yields, per worker count.
    let (Some(_), Some(_)) = (
        modes.iter().find(|&&m| m == Mode::Wait),
        modes.iter().find(|&&m| m == Mode::Yield),
    ) else {
        return;
    };
    for &w in &workers {
        let at = |m: Mode| {
            let i = configs.iter().position(|&c| c == (m, w)).expect("config");
            medians[i].as_secs_f64()
        };
        println!(
            "{w} workers: wait / yield = {:.2}x (wall time)",
            at(Mode::Wait) / at(Mode::Yield)
        );
    }
}
