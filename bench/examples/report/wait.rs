//! `wait_*` scenarios: the blocking ring operations (`flowline::wait`).
//! - `wait_spsc_burst1`, `wait_spsc_burst32`: throughput while busy, the waiting API
//!   (`push_wait` / `pop_wait`, default strategy) against the polling one (`push` / `pop`
//!   spinning on failure), same ring, same shape; target within 3%. Both bursts also
//!   `flowline_waitable`: `push` / `pop` on a `waitable` ring, which separates what the
//!   waitable ring's publications cost (the sleeper check) from what the waiting calls add.
//! - `wait_wake_latency`: the producer sends one timestamp every 300 us into an empty
//!   channel whose consumer is asleep by then; the consumer's delay from send to wake-up,
//!   p50 and p99, against `std::sync::mpsc::sync_channel` and `crossbeam_channel::bounded`,
//!   and the platform's floor `park` (a `Mutex<VecDeque>` with `thread::park` /
//!   `unpark`, no spinning: what every blocking channel's wake-up pays at least).
//! - `wait_idle_cpu`: CPU time a consumer spends waiting on an empty ring (the thread's own
//!   `getrusage(RUSAGE_THREAD)`), as % of one CPU: the default park strategy, and
//!   spin-then-yield for contrast; target at most 1% for park.
//! - `wait_flush_idle_cpu`: the same for `Distributor::flush` waiting on a worker that holds
//!   its one packet for the whole span (the flushing thread's CPU time, % of one CPU).
//! - `wait_flush_handback`: a flush napping on a worker that holds one packet; after 20 ms
//!   the worker reschedules it (a hand-back on the control ring), receives it again and
//!   completes it; the time from the reschedule to the flush's return (two wake-ups and a
//!   routing), p50 and p90 over the rounds.
//! - `wait_async_wake_latency`: as `wait_wake_latency`, with the consumer awaiting the item
//!   on a tokio current-thread runtime (`pop_async` against tokio's `mpsc::Receiver::recv`;
//!   the producer is a plain thread: `push_wait` against `try_send`), and `pop_async` under
//!   `flowline::wait::block_on` on a plain thread.
//! - `wait_async_pingpong_current`, `wait_async_pingpong_multi`: one item's round trip
//!   between two async tasks over two rings (`push_async` / `pop_async`) against two tokio
//!   `mpsc` channels, on a current-thread runtime (both tasks on one thread) and on a
//!   multi-thread runtime of 2 workers (not pinned: tokio places its workers); ns.

use std::hint::spin_loop;
use std::time::{Duration, Instant};

use flowline::fifo::{spsc, Wait};
use flowline::wait::WaitStrategy;

use crate::harness::{pair, Impl, Metric, Report};
use crate::spsc::{single, Placement, RING};

const FOREVER: Duration = Duration::MAX;

/// Bursts of 32 through a 1024-slot ring: `push` sends a burst (returns how many went),
/// `pop` takes up to 32 into the vector (returns how many came). Generic, as
/// `spsc::single`: each compiles into its loop like a direct call.
fn burst32<P: Send, C: Send>(
    n: u64,
    (mut tx, mut rx): (P, C),
    push: impl Fn(&mut P, &[u64]) -> usize + Send,
    pop: impl Fn(&mut C, &mut Vec<u64>) -> usize + Send,
) -> f64 {
    const B: usize = 32;
    let (_, (elapsed, sum)) = pair(
        move || {
            let mut buf = [0u64; B];
            let mut next = 0u64;
            while next < n {
                let k = (n - next).min(B as u64) as usize;
                for (j, b) in buf[..k].iter_mut().enumerate() {
                    *b = next + j as u64;
                }
                let sent = push(&mut tx, &buf[..k]);
                if sent == 0 {
                    spin_loop();
                }
                next += sent as u64;
            }
        },
        move || {
            let t = Instant::now();
            let mut out = Vec::with_capacity(B);
            let (mut got, mut sum) = (0u64, 0u64);
            while got < n {
                out.clear();
                let k = pop(&mut rx, &mut out);
                if k == 0 {
                    spin_loop();
                }
                got += k as u64;
                sum = out.iter().fold(sum, |s, &v| s.wrapping_add(v));
            }
            (t.elapsed(), sum)
        },
    );
    assert_eq!(sum, n * (n - 1) / 2);
    n as f64 / elapsed.as_secs_f64() / 1e6
}

