//! The distributor's backlog: the packets it routes before new input (rescheduled ones,
//! and those a leaving worker handed back), each in step with the schedule's note of it
//! (see [`schedule`](super::schedule)). One double-ended queue of (packet, note) pairs, so
//! a packet and its note move with one index update.

use std::collections::VecDeque;

/// Packets waiting to be routed, oldest first, each with its note.
#[derive(Debug)]
pub(super) struct Backlog<T> {
    entries: VecDeque<(T, u64)>,
}

impl<T> Backlog<T> {
    pub(super) fn new() -> Self {
        Backlog {
            entries: VecDeque::new(),
        }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds `p`, noted `note`, behind the others.
    pub(super) fn push_back(&mut self, p: T, note: u64) {
        self.entries.push_back((p, note));
    }

    /// Adds the packets of `it`, each with its note, behind the others.
    pub(super) fn extend(&mut self, it: impl Iterator<Item = (T, u64)>) {
        self.entries.extend(it);
    }

    /// Adds `p`, noted `note`, ahead of the others.
    pub(super) fn push_front(&mut self, p: T, note: u64) {
        self.entries.push_front((p, note));
    }

    /// The oldest packet and its note.
    pub(super) fn pop_front(&mut self) -> Option<(T, u64)> {
        self.entries.pop_front()
    }

    /// The oldest packet's note.
    pub(super) fn front_note(&self) -> Option<u64> {
        self.entries.front().map(|e| e.1)
    }

    /// The packets, oldest first.
    pub(super) fn pkts(&self) -> impl Iterator<Item = &T> {
        self.entries.iter().map(|e| &e.0)
    }

    /// The packets, oldest first, each with its note.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&T, u64)> {
        self.entries.iter().map(|e| (&e.0, e.1))
    }

    /// The packets, oldest first, each with its note to change.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&T, &mut u64)> {
        self.entries.iter_mut().map(|e| (&e.0, &mut e.1))
    }

    /// Empties the backlog: its packets, in order, to the end of `to`; their notes are
    /// returned.
    pub(super) fn take_into(&mut self, to: &mut Vec<T>) -> VecDeque<u64> {
        let mut notes = VecDeque::with_capacity(self.entries.len());
        to.extend(self.entries.drain(..).map(|(p, note)| {
            notes.push_back(note);
            p
        }));
        notes
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
