//! A sequential model of the distributor, shared by `tests/props/distributor.rs` and
//! the `distributor` fuzz target: workers are driven by hand from one thread, and after
//! every operation the model checks
//! * affinity: a worker receives a packet of a flow only while no other worker holds one;
//! * order: each flow's packets are received in the order the distributor took them on
//!   (accepted from input, or rescheduled into the flow);
//! * backpressure: packets left with the caller keep their order, and once a packet of a
//!   flow is left, every later packet of that flow in the burst is left too;
//! * exactly once: at the end every packet came back once, returned or counted dropped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use flowline::distributor::{self, Config, JoinError, NoWorkers, Ticket, Worker};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pkt {
    pub flow: u64,
    pub id: u64,
}

#[derive(Clone, Debug)]
pub enum Op {
    /// Hand the distributor the pending packets plus new ones of these flows.
    Distribute(Vec<u8>),
    /// Worker receives up to n packets.
    Recv(usize, usize),
    /// Worker hands back its oldest held packet as processed.
    Done(usize),
    /// Worker drops its oldest held packet.
    Drop(usize),
    /// Worker re-tags its oldest held packet into this flow and reschedules it.
    Resched(usize, u8),
    /// Worker hands back, by its ticket, the oldest held packet of the flow of its k-th
    /// held packet (not the oldest held, in general): done (0), dropped (1), rescheduled
    /// into the given flow (2), or done with what waits on the worker published (3).
    AnyOrder(usize, usize, u8, u8),
    /// Worker leaves, handing back its first k held packets unprocessed (the rest count as
    /// dropped).
    Leave(usize, usize),
    /// A worker that left re-joins.
    Rejoin(usize),
    /// A worker is added at run time (taking the lowest removed id, else a new one).
    Add,
    /// A worker that left is removed for good.
    Remove(usize),
    Collect,
    /// The distributor's batching changes (`set_batching(packets, hold)`).
    Batching(usize, u32),
}

pub const FLOWS: u64 = 6;

struct Model {
    /// Per flow: ids the distributor owns, in the order they must be received.
    order: HashMap<u64, VecDeque<u64>>,
    /// Per worker: packets received and not handed back, oldest first.
    held: Vec<VecDeque<Pkt>>,
    /// Per worker, in step with `held`: each held packet's ticket.
    tickets: Vec<VecDeque<Ticket>>,
    returned: HashSet<u64>,
    done_ids: HashSet<u64>,
    dropped: u64,
    /// Per worker: rescheduled packets (id, new flow) the distributor has not read yet. A
    /// reschedule joins its new flow when the distributor reads it from the worker's
    /// return ring; the distributor reads the rings in worker order.
    unread_resched: Vec<VecDeque<(u64, u64)>>,
    /// Per worker: processed packets handed back and not read yet.
    unread_done: Vec<usize>,
    /// Per worker: the tickets of packets handed back by `done_at` past an older packet
    /// held, waiting on the worker (not published, not counted as returned yet).
    staged: Vec<Vec<Ticket>>,
    /// Processed packets read by the distributor and not yet collected.
    waiting: usize,
    /// Per worker id: removed for good (and not added again).
    removed: Vec<bool>,
    /// What the workers did, for the registry's totals: received, returned (done).
    received: u64,
    done: u64,
}

impl Model {
    /// Worker `w`'s waiting packets that are published now: all of them, or those with no
    /// older packet held any more.
    fn publish(&mut self, w: usize, all: bool) {
        let oldest = self.tickets[w].front().copied();
        let before = self.staged[w].len();
        self.staged[w].retain(|&t| !all && oldest.is_some_and(|o| o < t));
        let n = before - self.staged[w].len();
        self.unread_done[w] += n;
        self.done += n as u64;
    }

    /// What the distributor learns when it reads the return rings.
    fn read_returns(&mut self) {
        for w in 0..self.held.len() {
            for (id, flow) in self.unread_resched[w].drain(..) {
                self.order.entry(flow).or_default().push_back(id);
            }
            self.waiting += std::mem::take(&mut self.unread_done[w]);
        }
    }
}

