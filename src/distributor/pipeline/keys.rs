//! The words a pipeline keeps per packet: the *stamp* of each position of a worker's
//! stream (the stage, and the flow tag's low bits at an atomic or parallel stage, or the
//! sequence number modulo [`SEQ_MOD`] at an ordered stage) and the *note* of each backlog
//! packet (the stamp or key to route it by, or the stage it left when its route is still
//! to be asked).

/// Bits of a key below the stage (six stage bits above them; the top bit marks a backlog
/// note still to be routed).
const STAGE_SHIFT: u32 = 57;

/// The tag (or sequence number) bits of a key.
pub(super) const TAG_BITS: u64 = (1 << STAGE_SHIFT) - 1;

/// A backlog note with this bit set holds the stage its packet left (a reschedule, whose
/// route is asked for when it is routed); without it, the key to route the packet by.
pub(super) const NEEDS_ROUTE: u64 = 1 << 63;

/// The low bits of the key of a packet bound for an ordered stage that has no sequence
/// number there yet (a stamp's sequence bits never reach it: see [`SEQ_MOD`]).
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

/// The sequence-number bits in the stamp of a packet at an ordered stage: its window's
/// sequence number modulo [`SEQ_MOD`] ([`low_seq`]; [`full_seq`] gives it back).
#[inline(always)]
pub(super) fn seq_of(stamp: u64) -> u64 {
    stamp & TAG_BITS
}

/// A stamp holds a sequence number modulo this (2^57 - 1): its low bits then never equal
/// [`NEW_SEQ`], and a stage's count wraps in the stamp (after 2^57 - 1 packets, about
/// four and a half years at a billion packets a second) without a collision, since the
/// sequence numbers in flight span one window, far less than this.
pub(super) const SEQ_MOD: u64 = TAG_BITS;

/// The bits a stamp keeps of window sequence number `seq`: `seq` modulo [`SEQ_MOD`],
/// by folding (2^57 is 1 modulo 2^57 - 1, so the bits above 57 add to those below).
#[inline(always)]
pub(super) fn low_seq(seq: u64) -> u64 {
    // At most SEQ_MOD + 127: one subtraction brings it below SEQ_MOD.
    let folded = (seq & SEQ_MOD) + (seq >> STAGE_SHIFT);
    if folded >= SEQ_MOD {
        folded - SEQ_MOD
    } else {
        folded
    }
}

/// The stamp bits of the sequence number after the one whose bits are `low` (below
/// [`SEQ_MOD`]): `low_seq(seq + 1)` from `low_seq(seq)`, without the fold.
#[inline(always)]
pub(super) fn next_low(low: u64) -> u64 {
    let next = low + 1;
    if next == SEQ_MOD {
        0
    } else {
        next
    }
}

/// The stamp at an ordered stage of the sequence number after `stamp`'s: [`next_low`]
/// of its bits, the stage kept.
#[inline(always)]
pub(super) fn next_stamp(stamp: u64) -> u64 {
    let next = stamp + 1;
    if next & TAG_BITS == SEQ_MOD {
        next - SEQ_MOD
    } else {
        next
    }
}

/// The window sequence number whose stamp bits are `low`, given the window's oldest
/// unreleased one: the only one at or past `oldest` within [`SEQ_MOD`] of it (every
/// sequence number in flight is, the window being far smaller).
#[inline(always)]
pub(super) fn full_seq(oldest: u64, low: u64) -> u64 {
    debug_assert!(low < SEQ_MOD);
    let base = low_seq(oldest);
    oldest
        + if low >= base {
            low - base
        } else {
            low + SEQ_MOD - base
        }
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
    use super::{
        full_seq, key, low_seq, new_seq_key, next_low, next_stamp, seq_of, stage_of, NEEDS_ROUTE,
        NEW_SEQ, SEQ_MOD, TAG_BITS,
    };

    /// Stamp bits never read as a new packet's, and every sequence number within a
    /// window of the oldest comes back whole, across each wrap of the stamp bits.
    #[test]
    fn sequence_numbers_wrap_in_the_stamp_and_come_back_whole() {
        for oldest in [0, 5, SEQ_MOD - 3, SEQ_MOD, 2 * SEQ_MOD - 1, u64::MAX - 5000] {
            for d in [0u64, 1, 2, 3, 4, 1000, 4095] {
                let Some(seq) = oldest.checked_add(d) else {
                    continue;
                };
                let low = low_seq(seq);
                assert_ne!(low, NEW_SEQ);
                assert_eq!(seq_of(key(3, low)), low);
                assert_eq!(full_seq(oldest, low), seq, "oldest {oldest}, seq {seq}");
            }
        }
    }

    /// The fold is the remainder, at the edges of each 57-bit block and elsewhere.
    #[test]
    fn low_seq_is_the_remainder() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let edges = [
            0,
            1,
            SEQ_MOD - 1,
            SEQ_MOD,
            SEQ_MOD + 1,
            1 << 57,
            (1 << 58) - 1,
            u64::MAX,
        ];
        for seq in edges.into_iter().chain((0..1000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })) {
            assert_eq!(low_seq(seq), seq % SEQ_MOD, "{seq}");
            if let Some(after) = seq.checked_add(1) {
                assert_eq!(next_low(low_seq(seq)), low_seq(after), "after {seq}");
                for stage in [0, 5, 63] {
                    let next = next_stamp(key(stage, low_seq(seq)));
                    assert_eq!(next, key(stage, low_seq(after)), "after {seq}");
                }
            }
        }
    }

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