/// The platform's wake-up floor for `wait_wake_latency`: the leanest blocking hand-off,
/// a `Mutex<VecDeque>` and `thread::park` / `unpark`, no spinning (std's and crossbeam's
/// channels park the same way after spinning a little). Every implementation's wake-up
/// pays this; what it adds on top is its own cost.
mod park_channel {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex, OnceLock};
    use std::thread::Thread;
    use std::time::Instant;

    #[derive(Default)]
    struct Shared {
        /// The items and whether the sender is gone.
        q: Mutex<(VecDeque<Instant>, bool)>,
        /// The receiving thread, registered under `q`'s lock before its first park.
        rx: OnceLock<Thread>,
    }

    pub struct Sender(Arc<Shared>);
    pub struct Receiver(Arc<Shared>);

    pub fn channel() -> (Sender, Receiver) {
        let s = Arc::new(Shared::default());
        (Sender(Arc::clone(&s)), Receiver(s))
    }

    impl Sender {
        pub fn send(&mut self, v: Instant) {
            self.0.q.lock().unwrap().0.push_back(v);
            // A receiver that found the queue empty registered under the lock before this
            // push took it; one that has not looked yet will see the item.
            if let Some(t) = self.0.rx.get() {
                t.unpark();
            }
        }
    }

    impl Drop for Sender {
        fn drop(&mut self) {
            self.0.q.lock().unwrap().1 = true;
            if let Some(t) = self.0.rx.get() {
                t.unpark();
            }
        }
    }

    impl Receiver {
        pub fn recv(&mut self) -> Option<Instant> {
            loop {
                {
                    let mut g = self.0.q.lock().unwrap();
                    if let Some(v) = g.0.pop_front() {
                        return Some(v);
                    }
                    if g.1 {
                        return None;
                    }
                    self.0.rx.get_or_init(std::thread::current);
                }
                // An unpark since the check above leaves a token: this returns at once.
                std::thread::park();
            }
        }
    }
}

/// p50 and p99 wake-up latency in us over `rounds` sends spaced `gap` apart.
fn latency<S: Send, R: Send>(
    rounds: usize,
    gap: Duration,
    (tx, rx): (S, R),
    send: fn(&mut S, Instant),
    recv: fn(&mut R) -> Option<Instant>,
) -> Vec<f64> {
    let (_, mut lat) = pair(
        move || {
            let mut tx = tx;
            for _ in 0..rounds {
                std::thread::sleep(gap);
                send(&mut tx, Instant::now());
            }
        },
        move || {
            let mut rx = rx;
            let mut lat = Vec::with_capacity(rounds);
            while let Some(t) = recv(&mut rx) {
                lat.push(t.elapsed().as_secs_f64() * 1e6);
            }
            lat
        },
    );
    assert_eq!(lat.len(), rounds);
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize];
    vec![at(0.5), at(0.99)]
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

/// One item's round trip between two spawned tasks on `rt` over two flowline rings: ns.
/// (Spawned, as in a server: on a current-thread runtime the `block_on` future itself is
/// polled only when the spawned tasks are idle, so a partner waiting on it spends its
/// yields and registers every round.)
fn async_pingpong_flowline(rt: &tokio::runtime::Runtime, rounds: u64) -> f64 {
    rt.block_on(async move {
        let (mut atx, mut arx) = spsc::waitable::<u64>(RING).unwrap();
        let (mut btx, mut brx) = spsc::waitable::<u64>(RING).unwrap();
        let pong = tokio::spawn(async move {
            for _ in 0..rounds {
                let v = arx.pop_async().await.unwrap();
                btx.push_async(v).await.unwrap();
            }
        });
        let ping = tokio::spawn(async move {
            let t = Instant::now();
            for i in 0..rounds {
                atx.push_async(i).await.unwrap();
                assert_eq!(brx.pop_async().await, Ok(i));
            }
            t.elapsed()
        });
        let elapsed = ping.await.unwrap();
        pong.await.unwrap();
        elapsed.as_nanos() as f64 / rounds as f64
    })
}

/// The same over two tokio `mpsc` channels.
fn async_pingpong_tokio(rt: &tokio::runtime::Runtime, rounds: u64) -> f64 {
    rt.block_on(async move {
        let (atx, mut arx) = tokio::sync::mpsc::channel::<u64>(RING);
        let (btx, mut brx) = tokio::sync::mpsc::channel::<u64>(RING);
        let pong = tokio::spawn(async move {
            for _ in 0..rounds {
                let v = arx.recv().await.unwrap();
                btx.send(v).await.unwrap();
            }
        });
        let ping = tokio::spawn(async move {
            let t = Instant::now();
            for i in 0..rounds {
                atx.send(i).await.unwrap();
                assert_eq!(brx.recv().await, Some(i));
            }
            t.elapsed()
        });
        let elapsed = ping.await.unwrap();
        pong.await.unwrap();
        elapsed.as_nanos() as f64 / rounds as f64
    })
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage writes one `rusage` into the zeroed struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: RUSAGE_THREAD with a valid out pointer.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) } == 0 {
            let tv = |t: libc::timeval| {
                Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
            };
            return tv(u.ru_utime) + tv(u.ru_stime);
        }
    }
    Duration::ZERO
}

