//! The words a pipeline keeps per packet: the *stamp* of each position of a worker's
//! stream (the stage, and the flow tag's low bits at an atomic or parallel stage, or the
//! sequence number at an ordered stage) and the *note* of each backlog packet (the stamp
//! or key to route it by, or the stage it left when its route is still to be asked).

/// Bits of a key below the stage (six stage bits above them; the top bit marks a backlog
/// note still to be routed).
const STAGE_SHIFT: u32 = 57;

/// The tag (or sequence number) bits of a key.
pub(super) const TAG_BITS: u64 = (1 << STAGE_SHIFT) - 1;

/// A backlog note with this bit set holds the stage its packet left (a reschedule, whose
/// route is asked for when it is routed); without it, the key to route the packet by.
pub(super) const NEEDS_ROUTE: u64 = 1 << 63;

/// The low bits of the key of a packet bound for an ordered stage that has no sequence
/// number there yet (a sequence number never reaches it: see [`seq_of`]).
pub(super) const NEW_SEQ: u64 = TAG_BITS;

/// The flow-table key and stamp of a packet at atomic or parallel `stage` of flow `tag`.
#[inline(always)]
pub(super) fn key(stage: usize, tag: u64) -> u64 {
    ((stage as u64) << STAGE_SHIFT) | (tag & TAG_BITS)
}

/// The key of a packet entering ordered `stage` that takes a new sequence number there.
#[inline(always)]
pub(super) fn new_seq_key(stage: usize) -> u64 {
    key(stage, NEW_SEQ)
}

/// The stage a stamp or note names.
#[inline(always)]
pub(super) fn stage_of(stamp: u64) -> usize {
    ((stamp & !NEEDS_ROUTE) >> STAGE_SHIFT) as usize
}

/// The sequence number in the stamp of a packet at an ordered stage. Sequence numbers
/// count the packets that entered the stage, in the stamp's 57 bits: they wrap after
/// 2^57 - 1 packets through one stage (centuries at a billion packets a second).
#[inline(always)]
pub(super) fn seq_of(stamp: u64) -> u64 {
    stamp & TAG_BITS
}

/// Panics unless a packet at stage `from` may go to `to`, one of `n` stages: its own
/// stage or a later one.
#[inline(always)]
pub(super) fn check_move(from: usize, to: usize, n: usize) {
    if to >= n {
        bad_stage(to, n);
    }
    if to < from {
        moved_back(from, to);
    }
}

#[cold]
#[inline(never)]
pub(super) fn bad_stage(stage: usize, n: usize) -> ! {
    panic!(
        "pipeline: `route` gave stage {stage}, but the pipeline has {n} stages (0 to {})",
        n - 1
    )
}

#[cold]
#[inline(never)]
fn moved_back(from: usize, to: usize) -> ! {
    panic!(
        "pipeline: a packet at stage {from} was forwarded back to stage {to}; a forward goes to \
         the packet's own stage or a later one"
    )
}

#[cfg(test)]
mod tests {
    use super::{key, new_seq_key, seq_of, stage_of, NEEDS_ROUTE, NEW_SEQ, TAG_BITS};

    #[test]
    fn keys_keep_stage_and_low_bits_apart() {
        for stage in [0, 1, 17, 63] {
            for tag in [0, 1, 12345, TAG_BITS - 1, u64::MAX] {
                let k = key(stage, tag);
                assert_eq!((stage_of(k), seq_of(k)), (stage, tag & TAG_BITS));
                assert_eq!(stage_of(k | NEEDS_ROUTE), stage);
                assert_eq!(k & NEEDS_ROUTE, 0);
            }
            assert_eq!(seq_of(new_seq_key(stage)), NEW_SEQ);
        }
    }
}
