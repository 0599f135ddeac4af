//! A sequential model of the multi-node layout (`distributor::nodes`), shared by
//! `tests/props/nodes.rs` and the `nodes` fuzz target: every node and every worker is
//! driven from one thread by a list of operations, and each step is checked against a
//! `HashMap` of the packets in the layout (id -> packet). Checks:
//! - every packet a worker receives belongs to a flow its node owns (until the first
//!   migration; after it, ownership moves);
//! - no two workers hold packets of one flow at once, on any nodes (also while a flow's
//!   bucket migrates from one node to another);
//! - per (flow, entry node), packets not rescheduled reach workers in the order they
//!   entered;
//! - a packet rescheduled to flow `g` by a worker of node `k` reaches a worker before any
//!   packet of `g` that a later `distribute` call of node `k` takes from its caller;
//! - the packets rescheduled from flow `f` into flow `g` reach workers in the order they
//!   were rescheduled (at whichever nodes `f` ran: its bucket may migrate in between, and
//!   so may `g`'s);
//! - every packet collected or dropped was in the layout, once (none twice, none made up);
//! - a flush that returns `Ok` does so only when every node is flushing and every packet
//!   in the layout has come back (those left are in the callers' hands);
//! - after the operations, driving everything to completion returns every packet.
//!
//! `tag` may be armed to panic at its k-th call (`Op::Panic`, proptest only: the fuzzer
//! aborts on any panic); every call into a node is made under `catch_unwind`, and after
//! a panic the checks above still hold.
//!
//! Nodes may migrate the bucket of a flow they own to another node (`migrate`); the
//! handovers advance in later `distribute` calls. Workers may leave (handing back what
//! they hold) and rejoin; a node without workers
//! gives its flows' packets back (`NoWorkers`) and they are fed again. Packets that came
//! over a bridge and were given back that way have left their path (documented), so they
//! are exempt from the order checks from then on.

use std::cell::Cell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use std::time::Duration;

use flowline::distributor::nodes::{self, bucket_of, owner_of, NodeDistributor, NodesConfig};
use flowline::distributor::{FlushError, Worker};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pkt {
    pub id: u64,
    pub flow: u64,
    pub entry: usize,
    pub moved: bool,
}

thread_local! {
    /// `tag` panics when this reaches 0 (then disarms); `u64::MAX`: never.
    static COUNTDOWN: Cell<u64> = const { Cell::new(u64::MAX) };
}

const PANIC: &str = "tag panics (model)";

fn tag(p: &Pkt) -> u64 {
    COUNTDOWN.with(|c| match c.get() {
        u64::MAX => {}
        0 => {
            c.set(u64::MAX);
            panic!("{PANIC}");
        }
        k => c.set(k - 1),
    });
    p.flow
}

/// Runs `f`; `None` if the armed `tag` panicked in it (any other panic goes on).
fn guarded<R>(f: impl FnOnce() -> R) -> Option<R> {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let hook = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<String>().map(String::as_str) != Some(PANIC) {
                hook(info);
            }
        }));
    });
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(e) if e.downcast_ref::<String>().map(String::as_str) == Some(PANIC) => None,
        Err(e) => panic::resume_unwind(e),
    }
}

#[derive(Clone, Debug)]
pub enum Op {
    /// Packets of these flows (mod 8) enter at node `.0` (queued for its next distribute).
    Input(usize, Vec<u8>),
    /// Node `.0` distributes its queued input (and moves bridge traffic).
    Distribute(usize),
    /// Worker `.1` of node `.0` receives up to `.2` packets.
    Recv(usize, usize, usize),
    /// Worker `.1` of node `.0` hands back its oldest `.2` packets as processed.
    Done(usize, usize, usize),
    /// Worker `.1` of node `.0` reschedules its oldest packet to flow `.2` (mod 8).
    Resched(usize, usize, u8),
    /// Worker `.1` of node `.0` drops its oldest packet.
    Drop(usize, usize),
    /// Node `.0` collects.
    Collect(usize),
    /// Worker `.1` of node `.0` leaves, handing back what it holds.
    Leave(usize, usize),
    /// Worker `.1` of node `.0` rejoins if it left.
    Rejoin(usize, usize),
    /// Node `.0` migrates the bucket of flow `.1` (mod 8) to node `.2`, if it can.
    Migrate(usize, u8, usize),
    /// Node `.0` flushes with no time to wait: one round of its flush loop.
    Flush(usize),
    /// `tag` panics at its `.0`-th call from now (once). Proptest only: the fuzz target
    /// never makes it (libFuzzer aborts on any panic).
    #[allow(dead_code)]
    Panic(u8),
    /// Node `.0`'s batching changes (`set_batching(.1, .2)`).
    Batching(usize, usize, u32),
}

