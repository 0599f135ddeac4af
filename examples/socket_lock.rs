//! The socket-lock experiment: where the time goes when two threads share a locked socket.
//!
//! ```text
//! cargo run --release --example socket_lock -- [--secs S] [--window W]
//! ```
//!
//! A "softirq" thread delivers requests into a socket's receive queue and collects the
//! responses from its send queue; an "application" thread reads each request and writes a
//! response. Both take the socket lock for every queue operation, as `lock_sock` and
//! `tcp_v4_rcv` do in the kernel; `W` transactions (request + response) are in flight at a
//! time. Each way of sharing the socket runs with both threads bound to one CPU, then to
//! two CPUs, and prints transactions per second and the lockmeter table of its lock sites:
//!
//! - `spinlock`: the socket behind a metered test-and-test-and-set spinlock;
//! - `mutex`: behind a metered `std::sync::Mutex`;
//! - `ring`: the flowline way, no lock: one SPSC ring per direction.
//!
//! A side with nothing to do yields its CPU in every variant (on one CPU, the other thread
//! needs it).

use std::collections::VecDeque;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use flowline::fifo::spsc;
use flowline::lockmeter::{self, format_table, MeteredMutex, MeteredSpinLock};
use flowline::topology::pin_current_thread;

/// A socket's two queues, as one locked structure.
#[derive(Default)]
struct Socket {
    receive: VecDeque<u64>,
    send: VecDeque<u64>,
}

/// One way of sharing the socket: the four queue operations, each taking the lock (or not).
trait Shared: Sync {
    fn deliver(&self, v: u64);
    fn collect(&self) -> Option<u64>;
    fn read(&self) -> Option<u64>;
    fn respond(&self, v: u64);
}

struct Spin(MeteredSpinLock<Socket>);
impl Shared for Spin {
    fn deliver(&self, v: u64) {
        self.0.lock().receive.push_back(v);
    }
    fn collect(&self) -> Option<u64> {
        self.0.lock().send.pop_front()
    }
    fn read(&self) -> Option<u64> {
        self.0.lock().receive.pop_front()
    }
    fn respond(&self, v: u64) {
        self.0.lock().send.push_back(v);
    }
}

struct Mx(MeteredMutex<Socket>);
impl Shared for Mx {
    fn deliver(&self, v: u64) {
        self.0.lock().unwrap().receive.push_back(v);
    }
    fn collect(&self) -> Option<u64> {
        self.0.lock().unwrap().send.pop_front()
    }
    fn read(&self) -> Option<u64> {
        self.0.lock().unwrap().receive.pop_front()
    }
    fn respond(&self, v: u64) {
        self.0.lock().unwrap().send.push_back(v);
    }
}

fn pin(cpu: usize) {
    if let Err(e) = pin_current_thread(cpu) {
        eprintln!("# could not pin to CPU {cpu}: {e}; figures are unpinned");
    }
}

/// One side's queue operations: the softirq side delivers requests (`false`: no room now)
/// and collects responses; the application side reads requests and responds.
struct Ops<S, A> {
    deliver: fn(&mut S, u64) -> bool,
    collect: fn(&mut S) -> Option<u64>,
    read: fn(&mut A) -> Option<u64>,
    respond: fn(&mut A, u64),
}

/// Runs the request/response loop for `secs` with the softirq side (`soft`) on `cpus.0` and
/// the application (`app`) on `cpus.1`, `window` transactions in flight; returns
/// transactions per second. A side with nothing to do yields.
fn run<S: Send, A: Send>(
    (mut soft, mut app): (S, A),
    ops: Ops<S, A>,
    cpus: (usize, usize),
    window: u64,
    secs: f64,
) -> f64 {
    let stop = AtomicBool::new(false);
    let start = Barrier::new(2);
    let (done, elapsed) = std::thread::scope(|sc| {
        let (start, stop, ops) = (&start, &stop, &ops);
        let softirq = sc.spawn(move || {
            pin(cpus.0);
            start.wait();
            let t = Instant::now();
            let (mut sent, mut done) = (0u64, 0u64);
            while t.elapsed().as_secs_f64() < secs {
                while sent - done < window && (ops.deliver)(&mut soft, sent) {
                    sent += 1;
                }
                match (ops.collect)(&mut soft) {
                    Some(v) => {
                        assert_eq!(v, done, "responses in order");
                        done += 1;
                    }
                    None => std::thread::yield_now(),
                }
            }
            stop.store(true, Ordering::Relaxed);
            (done, t.elapsed())
        });
        sc.spawn(move || {
            pin(cpus.1);
            start.wait();
            while !stop.load(Ordering::Relaxed) {
                match (ops.read)(&mut app) {
                    Some(v) => (ops.respond)(&mut app, v),
                    None => std::thread::yield_now(),
                }
            }
        });
        softirq.join().unwrap()
    });
    done as f64 / elapsed.as_secs_f64()
}

