//! A sequential model of a pipeline distributor, for `tests/props/pipeline.rs`: workers
//! are driven by hand from one thread, and after every operation the model checks
//! * affinity: at an atomic stage, a worker receives a packet of a flow only while no
//!   other worker holds one of that flow at that stage;
//! * order: at an atomic stage, packets of a flow that came from one source (new input of
//!   that flow, or forwards out of one flow of an atomic stage) are received in the order
//!   they were accepted or forwarded, and those forwarded out of an ordered first stage
//!   in the order that stage accepted them; packets completed at an ordered first stage
//!   come out of `collect` in that order;
//! * admission: a call that admits new packets leaves at most the admission limit inside;
//! * exactly once: at the end every packet came back once, returned or dropped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use flowline::distributor::{self, Config, NoWorkers, StageType, Ticket, Worker};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pkt {
    pub stage: usize,
    pub flow: u64,
    pub id: u64,
}

#[derive(Clone, Debug)]
pub enum Op {
    /// Hand the distributor the pending packets plus new ones (stage 0) of these flows.
    Distribute(Vec<u8>),
    /// Worker receives up to n packets.
    Recv(usize, usize),
    /// Worker hands back its oldest held packet processed (out of the pipeline).
    Done(usize),
    /// Worker drops its oldest held packet.
    Drop(usize),
    /// Worker hands back its oldest held packet processed, marked so that `route` panics
    /// when the distributor reads it.
    Poison(usize),
    /// Worker forwards its oldest held packet to the next stage (the last stage's
    /// packets go out as done), into this flow.
    Forward(usize, u8),
    /// Worker forwards, by ticket, its k-th held packet (at an atomic stage: the oldest
    /// held of that packet's flow), into this flow.
    ForwardAt(usize, usize, u8),
    /// Worker leaves, handing back its first k held packets unprocessed (the rest count
    /// as dropped).
    Leave(usize, usize),
    /// A worker that left re-joins.
    Rejoin(usize),
    Collect,
    /// The admission limit changes.
    Limit(usize),
    /// Worker w serves the stages of this mask (bit s: stage s).
    Link(usize, u8),
    /// A stage's priority changes.
    Priority(usize, u8),
}

pub const FLOWS: u64 = 4;

/// The flow of a packet whose route panics.
const POISON: u64 = u64::MAX;

/// The pipeline's route: a packet's stage and flow, a panic (without the panic hook's
/// message) for a poisoned packet.
fn route(p: &Pkt) -> (usize, u64) {
    if p.flow == POISON {
        std::panic::resume_unwind(Box::new("poisoned"));
    }
    (p.stage, p.flow)
}

/// A stage and a flow.
type Key = (usize, u64);

/// The source of new input of a flow.
const INPUT: usize = usize::MAX;

/// The source of forwards out of an ordered first stage (released in the order it
/// accepted them: by their rank).
const ORDERED_FIRST: Key = (usize::MAX - 1, 0);

struct Model {
    stages: Vec<StageType>,
    /// Per (destination, source): ids in the order they must be received.
    expect: HashMap<(Key, Key), VecDeque<u64>>,
    /// Per packet: its source, if its order is tracked.
    source: HashMap<u64, Key>,
    held: Vec<VecDeque<Pkt>>,
    tickets: Vec<VecDeque<Ticket>>,
    /// Per worker: every stage it was ever linked to (a packet sent before an unlink may
    /// still arrive, and a flow in flight stays with its worker).
    allowed: Vec<u64>,
    done_ids: HashSet<u64>,
    returned: HashSet<u64>,
    dropped: u64,
    /// Per packet accepted into an ordered first stage: its place in that stage's order
    /// (acceptance order; a packet given back with `NoWorkers` and accepted again takes a
    /// new one).
    rank: HashMap<u64, u64>,
    next_rank: u64,
    /// Per (destination, source `ORDERED_FIRST`): the last rank received there.
    last_ordered: HashMap<Key, u64>,
    /// Ids completed at an ordered first stage, and the last one collected.
    done_first: HashSet<u64>,
    last_done_first: Option<u64>,
    /// Packets that may come out of `collect` unfinished: forwarded ones a read that
    /// panicked may have left there, as handed back.
    loose: HashSet<u64>,
    /// Packets forwarded and not received again yet.
    forwarded: HashSet<u64>,
}

impl Model {
    fn atomic(&self, stage: usize) -> bool {
        self.stages[stage] == StageType::Atomic
    }