type Node = NodeDistributor<Pkt, fn(&Pkt) -> u64>;

/// A worker and the packets it holds, oldest first.
type Held = (Worker<Pkt>, VecDeque<Pkt>);

struct State {
    nodes: Vec<Node>,
    /// Per node, per worker: `None` once it left.
    workers: Vec<Vec<Option<Held>>>,
    input: Vec<Vec<Pkt>>,
    /// The packets in the layout.
    live: HashMap<u64, Pkt>,
    /// Per (flow, entry): the id of the last packet (not rescheduled) a worker received.
    last: HashMap<(u64, usize), u64>,
    /// Rescheduled packets no worker has received yet: (id, new flow, node whose worker
    /// rescheduled it, number of that node's first `distribute` call after it).
    rescheduled: Vec<(u64, u64, usize, u64)>,
    /// Packets a leaving worker handed back unprocessed: received again later, they are
    /// not order-checked (their flow's earlier packets were checked the first time).
    unprocessed: HashSet<u64>,
    /// Rescheduled packets no worker has received yet: id -> (flow it was rescheduled
    /// from, flow it was rescheduled to, its number among the reschedules from the one
    /// into the other).
    resched_from: HashMap<u64, (u64, u64, u64)>,
    /// Per (flow rescheduled from, flow rescheduled to): reschedules made, and the number
    /// of the last one a worker received.
    resched_made: HashMap<(u64, u64), u64>,
    resched_seen: HashMap<(u64, u64), u64>,
    /// Per node: `distribute` calls so far.
    calls: Vec<u64>,
    /// Per packet taken from a caller: (node, number of the `distribute` call that took it
    /// first).
    taken: HashMap<u64, (usize, u64)>,
    next_id: u64,
    n: usize,
    /// A migration started: flows may be processed off their first owner.
    migrated: bool,
    /// Per node: whether it counts as flushing (a flush set it; input since cleared it).
    flushing: Vec<bool>,
}

impl State {
    fn recv(&mut self, node: usize, w: usize, max: usize) -> Result<(), String> {
        let mut b = Vec::new();
        let Some((worker, _)) = &mut self.workers[node][w] else {
            return Ok(());
        };
        worker
            .recv_burst(&mut b, max)
            .map_err(|e| format!("recv: {e}"))?;
        for p in b {
            if !self.migrated && owner_of(p.flow, self.n) != node {
                return Err(format!("{p:?} reached node {node}, not its owner"));
            }
            for (k, ws) in self.workers.iter().enumerate() {
                for (other, (_, held)) in ws
                    .iter()
                    .enumerate()
                    .filter_map(|(i, x)| x.as_ref().map(|x| (i, x)))
                {
                    if (k, other) != (node, w) && held.iter().any(|q| q.flow == p.flow) {
                        return Err(format!(
                            "flow {} held by worker {w} of node {node} and worker {other} \
                             of node {k}",
                            p.flow
                        ));
                    }
                }
            }
            if !p.moved && !self.unprocessed.remove(&p.id) {
                if let Some(&l) = self.last.get(&(p.flow, p.entry)) {
                    if p.id < l {
                        return Err(format!("{p:?} received after id {l} of its flow/entry"));
                    }
                }
                self.last.insert((p.flow, p.entry), p.id);
            }
            let taken = self.taken.get(&p.id).copied();
            if let Some(&(pid, ..)) = self.rescheduled.iter().find(|&&(pid, g, k, first)| {
                pid != p.id
                    && !p.moved
                    && p.flow == g
                    && taken.is_some_and(|(n, c)| n == k && c >= first)
            }) {
                return Err(format!(
                    "{p:?} received before packet {pid}, rescheduled into its flow earlier"
                ));
            }
            self.rescheduled.retain(|&(pid, ..)| pid != p.id);
            if let Some((f, g, k)) = self.resched_from.remove(&p.id) {
                if let Some(&l) = self.resched_seen.get(&(f, g)) {
                    if k < l {
                        return Err(format!(
                            "{p:?}, rescheduled from flow {f} (number {k}), received after \
                             number {l} of those"
                        ));
                    }
                }
                self.resched_seen.insert((f, g), k);
            }
            if self.live.get(&p.id) != Some(&p) {
                return Err(format!("{p:?} received but not in the layout as such"));
            }
            self.workers[node][w]
                .as_mut()
                .expect("checked")
                .1
                .push_back(p);
        }
        Ok(())
    }

