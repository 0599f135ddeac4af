//! A pipeline's routing pass: the forwarded packets waiting in the backlog first (always
//! taken, so a full pipeline drains), then new input while fewer packets than the
//! admission limit are inside. An atomic stage routes through the flow table (one flow on
//! one worker at a time), a parallel one to the least loaded worker, an ordered one to the
//! least loaded worker with the stage's next sequence number, while its window has room.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use crate::distributor::admission::AdmitAll;
use crate::distributor::backlog::Backlog;
use crate::distributor::distribute::{route_pass, PutBack};
use crate::distributor::flows::TagHasher;
use crate::distributor::lanes::{Lane, Pick, Router};
use crate::distributor::Distributor;

use super::keys::{
    bad_stage, check_move, key, low_seq, new_seq_key, seq_of, stage_of, NEEDS_ROUTE, NEW_SEQ,
    TAG_BITS,
};
use super::links::Links;
use super::stage::{Leaving, Stage};
use super::{Pipeline, StageType};
use crate::distributor::reorder::Reorder;

impl<T, R> Distributor<T, Pipeline<T, R>>
where
    R: FnMut(&T) -> (usize, u64),
{
    /// A call's routing pass (a worker is active): the forwarded packets, then new input
    /// while the admission limit allows.
    #[inline(always)]
    pub(super) fn route_pipeline(&mut self, pkts: &mut Vec<T>) -> usize {
        if !self.sched.blocked.is_empty() {
            self.sched.blocked.clear();
        }
        self.route_forwards();
        let room = self.sched.limit.saturating_sub(self.in_flight());
        let mut input = std::mem::take(&mut self.scratch);
        std::mem::swap(&mut input, pkts);
        let len = input.len();
        if len <= room && self.sched.one_atomic_stage() {
            self.route_one_stage(&mut input, pkts);
        } else {
            self.route_new_input(&mut input, pkts, room);
        }
        let accepted = (len - pkts.len()) as u64;
        self.scratch = input;
        self.end_call(accepted, pkts.len() as u64, |s: &mut Pipeline<T, R>| {
            &mut s.flows
        });
        accepted as usize
    }

    /// The pass over new input, `input` taken while fewer than `room` were (see
    /// [`input_pass`]); what it does not place goes onto `pkts`.
    #[inline(always)]
    fn route_new_input(&mut self, input: &mut Vec<T>, pkts: &mut Vec<T>, room: usize) {
        let slack = self.slack();
        let g = PutBack {
            rest: input.drain(..),
            next: 0,
            pkts,
            stats: &mut self.stats,
            entered: None,
            finished: false,
        };
        let (mut pass, route) = Pass::new(
            &mut self.lanes,
            &mut self.sched,
            self.pick,
            self.credit,
            slack,
        );
        input_pass(g, &mut pass, route, room);
        self.pick = pass.router.pick;
    }

    /// The pass over new input of a pipeline of one atomic stage that every worker serves,
    /// all of whose `input` the admission limit allows: the loop of an atomic
    /// distributor, the stage's entries counted once (panics included). What it does not
    /// place goes onto `pkts`.
    #[inline(never)]
    fn route_one_stage(&mut self, input: &mut Vec<T>, pkts: &mut Vec<T>) {
        let slack = self.slack();
        let Self {
            lanes,
            pick,
            credit,
            stats,
            sched,
            ..
        } = self;
        let Pipeline {
            route,
            stages,
            flows,
            blocked,
            ..
        } = sched;
        let len = input.len();
        let g = PutBack {
            rest: input.drain(..),
            next: 0,
            pkts,
            stats,
            entered: Some(&mut stages[0].entered),
            finished: false,
        };
        let mut router = Router {
            lanes,
            flows,
            pick: *pick,
            credit: *credit,
            slack,
        };
        // The one stage's key of a packet is its tag's low bits (`key(0, tag)`).
        let mut tag = |p: &T| {
            let (s, t) = route(p);
            if s != 0 {
                bad_stage(s, 1);
            }
            t & TAG_BITS
        };
        route_pass(g, &mut router, &mut tag, blocked, &AdmitAll, 0, u64::MAX);
        *pick = router.pick;
        stages[0].entered += (len - pkts.len()) as u64;
    }

    /// Routes the forwarded packets (the backlog), oldest first, to their next stage;
    /// those that find no credit (or no room in an ordered stage's window) wait, and so
    /// do later ones of their flow at an atomic stage.
    #[inline(always)]
    fn route_forwards(&mut self) {
        // A new pass: completions read since the last one may have lowered any load.
        self.pick = Pick::NONE;
        if !self.backlog.is_empty() {
            self.route_waiting_forwards();
        }
    }

    /// [`route_forwards`](Self::route_forwards) of a backlog that holds packets.
    #[inline(never)]
    fn route_waiting_forwards(&mut self) {
        // The reschedules' routes first, before any packet moves: a panic (the user's
        // `route`, or a stage it gives that is out of range or behind) leaves the backlog
        // as it was, with the notes already routed (and the flag set, for the next pass).
        if self.sched.unrouted {
            for (p, note) in self.backlog.iter_mut() {
                if *note & NEEDS_ROUTE != 0 {
                    let (to, tag) = (self.sched.route)(p);
                    check_move(stage_of(*note), to, self.sched.stages.len());
                    *note = self.sched.entry_key(to, tag);
                }
            }
            self.sched.unrouted = false;
        }
        let slack = self.slack();
        let levels = self.sched.priority_levels();
        let (mut pass, _) = Pass::new(
            &mut self.lanes,
            &mut self.sched,
            self.pick,
            self.credit,
            slack,
        );
        // One turn of the backlog per priority level, highest first (one turn in all
        // when every stage has the same): each turn keeps the order of what stays.
        for turn in 0..levels.len().max(1) {
            let level = levels.get(turn).copied();
            // Consecutive packets bound for one stage (a run): its type and priority
            // looked up, and its entries counted, once per run. Placing runs no user
            // code, so nothing between here and the count panics.
            let mut left = self.backlog.len();
            while let Some(k) = self.backlog.front_note().filter(|_| left > 0) {
                let stage = stage_of(k);
                pass.start_run(stage);
                let now = level.map_or(true, |l| pass.stages[stage].priority == l);
                let kind = pass.run.kind;
                let backlog = &mut self.backlog;
                pass.run.placed += if !now {
                    take_run(backlog, &mut left, stage, |p, _| Err(p))
                } else if kind == StageType::Parallel && pass.links.all() {
                    take_run(backlog, &mut left, stage, |p, k| {
                        pass.router.route_any(p, k)
                    })
                } else if kind == StageType::Atomic && pass.links.all() {
                    take_run(backlog, &mut left, stage, |p, k| pass.place_atomic(p, k))
                } else {
                    take_run(backlog, &mut left, stage, |p, k| {
                        pass.place_key(p, stage, kind, k, true)
                    })
                };
            }
            pass.start_run(usize::MAX);
        }
        self.pick = pass.router.pick;
        drop(pass);
    }
}

