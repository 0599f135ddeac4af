//! A sequential model of an ordered distributor (`distributor::new_ordered`), shared by
//! `tests/props/ordered.rs` and the `ordered` fuzz target: workers are driven by hand from
//! one thread, and the model checks
//! * acceptance: `distribute` accepts a prefix of its input (the rest stays, in order), and
//!   never more packets than the window has room for;
//! * order: `collect` gives packets back in the order they were accepted (packets that a
//!   worker rescheduled are accepted again, at a time the model does not track, and are
//!   left out of this check; packets a leaving worker hands back keep their place);
//! * exactly once: at the end every packet came back once (collected, counted dropped or
//!   lost, or given back with `NoWorkers` and accepted again later), and nothing is left
//!   in the window.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use flowline::distributor::{self, Config, FlushError, NoWorkers, Ordered, Ticket, Worker};
use flowline::wait::WaitError;

/// Marks a packet a worker rescheduled.
const RESCHED: u64 = 1 << 63;

#[derive(Clone, Debug)]
pub enum Op {
    /// Hand the distributor the pending packets plus this many new ones.
    Distribute(u8),
    /// Worker receives up to n packets.
    Recv(usize, usize),
    /// Worker hands back its oldest held packet as processed.
    Done(usize),
    /// Worker hands back its k-th held packet (by ticket): done (0), dropped (1) or
    /// rescheduled (2).
    At(usize, usize, u8),
    /// Worker drops its oldest held packet.
    Drop(usize),
    /// Worker reschedules its oldest held packet.
    Resched(usize),
    /// Worker leaves, handing back its first k held packets unprocessed.
    Leave(usize, usize),
    /// Worker's handle is dropped without leaving (its held packets are lost).
    Vanish(usize),
    /// A worker that left re-joins.
    Rejoin(usize),
    Collect,
    /// `distribute_wait` with no time to wait, of the pending packets plus this many new
    /// ones.
    DistributeWait(u8),
    /// `collect_wait` with no time to wait.
    CollectWait,
    /// Worker leaves as `Leave` does, and the distributor's next call is a `collect_wait`
    /// (whose own read finds the leave).
    LeaveThenWait(usize, usize),
    /// `flush` with no time to wait.
    Flush,
    /// `set_batching(packets, hold)`.
    Batching(usize, u32),
}

type Dist = distributor::Distributor<u64, Ordered<u64>>;

struct Model {
    workers: Vec<Option<Worker<u64>>>,
    /// Per worker: held packets and their tickets, oldest first.
    held: Vec<VecDeque<(u64, Ticket)>>,
    /// Packets the caller still has to hand in, in order.
    pending: Vec<u64>,
    next_id: u64,
    /// Acceptance rank of each packet whose place in the order the model knows.
    rank: HashMap<u64, u64>,
    next_rank: u64,
    /// Rank of the last packet collected (among those with a known rank).
    last_out: Option<u64>,
    collected: HashSet<u64>,
    /// Packets handed back dropped or held by a vanished worker.
    gone: HashSet<u64>,
    /// Packets handed back in any way (or lost): the others hold their window slots.
    handed: HashSet<u64>,
    window: usize,
}

fn fail<T>(msg: String) -> Result<T, String> {
    Err(msg)
}

impl Model {
    fn collect(&mut self, d: &mut Dist) -> Result<(), String> {
        let mut out = Vec::new();
        d.collect(&mut out);
        self.take(out)
    }

    fn take(&mut self, out: Vec<u64>) -> Result<(), String> {
        for p in out {
            if !self.collected.insert(p) {
                return fail(format!("packet {p:#x} collected twice"));
            }
            if self.gone.contains(&p) {
                return fail(format!(
                    "packet {p:#x} collected after it was dropped or lost"
                ));
            }
            if let Some(&r) = self.rank.get(&p) {
                if self.last_out.is_some_and(|l| l >= r) {
                    return fail(format!(
                        "packet {p:#x} (accepted {r}) collected after one accepted {:?}",
                        self.last_out
                    ));
                }
                self.last_out = Some(r);
            }
        }
        Ok(())
    }

    fn distribute(&mut self, d: &mut Dist, new: u8) -> Result<(), String> {
        self.distribute_by(d, new, |d, p| {
            d.distribute(p).map_err(|NoWorkers| NoWorkers)
        })
    }