/// % of one CPU used by a consumer waiting `span` on an empty ring with `strategy`.
fn idle_cpu(span: Duration, strategy: WaitStrategy) -> f64 {
    let (tx, mut rx) = spsc::waitable::<u64>(RING).unwrap();
    rx.set_wait_strategy(strategy);
    let (pct, ()) = pair(
        move || {
            let c0 = thread_cpu();
            let t = Instant::now();
            let r = rx.pop_wait(span);
            assert!(r.is_err(), "nothing was sent");
            let used = thread_cpu() - c0;
            100.0 * used.as_secs_f64() / t.elapsed().as_secs_f64()
        },
        move || {
            // Keep the producer alive for the whole wait.
            std::thread::sleep(span + Duration::from_millis(50));
            drop(tx);
        },
    );
    pct
}

/// % of one CPU used by `Distributor::flush` while the only worker holds its packet for
/// `span` before handing it back.
fn flush_idle_cpu(span: Duration) -> f64 {
    use flowline::distributor::{self, Config};
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    let mut w = ws.pop().unwrap();
    d.distribute(&mut vec![7]).unwrap();
    let (pct, _worker) = pair(
        move || {
            let mut out = Vec::new();
            let c0 = thread_cpu();
            let t = Instant::now();
            d.flush(&mut out, FOREVER).unwrap();
            assert_eq!(out, [7]);
            let used = thread_cpu() - c0;
            100.0 * used.as_secs_f64() / t.elapsed().as_secs_f64()
        },
        move || {
            let mut got = Vec::new();
            w.recv_burst_wait(&mut got, 8, FOREVER).unwrap();
            std::thread::sleep(span);
            w.done_burst(&mut got).unwrap();
            w // kept until the flush has returned: a dropped worker is a leave
        },
    );
    pct
}

/// p50 and p90, in us, of the time from a worker's reschedule to the return of a flush that
/// was napping, over `rounds` rounds.
fn flush_handback(rounds: usize) -> Vec<f64> {
    use flowline::distributor::{self, Config};
    use std::sync::mpsc::sync_channel;
    let (mut d, mut ws) =
        distributor::new(Config::default().workers(1).credit(8), |p: &u64| *p).unwrap();
    let mut w = ws.pop().unwrap();
    let (stamp_tx, stamp_rx) = sync_channel::<Instant>(1);
    let (mut lat, _w) = pair(
        move || {
            let mut lat = Vec::with_capacity(rounds);
            let mut out = Vec::new();
            for _ in 0..rounds {
                d.distribute(&mut vec![7]).unwrap();
                d.flush(&mut out, FOREVER).unwrap();
                let end = Instant::now();
                let t0 = stamp_rx.recv().unwrap();
                lat.push(end.duration_since(t0).as_secs_f64() * 1e6);
                assert_eq!(std::mem::take(&mut out), [7]);
            }
            lat
        },
        move || {
            let mut got = Vec::new();
            for _ in 0..rounds {
                w.recv_burst_wait(&mut got, 8, FOREVER).unwrap();
                // Long past the flush's spinning: it naps by now.
                std::thread::sleep(Duration::from_millis(20));
                stamp_tx.send(Instant::now()).unwrap();
                w.reschedule(got.pop().unwrap())
                    .map_err(|_| "reschedule")
                    .unwrap();
                w.recv_burst_wait(&mut got, 8, FOREVER).unwrap();
                w.done_burst(&mut got).unwrap();
            }
            w // kept until the flushes are over: a dropped worker is a leave
        },
    );
    lat.sort_by(f64::total_cmp);
    let at = |q: f64| lat[((lat.len() - 1) as f64 * q).round() as usize];
    vec![at(0.5), at(0.9)]
}

