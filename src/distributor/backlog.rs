//! The distributor's backlog: the packets it routes before new input (rescheduled ones,
//! and those a leaving worker handed back), each in step with the schedule's note of it
//! (see [`schedule`](super::schedule)). Two queues moved together, so the notes cost no
//! space in the packets.

use std::collections::VecDeque;

/// Packets waiting to be routed, oldest first, each with its note.
#[derive(Debug)]
pub(super) struct Backlog<T> {
    pkts: VecDeque<T>,
    /// In step with `pkts`.
    notes: VecDeque<u64>,
}

impl<T> Backlog<T> {
    pub(super) fn new() -> Self {
        Backlog {
            pkts: VecDeque::new(),
            notes: VecDeque::new(),
        }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.pkts.len()
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Adds `p`, noted `note`, behind the others.
    pub(super) fn push_back(&mut self, p: T, note: u64) {
        self.pkts.push_back(p);
        self.notes.push_back(note);
    }

    /// Adds `p`, noted `note`, ahead of the others.
    pub(super) fn push_front(&mut self, p: T, note: u64) {
        self.pkts.push_front(p);
        self.notes.push_front(note);
    }

    /// The oldest packet and its note.
    pub(super) fn pop_front(&mut self) -> Option<(T, u64)> {
        let p = self.pkts.pop_front()?;
        let note = self.notes.pop_front().expect("in step with the packets");
        Some((p, note))
    }

    /// The oldest packet's note.
    pub(super) fn front_note(&self) -> Option<u64> {
        self.notes.front().copied()
    }

    /// The packets, oldest first.
    pub(super) fn pkts(&self) -> impl Iterator<Item = &T> {
        self.pkts.iter()
    }

    /// The packets, oldest first, each with its note.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&T, u64)> {
        self.pkts.iter().zip(self.notes.iter().copied())
    }

    /// The packets, oldest first, each with its note to change.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&T, &mut u64)> {
        self.pkts.iter().zip(self.notes.iter_mut())
    }

    /// Empties the backlog: its packets, in order, to the end of `to`; their notes are
    /// returned.
    pub(super) fn take_into(&mut self, to: &mut Vec<T>) -> VecDeque<u64> {
        to.extend(self.pkts.drain(..));
        core::mem::take(&mut self.notes)
    }
}

#[cfg(test)]
mod tests {
    use super::Backlog;

    #[test]
    fn packets_and_notes_move_together() {
        let mut b = Backlog::new();
        b.push_back('b', 2);
        b.push_front('a', 1);
        b.push_back('c', 3);
        assert_eq!((b.len(), b.front_note()), (3, Some(1)));
        assert_eq!(
            b.iter().collect::<Vec<_>>(),
            [(&'a', 1), (&'b', 2), (&'c', 3)]
        );
        assert_eq!(b.pop_front(), Some(('a', 1)));
        let mut to = vec!['z'];
        let notes = b.take_into(&mut to);
        assert_eq!((to, Vec::from(notes)), (vec!['z', 'b', 'c'], vec![2, 3]));
        assert!(b.is_empty() && b.pop_front().is_none() && b.front_note().is_none());
    }
}
