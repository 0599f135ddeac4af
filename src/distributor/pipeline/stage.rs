//! One stage of a pipeline: its type, the packets that entered it, and, at an ordered
//! stage, the reorder window that releases what leaves it (forwards and completions alike)
//! in the order the packets entered (as DPDK's event devices restore an ORDERED queue's
//! order when its events are forwarded or released).

use std::collections::VecDeque;

use crate::distributor::backlog::Backlog;
use crate::distributor::config::ConfigError;
use crate::distributor::reorder::Reorder;

use super::keys::{key, new_seq_key, seq_of, stage_of, NEEDS_ROUTE, NEW_SEQ};
use super::StageType;

/// A packet that left an ordered stage, waiting in its window for the older ones.
pub(super) enum Leaving<T> {
    /// Completed: out through `collect`.
    Done(T),
    /// Forwarded: to the backlog, routed by this key.
    On(T, u64),
}

/// A stage (type, count and window together: one bounds check per packet routed).
pub(super) struct Stage<T> {
    pub(super) kind: StageType,
    /// Packets that entered it, ever.
    pub(super) entered: u64,
    /// Its forwarded packets are routed before those of stages of a lower priority.
    pub(super) priority: u8,
    /// At an ordered stage, its reorder window.
    pub(super) window: Option<Reorder<Leaving<T>>>,
}

impl<T> Stage<T> {
    /// A stage of `kind`; an ordered one with a window of `window` packets.
    pub(super) fn new(kind: StageType, window: usize) -> Result<Self, ConfigError> {
        Ok(Stage {
            kind,
            entered: 0,
            priority: 0,
            window: match kind {
                StageType::Ordered => Some(Reorder::new(window)?),
                _ => None,
            },
        })
    }
}

/// Which of a pipeline's stages are ordered, and how many there are: what a hand-back's
/// fate needs, small enough to copy into registers before a burst's routes are asked.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    /// Stage `i` is ordered if bit `i` is set.
    ordered: u64,
    /// How many stages.
    pub(super) len: usize,
}

impl Shape {
    /// The shape of stages of `kinds` (at most 64).
    pub(super) fn new(kinds: &[StageType]) -> Self {
        debug_assert!(kinds.len() <= 64);
        let ordered = kinds
            .iter()
            .enumerate()
            .filter(|(_, &kind)| kind == StageType::Ordered)
            .fold(0, |m, (i, _)| m | 1 << i);
        Shape {
            ordered,
            len: kinds.len(),
        }
    }

    /// Whether any stage is ordered.
    #[inline(always)]
    pub(super) fn any_ordered(self) -> bool {
        self.ordered != 0
    }

    /// Whether `stage` (below 64) is ordered.
    #[inline(always)]
    pub(super) fn is_ordered(self, stage: usize) -> bool {
        self.ordered >> stage & 1 != 0
    }

    /// The key a packet entering `stage` as a packet of flow `tag` is routed by.
    #[inline(always)]
    pub(super) fn entry_key(self, stage: usize, tag: u64) -> u64 {
        if self.is_ordered(stage) {
            new_seq_key(stage)
        } else {
            key(stage, tag)
        }
    }
}

/// Moves what a window released to where it goes: completions to `returned`, forwards to
/// `backlog`, in the order released.
pub(super) fn dispatch<T>(
    released: &mut Vec<Leaving<T>>,
    returned: &mut Vec<T>,
    backlog: &mut Backlog<T>,
) {
    for l in released.drain(..) {
        match l {
            Leaving::Done(p) => returned.push(p),
            Leaving::On(p, k) => backlog.push_back(p, k),
        }
    }
}

/// The sequence numbers that backlog notes hold at ordered stages (a leaving worker's
/// packets keep theirs), given up when the notes' packets leave the distributor.
pub(super) fn held_seqs<'a>(
    notes: &'a VecDeque<u64>,
    stages: &'a [Stage<impl Sized>],
) -> impl Iterator<Item = (usize, u64)> + 'a {
    notes.iter().filter_map(move |&n| {
        let stage = stage_of(n);
        let ordered = n & NEEDS_ROUTE == 0 && stages[stage].window.is_some();
        (ordered && seq_of(n) != NEW_SEQ).then(|| (stage, seq_of(n)))
    })
}