impl<T, R> Pipeline<T, R> {
    /// The priority levels of a routing pass over the backlog, highest first (none: one
    /// turn for every stage).
    fn priority_levels(&self) -> Vec<u8> {
        if !self.prioritized {
            // One turn for every stage, and no allocation.
            return Vec::new();
        }
        let mut levels: Vec<u8> = self.stages.iter().map(|s| s.priority).collect();
        levels.sort_unstable_by(|a, b| b.cmp(a));
        levels.dedup();
        levels
    }

    /// Whether the pipeline is one atomic stage that every worker serves: an atomic
    /// distributor whose tag function is `route`.
    #[inline(always)]
    fn one_atomic_stage(&self) -> bool {
        self.stages.len() == 1 && self.stages[0].kind == StageType::Atomic && self.links.all()
    }

    /// The key a packet entering `stage` as a packet of flow `tag` is routed by.
    #[inline(always)]
    pub(super) fn entry_key(&self, stage: usize, tag: u64) -> u64 {
        self.shape.entry_key(stage, tag)
    }
}

/// Takes the packets at the front of `backlog` bound for `stage` (at most `left`, which
/// counts down) and offers each to `place`; those it refuses go to the back, in order.
/// Returns how many were placed.
#[inline(always)]
fn take_run<T>(
    backlog: &mut Backlog<T>,
    left: &mut usize,
    stage: usize,
    mut place: impl FnMut(T, u64) -> Result<(), T>,
) -> u64 {
    let mut placed = 0;
    while *left > 0 {
        let (p, k) = backlog.pop_front().expect("counted");
        if stage_of(k) != stage {
            backlog.push_front(p, k);
            break;
        }
        *left -= 1;
        match place(p, k) {
            Ok(()) => placed += 1,
            Err(p) => backlog.push_back(p, k),
        }
    }
    placed
}