/// The loop over a locked socket: both sides take the lock for every queue operation.
fn run_locked(s: &dyn Shared, cpus: (usize, usize), window: u64, secs: f64) -> f64 {
    let ops = Ops {
        deliver: |s: &mut &dyn Shared, v| {
            s.deliver(v);
            true
        },
        collect: |s: &mut &dyn Shared| s.collect(),
        read: |s: &mut &dyn Shared| s.read(),
        respond: |s: &mut &dyn Shared, v| s.respond(v),
    };
    run((s, s), ops, cpus, window, secs)
}

/// The same loop over two SPSC rings (no lock).
fn run_ring(cpus: (usize, usize), window: u64, secs: f64) -> f64 {
    let (req_tx, req_rx) = spsc::channel::<u64>(window as usize).unwrap();
    let (resp_tx, resp_rx) = spsc::channel::<u64>(window as usize).unwrap();
    type Soft = (spsc::Producer<u64>, spsc::Consumer<u64>);
    let ops = Ops {
        deliver: |s: &mut Soft, v| s.0.push(v).is_ok(),
        collect: |s: &mut Soft| s.1.pop(),
        read: |a: &mut Soft| a.1.pop(),
        respond: |a: &mut Soft, v| {
            while a.0.push(v).is_err() {
                spin_loop();
            }
        },
    };
    run(
        ((req_tx, resp_rx), (resp_tx, req_rx)),
        ops,
        cpus,
        window,
        secs,
    )
}

fn main() {
    let mut secs = 1.0f64;
    let mut window = 16u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |what: &str| -> f64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .filter(|&v: &f64| v > 0.0)
                .unwrap_or_else(|| {
                    eprintln!("{what} takes a positive number");
                    std::process::exit(2)
                })
        };
        match a.as_str() {
            "--secs" => secs = num("--secs"),
            "--window" => window = num("--window") as u64,
            _ => {
                eprintln!("usage: socket_lock [--secs S] [--window W]");
                std::process::exit(2)
            }
        }
    }
    let cpus = flowline::topology::available_cpus();
    println!(
        "socket lock experiment: {window} transactions in flight, {secs} s per case, {cpus} CPUs\n"
    );
    let placements = [("same CPU", (0, 0)), ("two CPUs", (0, 1.min(cpus - 1)))];
    let mut rows = Vec::new();
    for (place, pair) in placements {
        for kind in ["spinlock", "mutex", "ring"] {
            let name: &'static str =
                Box::leak(format!("socket ({kind}, {place})").into_boxed_str());
            let tps = match kind {
                "spinlock" => run_locked(
                    &Spin(MeteredSpinLock::named(name, Socket::default())),
                    pair,
                    window,
                    secs,
                ),
                "mutex" => run_locked(
                    &Mx(MeteredMutex::named(name, Socket::default())),
                    pair,
                    window,
                    secs,
                ),
                _ => run_ring(pair, window, secs),
            };
            println!("{kind:>8}, {place}: {:.2} M transactions/s", tps / 1e6);
            if kind != "ring" {
                let mine: Vec<_> = lockmeter::snapshot()
                    .into_iter()
                    .filter(|s| s.name == name)
                    .collect();
                print!("{}", format_table(&mine));
            } else {
                println!("(no lock: one SPSC ring per direction)");
            }
            println!();
            rows.push((kind, place, tps));
        }
    }
    println!("summary (M transactions/s):");
    println!("| sharing | same CPU | two CPUs |");
    println!("| --- | ---: | ---: |");
    for kind in ["spinlock", "mutex", "ring"] {
        let get = |p: &str| {
            rows.iter()
                .find(|r| r.0 == kind && r.1 == p)
                .map_or(0.0, |r| r.2 / 1e6)
        };
        println!(
            "| {kind} | {:.2} | {:.2} |",
            get("same CPU"),
            get("two CPUs")
        );
    }
}
