//! The slot a single pop or peek reads, chosen without a branch so that a pop the CPU
//! runs ahead of a mispredicted emptiness check reads the slot before, not the line the
//! producer is writing: speculative load hardening (Chandler Carruth's, in LLVM), applied
//! to cache-line ownership rather than to secrets.
//!
//! A consumer's loop predicts that the next item is there. At the end of what it has seen,
//! the CPU has already issued the load of the next slot before the comparison that says
//! "no more" resolves, and that load takes the slot's line from the producer, which is
//! writing it; the producer's next write must take it back. A consumer that keeps up with
//! its producer reaches the end of what it has seen every few items, so the line the
//! producer writes goes back and forth every few items, and whether a given loop does this
//! depends on how fast it happens to run (its code layout, the work around it). Choosing the
//! slot by a conditional move on the same comparison makes the load's address wait for the
//! comparison: a pop that runs ahead past the last item it has seen reads the slot before
//! it instead, almost always the one it read last (not on a ring's first pop, in a ring of
//! one slot, or after an MPSC consumer skipped a run's empty slots: a wasted speculative
//! read, nothing worse). The architectural result never changes (a pop reads a slot only
//! after the comparison found an item there). Measured in `docs/performance-notes.md` (in
//! the repository), "Speculative reads past the last item".
//!
//! The choice is an `asm!` block on x86_64 and aarch64, opaque to the compiler, which
//! would otherwise fold it away (on the path that reads, it knows the two values differ).
//! Elsewhere, and under Miri and loom, it is the plain expression.

/// `index`, unless it equals `end`, the end of the items the caller has seen: then the
/// index before it (`index - 1`, wrapping). A single pop or peek calls it with its read
/// position and its cached end, after finding that they differ, and reads the slot it
/// returns.
#[inline(always)]
pub(crate) fn index_unless_end(index: u64, end: u64) -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
    {
        let mut chosen = index;
        // SAFETY: register arithmetic, a compare and a conditional move: no memory, no
        // stack, no other register or state than the flags, which the block declares
        // clobbered (the default without `preserves_flags`).
        unsafe {
            core::arch::asm!(
                "lea {before}, [{chosen} - 1]",
                "cmp {chosen}, {end}",
                "cmove {chosen}, {before}",
                end = in(reg) end,
                before = out(reg) _,
                chosen = inout(reg) chosen,
                options(pure, nomem, nostack),
            );
        }
        chosen
    }
    #[cfg(all(target_arch = "aarch64", not(miri), not(loom)))]
    {
        let before = index.wrapping_sub(1);
        let chosen: u64;
        // SAFETY: a compare and a conditional select between registers: no memory, no
        // stack, no other state than the flags (declared clobbered by default).
        unsafe {
            core::arch::asm!(
                "cmp {index}, {end}",
                "csel {chosen}, {before}, {index}, eq",
                index = in(reg) index,
                end = in(reg) end,
                before = in(reg) before,
                chosen = lateout(reg) chosen,
                options(pure, nomem, nostack),
            );
        }
        chosen
    }
    #[cfg(not(all(
        any(target_arch = "x86_64", target_arch = "aarch64"),
        not(miri),
        not(loom)
    )))]
    {
        if index == end {
            index.wrapping_sub(1)
        } else {
            index
        }
    }
}

#[cfg(test)]
mod tests {
    use super::index_unless_end;

    #[test]
    fn the_index_unless_it_is_the_end() {
        assert_eq!(index_unless_end(5, 9), 5);
        assert_eq!(index_unless_end(9, 5), 9);
        assert_eq!(index_unless_end(9, 9), 8);
        // Wrapped indices: the end of the index space and its start.
        assert_eq!(index_unless_end(0, 0), u64::MAX);
        assert_eq!(index_unless_end(u64::MAX, 0), u64::MAX);
        assert_eq!(index_unless_end(0, u64::MAX), 0);
        assert_eq!(index_unless_end(u64::MAX, u64::MAX), u64::MAX - 1);
        // Values that differ only in their high half (a 32-bit compare would find them equal).
        assert_eq!(index_unless_end(1 << 32, 0), 1 << 32);
        assert_eq!(index_unless_end(7, 7 | 1 << 40), 7);
    }
}