pub fn run(workers: usize, credit: usize, ops: &[Op]) -> Result<(), String> {
    let (mut d, ws) = distributor::new(
        Config::default().workers(workers).credit(credit),
        |p: &Pkt| p.flow,
    )
    .map_err(|e| e.to_string())?;
    let mut ws: Vec<Option<Worker<Pkt>>> = ws.into_iter().map(Some).collect();
    let mut m = Model {
        order: HashMap::new(),
        held: vec![VecDeque::new(); workers],
        tickets: vec![VecDeque::new(); workers],
        returned: HashSet::new(),
        done_ids: HashSet::new(),
        dropped: 0,
        unread_resched: vec![VecDeque::new(); workers],
        unread_done: vec![0; workers],
        staged: vec![Vec::new(); workers],
        waiting: 0,
        removed: vec![false; workers],
        received: 0,
        done: 0,
    };
    let mut pending: Vec<Pkt> = Vec::new();
    let mut next_id = 0u64;
    let mut out = Vec::new();
    let check = |c: bool, what: &str| if c { Ok(()) } else { Err(what.to_string()) };

    for op in ops {
        match op {
            Op::Distribute(flows) => {
                for f in flows {
                    pending.push(Pkt {
                        flow: u64::from(*f) % FLOWS,
                        id: next_id,
                    });
                    next_id += 1;
                }
                let before = pending.clone();
                m.read_returns(); // distribute reads the return rings first
                match d.distribute(&mut pending) {
                    Ok(n) => {
                        check(before.len() - pending.len() == n, "accepted count")?;
                        // Left packets keep their order and block their flow's later ones.
                        let left: HashSet<u64> = pending.iter().map(|p| p.id).collect();
                        let mut blocked = HashSet::new();
                        let mut it = pending.iter();
                        for p in &before {
                            if left.contains(&p.id) {
                                check(it.next() == Some(p), "left packets out of order")?;
                                blocked.insert(p.flow);
                            } else {
                                check(
                                    !blocked.contains(&p.flow),
                                    "a later packet of a blocked flow was accepted",
                                )?;
                                m.order.entry(p.flow).or_default().push_back(p.id);
                            }
                        }
                    }
                    Err(NoWorkers) => {
                        // Everything the distributor had waiting is back with the caller,
                        // oldest first; the model forgets its ownership of those packets.
                        let back: HashSet<u64> = pending.iter().map(|p| p.id).collect();
                        for q in m.order.values_mut() {
                            q.retain(|id| !back.contains(id));
                        }
                        check(
                            ws.iter().all(Option::is_none),
                            "NoWorkers with a worker active",
                        )?;
                    }
                }
            }
            Op::Recv(w, n) => {
                let w = *w % ws.len();
                let Some(wk) = ws[w].as_mut() else {
                    continue;
                };
                let mut got = Vec::new();
                let first = wk.next_ticket();
                m.publish(w, true); // a receive publishes what waits first
                wk.recv_burst(&mut got, *n).map_err(|e| e.to_string())?;
                for (k, p) in got.into_iter().enumerate() {
                    m.tickets[w].push_back(first.nth(k));
                    for (o, h) in m.held.iter().enumerate() {
                        if o != w && h.iter().any(|q| q.flow == p.flow) {
                            return Err(format!("flow {} held by workers {o} and {w}", p.flow));
                        }
                    }
                    let q = m.order.entry(p.flow).or_default();
                    check(
                        q.front() == Some(&p.id),
                        &format!(
                            "flow {} out of order: got {} expected {:?}",
                            p.flow,
                            p.id,
                            q.front()
                        ),
                    )?;
                    q.pop_front();
                    m.held[w].push_back(p);
                    m.received += 1;
                }
            }
            Op::Done(w) | Op::Drop(w) | Op::Resched(w, _) => {
                let w = *w % ws.len();
                let Some(wk) = ws[w].as_mut() else { continue };
                m.tickets[w].pop_front();
                let Some(mut p) = m.held[w].pop_front() else {
                    let probe = Pkt {
                        flow: 0,
                        id: u64::MAX,
                    };
                    check(
                        wk.done(probe).is_err(),
                        "handing back with nothing held succeeded",
                    )?;
                    continue;
                };
                match op {
                    Op::Done(_) => {
                        wk.done(p).map_err(|e| e.to_string())?;
                        m.done_ids.insert(p.id);
                        m.unread_done[w] += 1;
                        m.done += 1;
                    }
                    Op::Drop(_) => {
                        wk.drop_packet(p).map_err(|e| e.to_string())?;
                        m.dropped += 1;
                    }
                    Op::Resched(_, f) => {
                        p.flow = u64::from(*f) % FLOWS;
                        wk.reschedule(p).map_err(|e| e.to_string())?;
                        m.unread_resched[w].push_back((p.id, p.flow));
                    }
                    _ => unreachable!(),
                }
                // The oldest is back: what waited behind it follows.
                m.publish(w, false);
            }
            Op::AnyOrder(w, k, kind, f) => {
                let w = *w % ws.len();
                let Some(wk) = ws[w].as_mut() else { continue };
                if m.held[w].is_empty() {
                    continue;
                }
                // The oldest held packet of the chosen packet's flow: a flow goes back in
                // order, flows in any order.
                let flow = m.held[w][*k % m.held[w].len()].flow;
                let i = m.held[w]
                    .iter()
                    .position(|p| p.flow == flow)
                    .expect("chosen");
                let mut p = m.held[w].remove(i).expect("held");
                let t = m.tickets[w].remove(i).expect("in step");
                match kind % 4 {
                    k @ (0 | 3) => {
                        wk.done_at(t, p).map_err(|e| e.to_string())?;
                        m.done_ids.insert(p.id);
                        if i == 0 {
                            // The oldest: it goes at once.
                            m.unread_done[w] += 1;
                            m.done += 1;
                        } else {
                            m.staged[w].push(t);
                        }
                        if k == 3 {
                            // What waits behind an older packet goes now.
                            wk.publish_handed_back();
                            m.publish(w, true);
                        }
                    }
                    1 => {
                        m.publish(w, true); // published ahead of the drop
                        wk.drop_at(t, p).map_err(|e| e.to_string())?;
                        m.dropped += 1;
                    }
                    _ => {
                        m.publish(w, true); // published ahead of the reschedule
                        p.flow = u64::from(*f) % FLOWS;
                        wk.reschedule_at(t, p).map_err(|e| e.to_string())?;
                        m.unread_resched[w].push_back((p.id, p.flow));
                    }
                }
                m.publish(w, false);
                let probe = Pkt {
                    flow: 0,
                    id: u64::MAX,
                };
                check(wk.done_at(t, probe).is_err(), "a ticket handed back twice")?;
            }
            Op::Leave(w, k) => {
                let w = *w % ws.len();
                let Some(wk) = ws[w].take() else { continue };
                m.publish(w, true); // a leave publishes what waits first
                let held: Vec<Pkt> = m.held[w].drain(..).collect();
                m.tickets[w].clear();
                let k = (*k).min(held.len());
                // The first k go back unprocessed: they are owned again, ahead of their
                // flows' packets still waiting.
                for p in held[..k].iter().rev() {
                    m.order.entry(p.flow).or_default().push_front(p.id);
                }
                m.dropped += (held.len() - k) as u64;
                wk.leave(held[..k].to_vec()).map_err(|e| e.to_string())?;
            }
            Op::Rejoin(w) => {
                let w = *w % ws.len();
                m.read_returns(); // rejoin reads the return rings first
                if m.removed[w] {
                    check(
                        matches!(d.rejoin(w), Err(JoinError::NoSuchWorker(x)) if x == w),
                        "rejoin of a removed worker",
                    )?;
                    continue;
                }
                if ws[w].is_some() {
                    check(
                        matches!(d.rejoin(w), Err(JoinError::Active(x)) if x == w),
                        "rejoin of an active worker",
                    )?;
                    continue;
                }
                ws[w] = Some(d.rejoin(w).map_err(|e| e.to_string())?);
            }
            Op::Add => {
                m.read_returns(); // add_worker reads the return rings first
                let wk = d.add_worker().map_err(|e| e.to_string())?;
                let id = wk.id();
                match m.removed.iter().position(|&r| r) {
                    Some(lowest) => {
                        check(
                            id == lowest,
                            "add_worker did not reuse the lowest removed id",
                        )?;
                        m.removed[id] = false;
                    }
                    None => {
                        check(id == ws.len(), "add_worker did not take the next id")?;
                        ws.push(None);
                        m.held.push(VecDeque::new());
                        m.tickets.push(VecDeque::new());
                        m.unread_resched.push(VecDeque::new());
                        m.unread_done.push(0);
                        m.staged.push(Vec::new());
                        m.removed.push(false);
                    }
                }
                ws[id] = Some(wk);
            }
            Op::Remove(w) => {
                let w = *w % ws.len();
                m.read_returns(); // remove_worker reads the return rings first
                let r = d.remove_worker(w);
                if m.removed[w] {
                    check(
                        r == Err(JoinError::NoSuchWorker(w)),
                        "removing a removed worker",
                    )?;
                } else if ws[w].is_some() {
                    check(r == Err(JoinError::Active(w)), "removing an active worker")?;
                } else {
                    r.map_err(|e| e.to_string())?;
                    m.removed[w] = true;
                }
            }
            Op::Batching(packets, hold) => d.set_batching(*packets, *hold),
            Op::Collect => {
                // collect reads the return rings only when nothing read is waiting.
                if m.waiting == 0 {
                    m.read_returns();
                }
                m.waiting = 0;
                d.collect(&mut out);
            }
        }
        for p in out.drain(..) {
            check(
                m.done_ids.contains(&p.id),
                "returned a packet no worker finished",
            )?;
            check(m.returned.insert(p.id), "returned twice")?;
        }
        let listed: Vec<usize> = d.registry().workers().iter().map(|i| i.id).collect();
        let expect: Vec<usize> = (0..ws.len()).filter(|&i| !m.removed[i]).collect();
        check(
            listed == expect,
            &format!("registry lists {listed:?}, expected {expect:?}"),
        )?;
        let totals = d.registry().totals();
        check(
            totals.get("received") == Some(m.received) && totals.get("returned") == Some(m.done),
            &format!(
                "registry totals {totals:?}, workers received {} and returned {}",
                m.received, m.done
            ),
        )?;
        // Every packet received is held, or counted once more as it left the worker.
        let v = *totals.values();
        // Packets waiting on a worker count as held: not yet counted as they left.
        let held: u64 = m.held.iter().map(|h| h.len() as u64).sum::<u64>()
            + m.staged.iter().map(|s| s.len() as u64).sum::<u64>();
        check(
            v[0] == v[1..].iter().sum::<u64>() + held,
            &format!("registry totals {totals:?} do not balance with {held} held"),
        )?;
    }

    // Drain: everyone joins, receives and finishes everything.
    for (w, slot) in ws.iter_mut().enumerate() {
        if m.removed[w] {
            let wk = d.add_worker().map_err(|e| e.to_string())?;
            check(
                wk.id() == w,
                "add_worker did not reuse the lowest removed id",
            )?;
            m.removed[w] = false;
            *slot = Some(wk);
        } else if slot.is_none() {
            *slot = Some(d.rejoin(w).map_err(|e| e.to_string())?);
        }
    }
    for _round in 0..10_000 {
        if pending.is_empty() && d.in_flight() == 0 {
            break;
        }
        d.distribute(&mut pending).map_err(|e| e.to_string())?;
        for (w, wk) in ws.iter_mut().enumerate() {
            let wk = wk.as_mut().unwrap();
            let mut got = Vec::new();
            wk.recv_burst(&mut got, usize::MAX)
                .map_err(|e| e.to_string())?;
            m.tickets[w].clear();
            for p in m.held[w].drain(..).chain(got) {
                m.done_ids.insert(p.id);
                wk.done(p).map_err(|e| e.to_string())?;
            }
        }
        d.collect(&mut out);
    }
    d.flush(&mut out, Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    for p in out.drain(..) {
        check(m.returned.insert(p.id), "returned twice")?;
    }
    check(pending.is_empty(), "packets stuck with the caller")?;
    check(
        m.returned.len() as u64 + m.dropped == next_id,
        &format!(
            "returned {} + dropped {} != created {next_id}",
            m.returned.len(),
            m.dropped
        ),
    )?;
    check(
        d.stats().snapshot().get("dropped") == Some(m.dropped),
        "dropped count",
    )?;
    Ok(())
}