    /// `distribute_wait` with no time to wait: a timeout accepted nothing.
    fn distribute_wait(&mut self, d: &mut Dist, new: u8) -> Result<(), String> {
        self.distribute_by(d, new, |d, p| match d.distribute_wait(p, Duration::ZERO) {
            Ok(n) => Ok(n),
            Err(WaitError::Timeout) => Ok(0),
            Err(_) => Err(NoWorkers),
        })
    }

    fn distribute_by(
        &mut self,
        d: &mut Dist,
        new: u8,
        call: impl FnOnce(&mut Dist, &mut Vec<u64>) -> Result<usize, NoWorkers>,
    ) -> Result<(), String> {
        for _ in 0..new {
            self.pending.push(self.next_id);
            self.next_id += 1;
        }
        let before = self.pending.clone();
        let room = self.window as u64 - (self.outstanding_ranks());
        match call(d, &mut self.pending) {
            Ok(n) => {
                if self.pending[..] != before[n..] {
                    return fail(format!(
                        "distribute accepted {n} but did not leave the rest in order"
                    ));
                }
                if n as u64 > room && before[..n].iter().all(|p| p & RESCHED == 0) {
                    return fail(format!("accepted {n} with room for {room}"));
                }
                for &p in &before[..n] {
                    self.rank.insert(p, self.next_rank);
                    self.next_rank += 1;
                }
            }
            Err(NoWorkers) => {
                // The backlog comes back in front of the input, unaccepted.
                if !self.pending.ends_with(&before) {
                    return fail("NoWorkers lost the input".into());
                }
                for p in &self.pending[..self.pending.len() - before.len()] {
                    self.rank.remove(p);
                }
            }
        }
        Ok(())
    }

    /// A lower bound on the window's use, for the admission check: the oldest accepted
    /// packet no worker has handed back holds its slot, and so does every packet accepted
    /// after it.
    fn outstanding_ranks(&self) -> u64 {
        let oldest_unreleased = self
            .rank
            .iter()
            .filter(|(p, _)| !self.handed.contains(p))
            .map(|(_, &r)| r)
            .min();
        oldest_unreleased.map_or(0, |o| self.next_rank - o)
    }

    fn hand_back(&mut self, w: usize, k: usize, kind: u8, d: &mut Dist) -> Result<(), String> {
        let Some(worker) = self.workers[w].as_mut() else {
            return Ok(());
        };
        if k >= self.held[w].len() {
            return Ok(());
        }
        let (p, t) = self.held[w].remove(k).expect("in range");
        self.handed.insert(p);
        let r = match kind {
            0 => worker.done_at(t, p).map_err(|_| ()),
            1 => {
                self.gone.insert(p);
                worker.drop_at(t, p).map_err(|_| ())
            }
            _ => {
                self.rank.remove(&p);
                worker.reschedule_at(t, p | RESCHED).map_err(|_| ())
            }
        };
        if r.is_err() {
            return fail(format!(
                "worker {w} could not hand back packet {p:#x} by its ticket"
            ));
        }
        let _ = d;
        Ok(())
    }
}