/// What a routing pass of a pipeline uses, borrowed apart from the distributor.
struct Pass<'p, T> {
    router: Router<'p, T>,
    stages: &'p mut [Stage<T>],
    blocked: &'p mut HashSet<u64, BuildHasherDefault<TagHasher>>,
    links: &'p Links,
    /// The input packets entering one stage one after another.
    run: Run,
}

impl<'p, T> Pass<'p, T> {
    /// A pass over `lanes` with the schedule's stages, flows and links (and its `route`,
    /// given back beside it), from the kept pick.
    fn new<R>(
        lanes: &'p mut [Lane<T>],
        sched: &'p mut Pipeline<T, R>,
        pick: Pick,
        credit: u64,
        slack: u64,
    ) -> (Self, &'p mut R) {
        let Pipeline {
            route,
            stages,
            flows,
            blocked,
            links,
            ..
        } = sched;
        let router = Router {
            lanes,
            flows,
            pick,
            credit,
            slack,
        };
        let pass = Pass {
            router,
            stages,
            blocked,
            links,
            run: Run::NONE,
        };
        (pass, route)
    }

    /// The type of `stage`; a clear panic if there is no such stage.
    #[inline(always)]
    fn kind(&self, stage: usize) -> StageType {
        match self.stages.get(stage) {
            Some(s) => s.kind,
            None => bad_stage(stage, self.stages.len()),
        }
    }

    /// Places `p` at `stage` (of type `kind`) as a packet of flow `tag`, or gives it back:
    /// no credit, no room in an ordered stage's window, or (with `blocking`) an older
    /// packet of its flow was refused in this pass. The caller counts the stage's entry.
    #[inline(always)]
    fn place(
        &mut self,
        p: T,
        stage: usize,
        kind: StageType,
        tag: u64,
        blocking: bool,
    ) -> Result<(), T> {
        let k = match kind {
            StageType::Ordered => new_seq_key(stage),
            _ => key(stage, tag),
        };
        self.place_key(p, stage, kind, k, blocking)
    }

    /// [`place`](Self::place) by the packet's key `k` (at an ordered stage: a sequence
    /// number the packet keeps, or `NEW_SEQ`).
    #[inline(always)]
    fn place_key(
        &mut self,
        p: T,
        stage: usize,
        kind: StageType,
        k: u64,
        blocking: bool,
    ) -> Result<(), T> {
        match kind {
            StageType::Atomic if blocking && self.links.all() => self.place_atomic(p, k),
            StageType::Atomic => {
                if blocking && !self.blocked.is_empty() && self.blocked.contains(&k) {
                    return Err(p);
                }
                let routed = if self.links.all() {
                    self.router.route(p, k)
                } else {
                    self.route_linked(p, k, stage)
                };
                routed.map_err(|p| {
                    self.blocked.insert(k);
                    p
                })
            }
            StageType::Parallel if self.links.all() => self.router.route_any(p, k),
            StageType::Parallel => match self.linked_lane(stage) {
                Some(w) => {
                    self.router.lanes[w].send(p, k);
                    Ok(())
                }
                None => Err(p),
            },
            StageType::Ordered => self.place_ordered(p, stage, k),
        }
    }

    /// [`place_key`](Self::place_key) at an atomic stage that every worker serves, of a
    /// packet whose flow waits if an older packet of it was refused in this pass.
    #[inline(always)]
    fn place_atomic(&mut self, p: T, k: u64) -> Result<(), T> {
        if !self.blocked.is_empty() && self.blocked.contains(&k) {
            return Err(p);
        }
        self.router.route(p, k).map_err(|p| {
            self.blocked.insert(k);
            p
        })
    }

    /// The least loaded active worker that serves `stage` and has credit.
    fn linked_lane(&self, stage: usize) -> Option<usize> {
        linked_lane(self.router.lanes, self.router.credit, self.links, stage)
    }