/// A waitable ring of [`RING`] slots advanced by the repetition's layout, as the plain
/// ring of `spsc::flowline_single` is, so the rows compare the same slots.
fn waitable_ring() -> (spsc::Producer<u64, Wait>, spsc::Consumer<u64, Wait>) {
    let (mut tx, mut rx) = spsc::waitable::<u64>(RING).unwrap();
    crate::spsc::advance(|v| tx.push(v).is_ok(), || rx.pop());
    rx.release_pending();
    (tx, rx)
}

pub fn run(r: &mut Report) {
    let thr = [Metric {
        suffix: "",
        unit: "Mitems/s",
        higher_is_better: true,
    }];
    let n1: u64 = if r.quick { 100_000 } else { 8 << 20 };
    r.scenario(
        "wait_spsc_burst1",
        &thr,
        vec![
            (
                "flowline_wait",
                Box::new(move || {
                    let (tx, rx) = waitable_ring();
                    vec![single(
                        n1,
                        tx,
                        rx,
                        Placement::Stack,
                        |t, v| t.push_wait(v, FOREVER).is_ok(),
                        |r| r.pop_wait(FOREVER).ok(),
                    )]
                }),
            ),
            (
                "flowline",
                Box::new(move || {
                    vec![crate::spsc::flowline_single(
                        n1,
                        Placement::Stack,
                        crate::spsc::Single::Default,
                    )]
                }),
            ),
            (
                "flowline_waitable",
                Box::new(move || {
                    let (tx, rx) = waitable_ring();
                    vec![single(
                        n1,
                        tx,
                        rx,
                        Placement::Stack,
                        |t, v| t.push(v).is_ok(),
                        |r| r.pop(),
                    )]
                }),
            ),
        ],
        &[
            ("flowline_wait", "flowline"),
            ("flowline_waitable", "flowline"),
        ],
    );
    let n32: u64 = if r.quick { 100_000 } else { 16 << 20 };
    r.scenario(
        "wait_spsc_burst32",
        &thr,
        vec![
            (
                "flowline_wait",
                Box::new(move || {
                    vec![burst32(
                        n32,
                        spsc::waitable::<u64>(RING).unwrap(),
                        |t, b| t.push_burst_wait(b, FOREVER).unwrap(),
                        |r, out| r.pop_burst_wait(out, 32, FOREVER).unwrap(),
                    )]
                }),
            ),
            (
                "flowline_wait_spin",
                Box::new(move || {
                    let (mut tx, mut rx) = spsc::waitable::<u64>(RING).unwrap();
                    tx.set_wait_strategy(WaitStrategy::Spin);
                    rx.set_wait_strategy(WaitStrategy::Spin);
                    vec![burst32(
                        n32,
                        (tx, rx),
                        |t, b| t.push_burst_wait(b, FOREVER).unwrap(),
                        |r, out| r.pop_burst_wait(out, 32, FOREVER).unwrap(),
                    )]
                }),
            ),
            (
                "flowline",
                Box::new(move || {
                    vec![burst32(
                        n32,
                        spsc::channel::<u64>(RING).unwrap(),
                        |t, b| t.push_burst(b),
                        |r, out| r.pop_burst_into(out, 32),
                    )]
                }),
            ),
            (
                "flowline_waitable",
                Box::new(move || {
                    vec![burst32(
                        n32,
                        spsc::waitable::<u64>(RING).unwrap(),
                        |t, b| t.push_burst(b),
                        |r, out| r.pop_burst_into(out, 32),
                    )]
                }),
            ),
        ],
        &[
            ("flowline_wait", "flowline"),
            ("flowline_wait_spin", "flowline"),
            ("flowline_waitable", "flowline"),
        ],
    );

    let rounds = if r.quick { 20 } else { 2000 };
    let gap = Duration::from_micros(300);
    let lat = [
        Metric {
            suffix: "",
            unit: "us_p50",
            higher_is_better: false,
        },
        Metric {
            suffix: "_p99",
            unit: "us",
            higher_is_better: false,
        },
    ];
    let impls: Vec<Impl> = vec![
        (
            "flowline",
            Box::new(move || {
                latency(
                    rounds,
                    gap,
                    spsc::waitable::<Instant>(RING).unwrap(),
                    |t, v| t.push_wait(v, FOREVER).unwrap(),
                    |r| r.pop_wait(FOREVER).ok(),
                )
            }),
        ),
        (
            "std",
            Box::new(move || {
                latency(
                    rounds,
                    gap,
                    std::sync::mpsc::sync_channel::<Instant>(RING),
                    |t, v| t.send(v).unwrap(),
                    |r| r.recv().ok(),
                )
            }),
        ),
        (
            "crossbeam",
            Box::new(move || {
                latency(
                    rounds,
                    gap,
                    crossbeam_channel::bounded::<Instant>(RING),
                    |t, v| t.send(v).unwrap(),
                    |r| r.recv().ok(),
                )
            }),
        ),
        (
            "park",
            Box::new(move || {
                latency(
                    rounds,
                    gap,
                    park_channel::channel(),
                    park_channel::Sender::send,
                    park_channel::Receiver::recv,
                )
            }),
        ),
    ];
    r.scenario(
        "wait_wake_latency",
        &lat,
        impls,
        &[
            ("flowline", "std"),
            ("flowline", "crossbeam"),
            ("flowline", "park"),
            ("std", "park"),
            ("crossbeam", "park"),
        ],
    );

    let span = if r.quick {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(2)
    };
    r.scenario(
        "wait_idle_cpu",
        &[Metric {
            suffix: "",
            unit: "pct_cpu",
            higher_is_better: false,
        }],
        vec![
            (
                "flowline_park",
                Box::new(move || vec![idle_cpu(span, WaitStrategy::default())]),
            ),
            (
                "flowline_yield",
                Box::new(move || vec![idle_cpu(span, WaitStrategy::SpinYield { spins: 128 })]),
            ),
        ],
        &[],
    );
    r.scenario(
        "wait_flush_idle_cpu",
        &[Metric {
            suffix: "",
            unit: "pct_cpu",
            higher_is_better: false,
        }],
        vec![("flowline", Box::new(move || vec![flush_idle_cpu(span)]))],
        &[],
    );
    let rounds = if r.quick { 3 } else { 40 };
    r.scenario(
        "wait_flush_handback",
        &[
            Metric {
                suffix: "_p50",
                unit: "us",
                higher_is_better: false,
            },
            Metric {
                suffix: "_p90",
                unit: "us",
                higher_is_better: false,
            },
        ],
        vec![("flowline", Box::new(move || flush_handback(rounds)))],
        &[],
    );

    let rounds = if r.quick { 20 } else { 2000 };
    type Rt = tokio::runtime::Runtime;
    let impls: Vec<Impl> = vec![
        (
            "flowline",
            Box::new(move || {
                let (tx, rx) = spsc::waitable::<Instant>(RING).unwrap();
                latency(
                    rounds,
                    gap,
                    (tx, (current_thread(), rx)),
                    |t, v| t.push_wait(v, FOREVER).unwrap(),
                    |(rt, rx): &mut (Rt, spsc::Consumer<Instant, Wait>)| {
                        rt.block_on(rx.pop_async()).ok()
                    },
                )
            }),
        ),
        (
            "flowline_block_on",
            Box::new(move || {
                latency(
                    rounds,
                    gap,
                    spsc::waitable::<Instant>(RING).unwrap(),
                    |t, v| t.push_wait(v, FOREVER).unwrap(),
                    |rx| flowline::wait::block_on(rx.pop_async()).ok(),
                )
            }),
        ),
        (
            "tokio",
            Box::new(move || {
                let (tx, rx) = tokio::sync::mpsc::channel::<Instant>(RING);
                latency(
                    rounds,
                    gap,
                    (tx, (current_thread(), rx)),
                    |t, v| t.try_send(v).unwrap(),
                    |(rt, rx): &mut (Rt, tokio::sync::mpsc::Receiver<Instant>)| {
                        rt.block_on(rx.recv())
                    },
                )
            }),
        ),
    ];
    r.scenario(
        "wait_async_wake_latency",
        &lat,
        impls,
        &[("flowline", "tokio"), ("flowline_block_on", "tokio")],
    );

    let rounds: u64 = if r.quick { 1000 } else { 200_000 };
    let ns = [Metric {
        suffix: "",
        unit: "ns",
        higher_is_better: false,
    }];
    r.scenario(
        "wait_async_pingpong_current",
        &ns,
        vec![
            (
                "flowline",
                Box::new(move || vec![async_pingpong_flowline(&current_thread(), rounds)]),
            ),
            (
                "tokio",
                Box::new(move || vec![async_pingpong_tokio(&current_thread(), rounds)]),
            ),
        ],
        &[("flowline", "tokio")],
    );
    r.scenario(
        "wait_async_pingpong_multi",
        &ns,
        vec![
            (
                "flowline",
                Box::new(move || vec![async_pingpong_flowline(&multi_thread(), rounds)]),
            ),
            (
                "tokio",
                Box::new(move || vec![async_pingpong_tokio(&multi_thread(), rounds)]),
            ),
        ],
        &[("flowline", "tokio")],
    );
}