pub fn run(workers: usize, credit: usize, window: usize, ops: &[Op]) -> Result<(), String> {
    let (mut d, ws) =
        distributor::new_ordered::<u64>(Config::default().workers(workers).credit(credit), window)
            .map_err(|e| e.to_string())?;
    d.set_flush_naps(Duration::from_micros(50), Duration::from_micros(200));
    let n = ws.len();
    let mut m = Model {
        workers: ws.into_iter().map(Some).collect(),
        held: vec![VecDeque::new(); n],
        pending: Vec::new(),
        next_id: 0,
        rank: HashMap::new(),
        next_rank: 0,
        last_out: None,
        collected: HashSet::new(),
        gone: HashSet::new(),
        handed: HashSet::new(),
        window,
    };
    for op in ops {
        match *op {
            Op::Distribute(k) => m.distribute(&mut d, k % 16)?,
            Op::Recv(w, max) => {
                let w = w % n;
                if let Some(worker) = m.workers[w].as_mut() {
                    let first = worker.next_ticket();
                    let mut b = Vec::new();
                    worker.recv_burst(&mut b, max).map_err(|e| e.to_string())?;
                    for (i, p) in b.into_iter().enumerate() {
                        m.held[w].push_back((p, first.nth(i)));
                    }
                }
            }
            Op::Done(w) => m.hand_back(w % n, 0, 0, &mut d)?,
            Op::Drop(w) => m.hand_back(w % n, 0, 1, &mut d)?,
            Op::Resched(w) => m.hand_back(w % n, 0, 2, &mut d)?,
            Op::At(w, k, kind) => m.hand_back(w % n, k, kind % 3, &mut d)?,
            Op::Leave(w, k) | Op::LeaveThenWait(w, k) => {
                let w = w % n;
                if let Some(worker) = m.workers[w].take() {
                    let held: Vec<u64> = m.held[w].drain(..).map(|(p, _)| p).collect();
                    let k = k.min(held.len());
                    // The rest count as dropped.
                    m.gone.extend(held[k..].iter().copied());
                    m.handed.extend(held[k..].iter().copied());
                    worker
                        .leave(held[..k].to_vec())
                        .map_err(|_| format!("worker {w} could not leave"))?;
                }
                if let Op::LeaveThenWait(..) = op {
                    let mut out = Vec::new();
                    let _ = d.collect_wait(&mut out, Duration::ZERO);
                    m.take(out)?;
                }
            }
            Op::Vanish(w) => {
                let w = w % n;
                if let Some(worker) = m.workers[w].take() {
                    let lost: Vec<u64> = m.held[w].drain(..).map(|(p, _)| p).collect();
                    m.gone.extend(lost.iter().copied());
                    m.handed.extend(lost);
                    drop(worker);
                }
            }
            Op::Rejoin(w) => {
                let w = w % n;
                if m.workers[w].is_none() {
                    let worker = d.rejoin(w).map_err(|e| e.to_string())?;
                    m.workers[w] = Some(worker);
                }
            }
            Op::Collect => m.collect(&mut d)?,
            Op::DistributeWait(k) => m.distribute_wait(&mut d, k % 16)?,
            Op::CollectWait => {
                let mut out = Vec::new();
                let _ = d.collect_wait(&mut out, Duration::ZERO);
                m.take(out)?;
            }
            Op::Flush => {
                let mut out = Vec::new();
                let r = d.flush(&mut out, Duration::ZERO);
                m.take(out)?;
                if let Err(FlushError::NoWorkers(back)) = r {
                    // Given back unaccepted, at the front of what the caller holds.
                    for p in &back {
                        m.rank.remove(p);
                    }
                    let rest = std::mem::take(&mut m.pending);
                    m.pending = back;
                    m.pending.extend(rest);
                }
            }
            Op::Batching(b, h) => d.set_batching(b, h),
        }
    }
    // Drain: every worker back, everything handed back in order, until nothing is left.
    for w in 0..n {
        if m.workers[w].is_none() {
            m.workers[w] = Some(d.rejoin(w).map_err(|e| e.to_string())?);
        }
    }
    for round in 0.. {
        if round > 10_000 {
            return fail(format!(
                "no progress: {} in flight, {} waiting for order",
                d.in_flight(),
                d.waiting_for_order()
            ));
        }
        m.distribute(&mut d, 0)?;
        for w in 0..n {
            while !m.held[w].is_empty() {
                m.hand_back(w, 0, 0, &mut d)?;
            }
            let worker = m.workers[w].as_mut().expect("all back");
            let mut b = Vec::new();
            worker
                .recv_burst(&mut b, usize::MAX)
                .map_err(|e| e.to_string())?;
            m.handed.extend(b.iter().copied());
            worker
                .done_burst(&mut b)
                .map_err(|_| "done_burst".to_string())?;
        }
        m.collect(&mut d)?;
        if m.pending.is_empty() && d.in_flight() == 0 {
            break;
        }
    }
    let mut out = Vec::new();
    d.flush(&mut out, Duration::from_secs(10))
        .map_err(|e| format!("flush: {e:?}"))?;
    m.take(out)?;
    if d.waiting_for_order() != 0 {
        return fail(format!("{} left in the window", d.waiting_for_order()));
    }
    // Exactly once: every packet made was collected (a rescheduled one under its mark) or
    // is gone, never both.
    let stats = d.stats().snapshot();
    for id in 0..m.next_id {
        let out = m.collected.contains(&id) || m.collected.contains(&(id | RESCHED));
        let gone = m.gone.contains(&id) || m.gone.contains(&(id | RESCHED));
        if out == gone {
            return fail(format!(
                "packet {id}: collected {out}, dropped or lost {gone}"
            ));
        }
    }
    let gone = stats.get("dropped").unwrap_or(0) + stats.get("lost").unwrap_or(0);
    if gone != m.gone.len() as u64 {
        return fail(format!(
            "{gone} counted dropped or lost, the model says {}",
            m.gone.len()
        ));
    }
    Ok(())
}