    /// [`Router::route`] when workers serve some stages only: a flow in flight stays with
    /// its worker (whatever it serves now: its order first); an idle or new one goes to
    /// the least loaded worker that serves `stage`.
    #[inline(never)]
    fn route_linked(&mut self, p: T, k: u64, stage: usize) -> Result<(), T> {
        let links = self.links;
        self.router.route_with(p, k, |lanes, credit, _, _| {
            linked_lane(lanes, credit, links, stage)
        })
    }

    /// Places `p` at ordered `stage`: the least loaded worker with credit, stamped with the
    /// sequence number it keeps or, for `NEW_SEQ`, the window's next one (if it has room).
    /// Out of line, so the other stages' routing keeps its registers.
    #[inline(never)]
    fn place_ordered(&mut self, p: T, stage: usize, k: u64) -> Result<(), T> {
        let fresh = seq_of(k) == NEW_SEQ;
        if fresh && window(&mut self.stages[stage]).room() == 0 {
            return Err(p);
        }
        let lane = if self.links.all() {
            self.router.any_lane()
        } else {
            self.linked_lane(stage)
        };
        let Some(w) = lane else {
            return Err(p);
        };
        let win = window(&mut self.stages[stage]);
        let seq = if fresh {
            low_seq(win.stamp())
        } else {
            seq_of(k)
        };
        self.router.lanes[w].send(p, key(stage, seq));
        Ok(())
    }
}

/// The pass over new input: takes packets from `g` in order while fewer than `room` were
/// taken, and places them or puts them back. The guard `g` ends here (what is left goes
/// back onto the caller's input).
///
/// Consecutive packets entering the same stage are a run: its type is looked up and its
/// entries counted once per run; while no packet was refused and every worker serves
/// every stage, a run at an atomic stage goes through [`atomic_run`], the loop of a
/// one-stage distributor.
fn input_pass<T, R>(mut g: PutBack<'_, '_, T>, pass: &mut Pass<'_, T>, route: &mut R, room: usize)
where
    R: FnMut(&T) -> (usize, u64),
{
    let mut placed = 0;
    // Until a packet is refused, no flow is blocked: no look at the blocked set.
    let mut blocking = false;
    let direct = pass.links.all();
    while placed < room {
        let Some(first) = g.rest.as_slice().first() else {
            break;
        };
        // Routed in place: if `route` panics (or names no stage), the packet is still in
        // the drain and goes back.
        let (stage, tag) = route(first);
        if stage != pass.run.stage {
            pass.start_run(stage);
        }
        let kind = pass.run.kind;
        if direct && !blocking && kind == StageType::Atomic {
            let (n, refused, next) = atomic_run(&mut g, pass, route, (stage, tag), room - placed);
            placed += n;
            blocking = refused;
            if let Some(next) = next {
                pass.start_run(next);
            }
            continue;
        }
        if direct && kind == StageType::Ordered {
            let (n, refused, next) = ordered_run(&mut g, pass, route, stage, room - placed);
            placed += n;
            blocking |= refused;
            if let Some(next) = next {
                pass.start_run(next);
            }
            continue;
        }
        let Some(p) = g.rest.next() else { break };
        g.next += 1;
        match pass.place(p, stage, kind, tag, blocking) {
            Ok(()) => {
                placed += 1;
                pass.run.placed += 1;
            }
            Err(p) => {
                g.pkts.push(p);
                blocking = true;
            }
        }
    }
    g.finished = true;
}

/// Places packets of `g` at atomic stage `first.0` (the first packet's route is `first`)
/// through the flow table, at most `room`, until one is refused (its key then blocked),
/// the input ends, or one enters another stage (whose number it returns, its route asked
/// again by the caller). Returns how many were placed, and whether one was refused.
#[inline(always)]
fn atomic_run<T, R>(
    g: &mut PutBack<'_, '_, T>,
    pass: &mut Pass<'_, T>,
    route: &mut R,
    first: (usize, u64),
    room: usize,
) -> (usize, bool, Option<usize>)
where
    R: FnMut(&T) -> (usize, u64),
{
    let (stage, mut tag) = first;
    let Pass {
        router,
        blocked,
        run,
        ..
    } = pass;
    // What is placed counts as the run's entries when the run ends, panics included.
    let mut placed = Entries {
        n: 0,
        run: &mut run.placed,
    };
    let at_stage = key(stage, 0);
    let (mut refused, mut next) = (false, None);
    loop {
        let Some(p) = g.rest.next() else { break };
        g.next += 1;
        let k = at_stage | (tag & TAG_BITS);
        if let Err(p) = router.route(p, k) {
            blocked.insert(k);
            g.pkts.push(p);
            refused = true;
            break;
        }
        placed.n += 1;
        let Some(p) = g.rest.as_slice().first() else {
            break;
        };
        if placed.n == room {
            break;
        }
        // As in the caller: routed in place.
        let (s, t) = route(p);
        if s != stage {
            next = Some(s);
            break;
        }
        tag = t;
    }
    (placed.n, refused, next)
}

/// Places packets of `g` at ordered `stage` (the first packet's), each with the window's
/// next sequence number, at most `room`, while the window has room and a worker credit
/// (every worker serving every stage), until the input ends or a packet enters another
/// stage (whose number it returns, as [`atomic_run`] does). Returns how many were placed,
/// and whether one was refused (it goes back).
#[inline(always)]
fn ordered_run<T, R>(
    g: &mut PutBack<'_, '_, T>,
    pass: &mut Pass<'_, T>,
    route: &mut R,
    stage: usize,
    room: usize,
) -> (usize, bool, Option<usize>)
where
    R: FnMut(&T) -> (usize, u64),
{
    let Pass {
        router,
        stages,
        run,
        ..
    } = pass;
    let win = window(&mut stages[stage]);
    let mut placed = Entries {
        n: 0,
        run: &mut run.placed,
    };
    let (mut refused, mut next) = (false, None);
    loop {
        let Some(p) = g.rest.next() else { break };
        g.next += 1;
        let lane = if win.room() > 0 {
            router.any_lane()
        } else {
            None
        };
        let Some(w) = lane else {
            g.pkts.push(p);
            refused = true;
            break;
        };
        router.lanes[w].send(p, key(stage, low_seq(win.stamp())));
        placed.n += 1;
        let Some(p) = g.rest.as_slice().first() else {
            break;
        };
        if placed.n == room {
            break;
        }
        // As in the caller: routed in place.
        let (s, _) = route(p);
        if s != stage {
            next = Some(s);
            break;
        }
    }
    (placed.n, refused, next)
}

/// Packets a run placed, added to the run's count when it ends.
struct Entries<'a> {
    n: usize,
    run: &'a mut u64,
}

