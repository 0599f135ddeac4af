//! What the multi-node layout ([`nodes`](crate::distributor::nodes)) reads and moves of its
//! node's distributor, besides the admission hook: the poll count, the backlog and the
//! lanes' positions, as narrow calls instead of the distributor's fields.

use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::wait::Sleepers;

use super::Distributor;

/// The batching state of a distributor's current call, which a node's bridges follow:
/// whether the call publishes everything, the batch, the calls a packet may wait, and the
/// calls so far.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Batching {
    pub(crate) publish_all: bool,
    pub(crate) batch: u64,
    pub(crate) hold: u64,
    pub(crate) calls: u64,
}

impl<T, S> Distributor<T, S> {
    /// Where this distributor's waits sleep: every worker notifies it after each hand-back
    /// (and, in the multi-node layout, every bridge into the node after each push).
    pub(crate) fn wake(&self) -> &Arc<CachePadded<Sleepers>> {
        &self.wake
    }

    /// Polls of the return rings so far (the first is 1).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Each worker's credit.
    pub(crate) fn credit(&self) -> u64 {
        self.credit
    }

    /// The batching state of the current call.
    pub(crate) fn batching(&self) -> Batching {
        Batching {
            publish_all: self.publish_all,
            batch: self.batch,
            hold: self.hold,
            calls: self.calls,
        }
    }

    /// The backlog's packets in order, each with the schedule's note of it (for an atomic
    /// schedule the poll that read it; 0 for a leaving worker's hand-back).
    pub(crate) fn backlog(&self) -> impl Iterator<Item = (&T, u64)> {
        self.backlog.iter()
    }

    /// Packets in the backlog.
    pub(crate) fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    /// Processed packets waiting for `collect`.
    pub(crate) fn returned_len(&self) -> usize {
        self.returned.len()
    }

    /// Moves the whole backlog, in order, to the end of `to`, and its notes to `notes`.
    pub(crate) fn take_backlog(&mut self, to: &mut Vec<T>, notes: &mut Vec<u64>) {
        notes.extend(self.backlog.take_into(to));
    }

    /// Moves the backlog packets at indices `picks` (ascending) to the end of `to`, in
    /// order, and their notes to `notes`; the others keep their order.
    pub(crate) fn take_from_backlog(
        &mut self,
        picks: &[usize],
        to: &mut Vec<T>,
        notes: &mut Vec<u64>,
    ) {
        let mut next = picks.iter().copied().peekable();
        let n = self.backlog.len();
        for k in 0..n {
            let (p, at) = self.backlog.pop_front().expect("counted");
            if next.next_if_eq(&k).is_some() {
                to.push(p);
                notes.push(at);
            } else {
                self.backlog.push_back(p, at);
            }
        }
    }

    /// Each lane's packets sent so far, by worker id.
    pub(crate) fn sent_positions(&self) -> Vec<u64> {
        self.lanes.iter().map(|l| l.sent).collect()
    }

    /// Whether every worker has completed the packets it was sent before `sent` (by worker
    /// id, from [`sent_positions`](Self::sent_positions)).
    pub(crate) fn completed_past(&self, sent: &[u64]) -> bool {
        self.lanes.iter().zip(sent).all(|(l, &s)| l.completed >= s)
    }

    /// Packets at the workers: sent and not yet handed back (`cursor` counts every
    /// hand-back read, also while a leave freezes `completed`), plus unprocessed packets a
    /// leaving worker handed back.
    pub(crate) fn held_at_workers(&self) -> u64 {
        self.lanes
            .iter()
            .map(|l| l.sent - l.cursor + l.leaving.len() as u64)
            .sum()
    }

    /// The distributor's own counts ([`DISTRIBUTOR_STATS`](super::DISTRIBUTOR_STATS)).
    pub(crate) fn counts(&self) -> &[u64; 5] {
        self.stats.values()
    }
}