    /// Worker `w` of `node` back, if it left and its leave has been read.
    fn rejoin(&mut self, node: usize, w: usize) {
        if self.workers[node][w].is_none() {
            let n = &mut self.nodes[node];
            if let Some(Ok(worker)) = guarded(|| n.rejoin(w)) {
                self.workers[node][w] = Some((worker, VecDeque::new()));
            }
        }
    }

    fn collect(&mut self, node: usize) -> Result<(), String> {
        let mut out = Vec::new();
        let n = &mut self.nodes[node];
        guarded(|| n.collect(&mut out));
        for p in out {
            if self.live.remove(&p.id) != Some(p) {
                return Err(format!("{p:?} collected at node {node} twice or made up"));
            }
        }
        Ok(())
    }

    fn distribute(&mut self, node: usize) -> Result<(), String> {
        let offered: Vec<u64> = self.input[node].iter().map(|p| p.id).collect();
        if !offered.is_empty() {
            self.flushing[node] = false;
        }
        let (n, input) = (&mut self.nodes[node], &mut self.input[node]);
        // A panic hands this call's packets back to the caller (in `input`).
        let r = guarded(|| n.distribute(input));
        if let Some(Err(_)) = r {
            let mut back = core::mem::take(&mut self.input[node]);
            self.given_back(node, &mut back);
            self.input[node] = back;
        }
        let call = self.calls[node];
        self.calls[node] += 1;
        for id in offered {
            // The first time only: packets given back (`NoWorkers`) and fed again keep the
            // call that first took them.
            if !self.input[node].iter().any(|p| p.id == id) {
                self.taken.entry(id).or_insert((node, call));
            }
        }
        // `NoWorkers` is an answer, not a failure: the packets are back in the input.
        Ok(())
    }

    /// Packets a node gave back with `NoWorkers`: those that came over a bridge (entered
    /// elsewhere, or rescheduled at another node) leave their path.
    fn given_back(&mut self, node: usize, back: &mut [Pkt]) {
        for p in back.iter_mut() {
            if p.entry != node && !p.moved {
                p.moved = true;
                self.live.insert(p.id, *p);
            }
            self.rescheduled
                .retain(|&(pid, _, k, _)| pid != p.id || k == node);
            // Given back, a reschedule leaves its path: no longer ordered.
            self.resched_from.remove(&p.id);
        }
    }

    fn flush(&mut self, node: usize) -> Result<(), String> {
        let mut out = Vec::new();
        let n = &mut self.nodes[node];
        let r = guarded(|| n.flush(&mut out, Duration::ZERO));
        // Flushing from its start, whatever the end.
        self.flushing[node] = true;
        for p in out {
            if self.live.remove(&p.id) != Some(p) {
                return Err(format!("{p:?} flushed out at node {node} twice or made up"));
            }
        }
        match r {
            None | Some(Err(FlushError::Timeout { .. })) => {}
            Some(Ok(())) => {
                if let Some(k) = self.flushing.iter().position(|&f| !f) {
                    return Err(format!(
                        "node {node}'s flush returned, node {k} not flushing"
                    ));
                }
                let with_callers: usize = self.input.iter().map(Vec::len).sum();
                if self.live.len() != with_callers {
                    return Err(format!(
                        "node {node}'s flush returned with {} packets in the layout",
                        self.live.len() - with_callers
                    ));
                }
            }
            Some(Err(FlushError::NoWorkers(mut back))) => {
                // Older than the input still queued here: fed again first.
                self.given_back(node, &mut back);
                back.append(&mut self.input[node]);
                self.input[node] = back;
            }
        }
        Ok(())
    }
}

