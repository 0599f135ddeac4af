//! The packets a worker hands back out of order, held on its side until they can go back in
//! order: a reorder buffer indexed by stream position modulo the credit window (the
//! scheme of DPDK's `rte_reorder` library), with the hand-back order kept beside it.
//!
//! The visibility rule: a packet handed back by ticket past an older packet still held
//! ([`Worker::done_at`](super::Worker::done_at), [`forward_at`](super::Worker::forward_at))
//! reaches the distributor when every older packet has been handed back (it then follows
//! them on the ring of processed packets, as an in-order hand-back), or at the worker's
//! next receive, [`publish_handed_back`](super::Worker::publish_handed_back), out-of-order
//! drop or reschedule, leave or drop (it then goes on the control ring with its position,
//! in the order the packets were handed back), whichever comes first. Nothing here is
//! shared: the rule is kept by the worker's calls alone.

use alloc::boxed::Box;
use alloc::vec::Vec;

/// The worker's staged hand-backs (see the module documentation).
pub(crate) struct Staging<T> {
    /// Slot `pos % window`: the packet handed back at stream position `pos`, with `pos`.
    /// Allocated at the first out-of-order hand-back.
    slots: Box<[Option<(u64, T)>]>,
    /// The credit window's size (a power of two): no two positions in flight share a slot.
    window: usize,
    /// Positions staged, in the order they were handed back, in `order[..order_len]` (a
    /// position gone in order since has an empty slot, or a slot holding a later
    /// position). Emptied whenever no slot is in use: between two empty moments every
    /// entry is a distinct position of one credit window, so `window` entries suffice.
    order: Box<[u64]>,
    order_len: usize,
    /// Slots in use.
    n: usize,
}

impl<T> Staging<T> {
    /// An empty staging area for a credit window of `window` positions (a power of two).
    pub(crate) fn new(window: usize) -> Self {
        debug_assert!(window.is_power_of_two());
        Staging {
            slots: Box::new([]),
            window,
            order: Box::new([]),
            order_len: 0,
            n: 0,
        }
    }

    /// Whether no packet is staged.
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// How many packets are staged.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// Stages `pkt`, handed back at `pos` (a position in flight, not staged yet); gives it
    /// back if the slots, allocated at the first use, cannot be.
    pub(crate) fn put(&mut self, pos: u64, pkt: T) -> Result<(), T> {
        if self.slots.is_empty() && !self.allocate() {
            return Err(pkt);
        }
        let slot = &mut self.slots[pos as usize & (self.window - 1)];
        debug_assert!(slot.is_none(), "two positions in flight share a slot");
        *slot = Some((pos, pkt));
        self.order[self.order_len] = pos;
        self.order_len += 1;
        self.n += 1;
        Ok(())
    }

    /// Allocates the slots and room for the hand-back order; whether it could (an
    /// allocation failure leaves the staging unused, never aborts).
    #[cold]
    fn allocate(&mut self) -> bool {
        let mut slots = Vec::new();
        let mut order = Vec::new();
        if slots.try_reserve_exact(self.window).is_err()
            || order.try_reserve_exact(self.window).is_err()
        {
            return false;
        }
        slots.resize_with(self.window, || None);
        order.resize(self.window, 0);
        self.slots = slots.into_boxed_slice();
        self.order = order.into_boxed_slice();
        true
    }

    /// Whether a packet is staged at `pos`.
    pub(crate) fn holds(&self, pos: u64) -> bool {
        self.n != 0
            && matches!(&self.slots[pos as usize & (self.window - 1)], Some((p, _)) if *p == pos)
    }

    /// The packet staged at `pos`, taken out, if there is one.
    #[inline]
    pub(crate) fn take(&mut self, pos: u64) -> Option<T> {
        if self.n == 0 {
            return None;
        }
        let slot = &mut self.slots[pos as usize & (self.window - 1)];
        match slot {
            Some((p, _)) if *p == pos => {}
            _ => return None,
        }
        let (_, pkt) = slot.take()?;
        self.taken();
        Some(pkt)
    }

    /// The packet staged at `pos`, which the caller knows is there.
    #[inline]
    pub(crate) fn take_known(&mut self, pos: u64) -> T {
        match self.slots[pos as usize & (self.window - 1)].take() {
            Some((p, pkt)) if p == pos => {
                self.taken();
                pkt
            }
            _ => unreachable!("position {pos} is staged"),
        }
    }

    /// One slot less in use; the order forgotten once none is.
    #[inline(always)]
    fn taken(&mut self) {
        self.n -= 1;
        if self.n == 0 {
            self.order_len = 0;
        }
    }

    /// How many entries the hand-back order has (see [`order_at`](Self::order_at)); 0 once
    /// nothing is staged.
    pub(crate) fn order_len(&self) -> usize {
        self.order_len
    }

    /// Entry `i` of the hand-back order: a position that was staged, perhaps gone since
    /// ([`take`](Self::take) then finds nothing there).
    pub(crate) fn order_at(&self, i: usize) -> u64 {
        self.order[i]
    }
}

#[cfg(test)]
mod tests {
    use super::Staging;

    #[test]
    fn slots_are_found_by_position_and_a_reused_slot_is_not_mistaken() {
        let mut s = Staging::new(4);
        assert!(s.take(0).is_none());
        s.put(1, 'a').unwrap();
        s.put(3, 'b').unwrap();
        assert_eq!(s.len(), 2);
        // Position 5 shares slot 1 with position 1: not the same packet.
        assert!(s.take(5).is_none());
        assert_eq!(s.take(1), Some('a'));
        s.put(5, 'c').unwrap();
        assert!(s.take(1).is_none());
        let order: Vec<u64> = (0..s.order_len()).map(|i| s.order_at(i)).collect();
        assert_eq!(order, [1, 3, 5]);
        assert_eq!(s.take(3), Some('b'));
        assert_eq!(s.take_known(5), 'c');
        assert!(s.is_empty());
        assert_eq!(s.order_len(), 0);
    }

    #[test]
    fn slots_that_cannot_be_allocated_give_the_packet_back() {
        let mut s = Staging::new(1 << 60);
        assert_eq!(s.put(3, 'a'), Err('a'));
        assert!(s.is_empty() && s.take(3).is_none());
    }

    #[test]
    fn positions_past_the_wrap_of_a_word_index_still_map_to_their_slot() {
        let mut s = Staging::new(8);
        let pos = u64::MAX - 2;
        s.put(pos, 1u8).unwrap();
        s.put(pos.wrapping_add(3), 2).unwrap();
        assert_eq!(s.take(pos.wrapping_add(3)), Some(2));
        assert_eq!(s.take(pos), Some(1));
        assert!(s.is_empty());
    }
}