    /// `p`, now at its stage and flow, came from `from` (tracked if an atomic stage's
    /// flow or new input).
    fn entered(&mut self, p: &Pkt, from: Key) {
        if from.0 != INPUT {
            self.forwarded.insert(p.id);
        }
        if from.0 == 0 && self.stages[0] == StageType::Ordered {
            self.source.insert(p.id, ORDERED_FIRST);
        } else if from.0 == INPUT || self.atomic(from.0) {
            self.source.insert(p.id, from);
            self.expect
                .entry(((p.stage, p.flow), from))
                .or_default()
                .push_back(p.id);
        } else {
            self.source.remove(&p.id);
        }
    }

    fn received(&mut self, w: usize, p: Pkt) -> Result<(), String> {
        self.forwarded.remove(&p.id);
        if self.allowed[w] & (1 << p.stage) == 0 {
            return Err(format!(
                "{p:?} at worker {w}, which never served stage {}",
                p.stage
            ));
        }
        if self.atomic(p.stage) {
            for (o, h) in self.held.iter().enumerate() {
                if o != w && h.iter().any(|q| (q.stage, q.flow) == (p.stage, p.flow)) {
                    return Err(format!(
                        "{:?} held by workers {o} and {w}",
                        (p.stage, p.flow)
                    ));
                }
            }
            if self.source.get(&p.id) == Some(&ORDERED_FIRST) {
                let rank = self.rank[&p.id];
                let last = self.last_ordered.insert((p.stage, p.flow), rank);
                if last.is_some_and(|l| l > rank) {
                    return Err(format!("{p:?} from the ordered first stage after {last:?}"));
                }
            } else if let Some(&from) = self.source.get(&p.id) {
                let q = self.expect.entry(((p.stage, p.flow), from)).or_default();
                if q.front() != Some(&p.id) {
                    return Err(format!(
                        "{p:?} from {from:?} out of order: expected {:?}",
                        q.front()
                    ));
                }
                q.pop_front();
            }
        }
        self.held[w].push_back(p);
        Ok(())
    }

    /// `p` completed at its stage.
    fn completed(&mut self, p: &Pkt) {
        if p.stage == 0 && self.stages[0] == StageType::Ordered {
            self.done_first.insert(p.id);
        }
    }

    /// A call that reads hand-backs panicked (a poisoned packet): the burst it read
    /// leaves through `collect` as handed back, so packets forwarded and not yet received
    /// may come out there instead, in no promised order, and completions at an ordered
    /// first stage may come out ahead of their order.
    fn read_panicked(&mut self) {
        for id in self.forwarded.drain() {
            self.source.remove(&id);
            self.loose.insert(id);
        }
        for q in self.expect.values_mut() {
            q.retain(|id| !self.loose.contains(id));
        }
        self.done_first.clear();
    }

    /// Forgets the expected places of packets given back to the caller.
    fn forget(&mut self, ids: &HashSet<u64>) {
        for q in self.expect.values_mut() {
            q.retain(|id| !ids.contains(id));
        }
    }
}

type Dist = distributor::Distributor<Pkt, distributor::Pipeline<Pkt, fn(&Pkt) -> (usize, u64)>>;

/// Worker `w` re-joins; the distributor reads the hand-backs first, and each poisoned one
/// panics a read once (its burst comes out of `collect`): then it tries again.
fn rejoin(d: &mut Dist, m: &mut Model, w: usize) -> Result<Worker<Pkt>, String> {
    loop {
        match catch_unwind(AssertUnwindSafe(|| d.rejoin(w))) {
            Ok(r) => return r.map_err(|e| e.to_string()),
            Err(_) => m.read_panicked(),
        }
    }
}