/// Runs `ops` on a layout of `n` nodes with `workers` workers each, then drives it to
/// completion; `Err` describes the first broken property.
pub fn run(
    n: usize,
    workers: usize,
    credit: usize,
    bridge: usize,
    ops: &[Op],
) -> Result<(), String> {
    let layout = nodes::new(
        NodesConfig::default()
            .nodes(n)
            .workers_per_node(workers)
            .credit(credit)
            .bridge(bridge),
        tag as fn(&Pkt) -> u64,
    )
    .map_err(|e| e.to_string())?;
    let mut st = State {
        nodes: Vec::new(),
        workers: Vec::new(),
        input: vec![Vec::new(); n],
        live: HashMap::new(),
        last: HashMap::new(),
        rescheduled: Vec::new(),
        unprocessed: HashSet::new(),
        resched_from: HashMap::new(),
        resched_made: HashMap::new(),
        resched_seen: HashMap::new(),
        calls: vec![0; n],
        taken: HashMap::new(),
        next_id: 0,
        n,
        migrated: false,
        flushing: vec![false; n],
    };
    COUNTDOWN.with(|c| c.set(u64::MAX));
    for (node, ws) in layout {
        st.nodes.push(node);
        st.workers
            .push(ws.into_iter().map(|w| Some((w, VecDeque::new()))).collect());
    }
    for op in ops {
        match *op {
            Op::Input(node, ref flows) => {
                let node = node % n;
                for &f in flows {
                    let p = Pkt {
                        id: st.next_id,
                        flow: u64::from(f % 8),
                        entry: node,
                        moved: false,
                    };
                    st.next_id += 1;
                    st.live.insert(p.id, p);
                    st.input[node].push(p);
                }
            }
            Op::Distribute(node) => st.distribute(node % n)?,
            Op::Recv(node, w, max) => st.recv(node % n, w % workers, max)?,
            Op::Done(node, w, k) => {
                let Some((worker, held)) = &mut st.workers[node % n][w % workers] else {
                    continue;
                };
                let k = k.min(held.len());
                let mut b: Vec<Pkt> = held.drain(..k).collect();
                worker
                    .done_burst(&mut b)
                    .map_err(|e| format!("done: {e}"))?;
            }
            Op::Resched(node, w, f) => {
                let Some((worker, held)) = &mut st.workers[node % n][w % workers] else {
                    continue;
                };
                if let Some(mut p) = held.pop_front() {
                    let from = p.flow;
                    p.flow = u64::from(f % 8);
                    p.moved = true;
                    let made = st.resched_made.entry((from, p.flow)).or_insert(0);
                    *made += 1;
                    st.resched_from.insert(p.id, (from, p.flow, *made));
                    st.live.insert(p.id, p);
                    st.rescheduled.retain(|&(pid, ..)| pid != p.id);
                    st.rescheduled
                        .push((p.id, p.flow, node % n, st.calls[node % n]));
                    worker
                        .reschedule(p)
                        .map_err(|e| format!("reschedule: {e}"))?;
                }
            }
            Op::Drop(node, w) => {
                let Some((worker, held)) = &mut st.workers[node % n][w % workers] else {
                    continue;
                };
                if let Some(p) = held.pop_front() {
                    worker.drop_packet(p).map_err(|e| format!("drop: {e}"))?;
                    if st.live.remove(&p.id).is_none() {
                        return Err(format!("{p:?} dropped but not in the layout"));
                    }
                }
            }
            Op::Collect(node) => st.collect(node % n)?,
            Op::Leave(node, w) => {
                if let Some((worker, held)) = st.workers[node % n][w % workers].take() {
                    st.unprocessed.extend(held.iter().map(|p| p.id));
                    worker
                        .leave(held.into_iter().collect())
                        .map_err(|e| format!("leave: {e}"))?;
                }
            }
            Op::Rejoin(node, w) => st.rejoin(node % n, w % workers),
            Op::Migrate(node, f, to) => {
                let b = bucket_of(u64::from(f % 8));
                let nd = &mut st.nodes[node % n];
                match guarded(|| nd.migrate(b, to % n)) {
                    Some(Ok(())) => st.migrated = true,
                    // A panic in its last step (re-sorting by the new map) leaves the
                    // migration started.
                    None if nd.migrating() => st.migrated = true,
                    _ => {}
                }
            }
            Op::Flush(node) => st.flush(node % n)?,
            Op::Panic(k) => COUNTDOWN.with(|c| c.set(u64::from(k))),
            Op::Batching(node, packets, hold) => st.nodes[node % n].set_batching(packets, hold),
        }
    }
    // Drive everything to completion: every packet must come back.
    COUNTDOWN.with(|c| c.set(u64::MAX));
    for _ in 0..10_000 {
        if st.live.is_empty() {
            break;
        }
        for node in 0..n {
            st.distribute(node)?;
            for w in 0..workers {
                st.rejoin(node, w);
                st.recv(node, w, usize::MAX)?;
                let Some((worker, held)) = &mut st.workers[node][w] else {
                    continue;
                };
                let mut b: Vec<Pkt> = held.drain(..).collect();
                worker
                    .done_burst(&mut b)
                    .map_err(|e| format!("done: {e}"))?;
            }
            st.collect(node)?;
        }
    }
    if !st.live.is_empty() {
        return Err(format!("{} packets never came back", st.live.len()));
    }
    // One more look at the hand-backs (the last drop may not have been read yet).
    for node in 0..n {
        st.distribute(node)?;
        st.collect(node)?;
    }
    for node in &st.nodes {
        if node.held() != 0 {
            return Err(format!("node {} still holds {}", node.id(), node.held()));
        }
    }
    Ok(())
}