impl Drop for Entries<'_> {
    fn drop(&mut self) {
        *self.run += self.n as u64;
    }
}

/// Consecutive input packets entering one stage.
#[derive(Clone, Copy)]
struct Run {
    stage: usize,
    kind: StageType,
    /// How many of them were placed.
    placed: u64,
}

impl Run {
    const NONE: Run = Run {
        stage: usize::MAX,
        kind: StageType::Parallel,
        placed: 0,
    };
}

impl<T> Pass<'_, T> {
    /// Counts the current run's placed packets as entries of its stage and starts a run at
    /// `stage` (none: `usize::MAX`).
    fn start_run(&mut self, stage: usize) {
        if let Some(s) = self.stages.get_mut(self.run.stage) {
            s.entered += self.run.placed;
        }
        self.run = Run::NONE;
        if stage != usize::MAX {
            self.run = Run {
                stage,
                kind: self.kind(stage),
                placed: 0,
            };
        }
    }
}

impl<T> Drop for Pass<'_, T> {
    /// A pass cut short by a panic (the user's `route`) still counts what it placed.
    fn drop(&mut self) {
        self.start_run(usize::MAX);
    }
}

/// The least loaded active worker of `lanes` that serves `stage` and has credit left.
fn linked_lane<T>(lanes: &[Lane<T>], credit: u64, links: &Links, stage: usize) -> Option<usize> {
    lanes
        .iter()
        .enumerate()
        .filter(|(w, l)| l.active && links.serves(*w, stage) && l.outstanding() < credit)
        .min_by_key(|(_, l)| l.outstanding())
        .map(|(w, _)| w)
}

/// An ordered stage's window.
fn window<T>(st: &mut Stage<T>) -> &mut Reorder<Leaving<T>> {
    st.window.as_mut().expect("an ordered stage has a window")
}