#[allow(clippy::too_many_lines)]
pub fn run(workers: usize, credit: usize, stages: &[StageType], ops: &[Op]) -> Result<(), String> {
    let (mut d, ws) = distributor::new_pipeline(
        Config::default().workers(workers).credit(credit),
        stages,
        route as fn(&Pkt) -> (usize, u64),
    )
    .map_err(|e| e.to_string())?;
    let mut ws: Vec<Option<Worker<Pkt>>> = ws.into_iter().map(Some).collect();
    let mut m = Model {
        stages: stages.to_vec(),
        expect: HashMap::new(),
        source: HashMap::new(),
        held: vec![VecDeque::new(); workers],
        tickets: vec![VecDeque::new(); workers],
        allowed: vec![u64::MAX; workers],
        done_ids: HashSet::new(),
        returned: HashSet::new(),
        dropped: 0,
        rank: HashMap::new(),
        next_rank: 0,
        last_ordered: HashMap::new(),
        done_first: HashSet::new(),
        last_done_first: None,
        loose: HashSet::new(),
        forwarded: HashSet::new(),
    };
    let last = stages.len() - 1;
    let mut pending: Vec<Pkt> = Vec::new();
    let mut next_id = 0u64;
    let mut out = Vec::new();
    let check = |c: bool, what: &str| if c { Ok(()) } else { Err(what.to_string()) };

    for op in ops {
        match op {
            Op::Distribute(flows) => {
                for f in flows {
                    pending.push(Pkt {
                        stage: 0,
                        flow: u64::from(*f) % FLOWS,
                        id: next_id,
                    });
                    next_id += 1;
                }
                let before = pending.clone();
                let Ok(r) = catch_unwind(AssertUnwindSafe(|| d.distribute(&mut pending))) else {
                    check(pending == before, "a read that panicked moved the input")?;
                    m.read_panicked();
                    continue;
                };
                match r {
                    Ok(n) => {
                        check(before.len() - pending.len() == n, "accepted count")?;
                        check(
                            n == 0 || d.in_flight() <= d.admission_limit(),
                            "admitted past the limit",
                        )?;
                        let left: HashSet<u64> = pending.iter().map(|p| p.id).collect();
                        let mut blocked = HashSet::new();
                        let mut it = pending.iter();
                        for p in &before {
                            if left.contains(&p.id) {
                                check(it.next() == Some(p), "left packets out of order")?;
                                blocked.insert((p.stage, p.flow));
                            } else {
                                check(
                                    !m.atomic(p.stage) || !blocked.contains(&(p.stage, p.flow)),
                                    "a later packet of a blocked flow was accepted",
                                )?;
                                if p.stage == 0 && m.stages[0] == StageType::Ordered {
                                    m.rank.insert(p.id, m.next_rank);
                                    m.next_rank += 1;
                                }
                                m.entered(p, (INPUT, p.flow));
                            }
                        }
                    }
                    Err(NoWorkers) => {
                        let back: HashSet<u64> = pending.iter().map(|p| p.id).collect();
                        m.forget(&back);
                        check(
                            ws.iter().all(Option::is_none),
                            "NoWorkers with a worker active",
                        )?;
                    }
                }
            }
            Op::Recv(w, n) => {
                let w = *w % ws.len();
                let Some(wk) = ws[w].as_mut() else { continue };
                let mut got = Vec::new();
                let first = wk.next_ticket();
                wk.recv_burst(&mut got, *n).map_err(|e| e.to_string())?;
                for (k, p) in got.into_iter().enumerate() {
                    m.tickets[w].push_back(first.nth(k));
                    m.received(w, p)?;
                }
            }
            Op::Done(w) | Op::Drop(w) | Op::Forward(w, _) => {
                let w = *w % ws.len();
                let Some(wk) = ws[w].as_mut() else { continue };
                let Some(p) = m.held[w].pop_front() else {
                    continue;
                };
                m.tickets[w].pop_front();
                match op {
                    Op::Drop(_) => {
                        wk.drop_packet(p).map_err(|e| e.to_string())?;
                        m.dropped += 1;
                    }
                    Op::Forward(_, f) if p.stage < last => {
                        let from = (p.stage, p.flow);
                        let q = Pkt {
                            stage: p.stage + 1,
                            flow: u64::from(*f) % FLOWS,
                            id: p.id,
                        };
                        wk.forward(q).map_err(|e| e.to_string())?;
                        m.entered(&q, from);
                    }
                    _ => {
                        wk.done(p).map_err(|e| e.to_string())?;
                        m.done_ids.insert(p.id);
                        m.completed(&p);
                    }
                }
            }
            Op::ForwardAt(w, k, f) => {
                let w = *w % ws.len();
                let Some(wk) = ws[w].as_mut() else { continue };
                if m.held[w].is_empty() {
                    continue;
                }
                let mut i = *k % m.held[w].len();
                let c = m.held[w][i];
                if m.atomic(c.stage) {
                    // A flow of an atomic stage goes on in order.
                    i = m.held[w]
                        .iter()
                        .position(|p| (p.stage, p.flow) == (c.stage, c.flow))
                        .expect("chosen");
                }
                let p = m.held[w].remove(i).expect("held");
                let t = m.tickets[w].remove(i).expect("in step");
                if p.stage < last {
                    let q = Pkt {
                        stage: p.stage + 1,
                        flow: u64::from(*f) % FLOWS,
                        id: p.id,
                    };
                    wk.forward_at(t, q).map_err(|e| e.to_string())?;
                    m.entered(&q, (p.stage, p.flow));
                } else {
                    wk.done_at(t, p).map_err(|e| e.to_string())?;
                    m.done_ids.insert(p.id);
                    m.completed(&p);
                }
            }
            Op::Leave(w, k) => {
                let w = *w % ws.len();
                let Some(wk) = ws[w].take() else { continue };
                let held: Vec<Pkt> = m.held[w].drain(..).collect();
                m.tickets[w].clear();
                let k = (*k).min(held.len());
                for p in held[..k].iter().rev() {
                    if m.source.get(&p.id) == Some(&ORDERED_FIRST) {
                        // Handed back unprocessed: received again, from its own place on
                        // (the flow's later ones at this worker were handed back or
                        // dropped with it).
                        let key = (p.stage, p.flow);
                        match m.rank[&p.id].checked_sub(1) {
                            Some(before) => m.last_ordered.insert(key, before),
                            None => m.last_ordered.remove(&key),
                        };
                    } else if let Some(&from) = m.source.get(&p.id) {
                        m.expect
                            .entry(((p.stage, p.flow), from))
                            .or_default()
                            .push_front(p.id);
                    }
                }
                m.dropped += (held.len() - k) as u64;
                wk.leave(held[..k].to_vec()).map_err(|e| e.to_string())?;
            }
            Op::Rejoin(w) => {
                let w = *w % ws.len();
                if ws[w].is_none() {
                    ws[w] = Some(rejoin(&mut d, &mut m, w)?);
                }
            }
            Op::Collect => {
                if catch_unwind(AssertUnwindSafe(|| d.collect(&mut out))).is_err() {
                    m.read_panicked();
                }
            }
            Op::Poison(w) => {
                let w = *w % ws.len();
                let Some(wk) = ws[w].as_mut() else { continue };
                let Some(p) = m.held[w].pop_front() else {
                    continue;
                };
                m.tickets[w].pop_front();
                wk.done(Pkt { flow: POISON, ..p })
                    .map_err(|e| e.to_string())?;
                m.done_ids.insert(p.id);
            }
            Op::Limit(n) => d.set_admission_limit(*n),
            Op::Link(w, mask) => {
                let w = *w % ws.len();
                let list: Vec<usize> = (0..stages.len()).filter(|s| mask & (1 << s) != 0).collect();
                d.link(w, &list).map_err(|e| e.to_string())?;
                check(d.links(w) == Some(list.clone()), "links read back")?;
                for s in list {
                    m.allowed[w] |= 1 << s;
                }
            }
            Op::Priority(stage, prio) => {
                d.set_priority(stage % stages.len(), *prio)
                    .map_err(|e| e.to_string())?;
            }
        }
        for p in out.drain(..) {
            check(
                m.done_ids.contains(&p.id) || m.loose.contains(&p.id),
                "returned a packet no worker finished",
            )?;
            check(m.returned.insert(p.id), "returned twice")?;
            if m.done_first.contains(&p.id) {
                let rank = m.rank[&p.id];
                let last = m.last_done_first.replace(rank);
                check(
                    last.map_or(true, |l| l < rank),
                    "completions of the ordered first stage out of order",
                )?;
            }
        }
    }

    // Drain: everyone joins, receives and finishes everything.
    for (w, slot) in ws.iter_mut().enumerate() {
        if slot.is_none() {
            *slot = Some(rejoin(&mut d, &mut m, w)?);
        }
    }
    d.set_admission_limit(usize::MAX);
    let every: Vec<usize> = (0..stages.len()).collect();
    for w in 0..ws.len() {
        d.link(w, &every).map_err(|e| e.to_string())?;
    }
    for _round in 0..10_000 {
        if pending.is_empty() && d.in_flight() == 0 {
            break;
        }
        // (A poisoned packet's read panics once; what it read comes out of `collect`.)
        match catch_unwind(AssertUnwindSafe(|| d.distribute(&mut pending))) {
            Ok(r) => r.map(drop).map_err(|e| e.to_string())?,
            Err(_) => m.read_panicked(),
        }
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
        if catch_unwind(AssertUnwindSafe(|| d.collect(&mut out))).is_err() {
            m.read_panicked();
        }
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
    Ok(())
}
