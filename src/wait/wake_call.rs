//! The call from a publisher's check into the wake of its sleepers, made so that the
//! publisher's loop keeps its values in registers: on x86_64 Linux an `asm!` block saves
//! every general register that the call may clobber, calls the wake, and restores them.
//!
//! A plain call on the cold branch of the check, even one never taken, makes the compiler
//! keep the loop's values where a call cannot clobber them: a loop that pushes or pops
//! single items then stores them to the stack on every item, and those stores queue behind
//! the index store while the other end holds the index's line (the measurements are in
//! `docs/performance-notes.md`, section 14). The block below tells the compiler that only
//! the vector, mask, x87 and tile registers and the flags change (the registers no
//! ring loop keeps across a publication), so the hot path is the load, the test and a
//! branch not taken. This is what a caller-saves-nothing calling convention
//! (`preserve_most` in LLVM) would do, written out because Rust has none on stable.
//!
//! Elsewhere, and under Miri and loom, the check calls the wake directly.

use super::*;

impl Sleepers {
    /// The publisher's check found `w` (not 0) in the sleeper word: the rest of the check,
    /// [`notify_slow`](Self::notify_slow), called without clobbering a general register.
    #[inline(always)]
    pub(super) fn notify_cold(&self, w: u32) {
        #[cfg(all(
            target_arch = "x86_64",
            target_pointer_width = "64",
            target_os = "linux",
            not(loom),
            not(miri)
        ))]
        {
            // The callee loads the word again: a load after the same index store, so it proves
            // as much as the one that found `w`.
            let _ = w;
            registers_kept::call(self);
        }
        #[cfg(not(all(
            target_arch = "x86_64",
            target_pointer_width = "64",
            target_os = "linux",
            not(loom),
            not(miri)
        )))]
        self.notify_slow(w);
    }
}

/// The `asm!` call and its C entry, on the targets where the block is written.
#[cfg(all(
    target_arch = "x86_64",
    target_pointer_width = "64",
    target_os = "linux",
    not(loom),
    not(miri)
))]
mod registers_kept {
    use super::*;

    /// [`Sleepers::notify_slow`] for `s` from an `asm!` block that saves and restores every
    /// general register the call may clobber.
    ///
    /// What the block relies on: the stack pointer is aligned for a call on entry (no
    /// `nostack`, so the block may push; the call pushes its return address and nothing
    /// else), the direction flag is clear (Rust's guarantee on entry), and the callee never
    /// unwinds (`notify_from_asm` aborts instead). The callee may clobber the System V
    /// ABI's caller-saved registers: the nine general ones are stored to `saved` (80 bytes
    /// of this frame, written by this block only) with `r12`, which is then the base the
    /// callee preserves, and all ten are loaded back from it (`rdi`, the input, included);
    /// the vector, mask, x87, MMX and tile registers and the flags are declared clobbered.
    /// The stack pointer is the same at the call as on entry, so the caller's unwind tables
    /// still describe the frame while the callee runs (a backtrace taken in a waker walks
    /// through it). The block may read and write memory (the callee takes the sleepers'
    /// mutex and runs wakers): no `readonly`, no `nomem`. `call` to a symbol assembles to a
    /// PLT-relative call, which links in position-independent code too.
    #[inline(always)]
    pub(super) fn call(s: &Sleepers) {
        let mut saved = core::mem::MaybeUninit::<[u64; 10]>::uninit();
        // SAFETY: `s` is live for the call and goes in `rdi` as `notify_from_asm` takes it;
        // every general register the callee may clobber is saved to `saved` and restored,
        // every other one is declared clobbered, and the stack pointer is aligned and
        // unmoved at the call (the function's docs spell each out).
        unsafe {
            core::arch::asm!(
                "mov qword ptr [{buf}], rax",
                "mov qword ptr [{buf} + 8], rcx",
                "mov qword ptr [{buf} + 16], rdx",
                "mov qword ptr [{buf} + 24], rsi",
                "mov qword ptr [{buf} + 32], rdi",
                "mov qword ptr [{buf} + 40], r8",
                "mov qword ptr [{buf} + 48], r9",
                "mov qword ptr [{buf} + 56], r10",
                "mov qword ptr [{buf} + 64], r11",
                "mov qword ptr [{buf} + 72], r12",
                "mov r12, {buf}",
                "call {entry}",
                "mov rax, qword ptr [r12]",
                "mov rcx, qword ptr [r12 + 8]",
                "mov rdx, qword ptr [r12 + 16]",
                "mov rsi, qword ptr [r12 + 24]",
                "mov rdi, qword ptr [r12 + 32]",
                "mov r8, qword ptr [r12 + 40]",
                "mov r9, qword ptr [r12 + 48]",
                "mov r10, qword ptr [r12 + 56]",
                "mov r11, qword ptr [r12 + 64]",
                "mov r12, qword ptr [r12 + 72]",
                buf = in(reg) saved.as_mut_ptr(),
                entry = sym notify_from_asm,
                in("rdi") s as *const Sleepers,
                out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
                out("xmm16") _, out("xmm17") _, out("xmm18") _, out("xmm19") _,
                out("xmm20") _, out("xmm21") _, out("xmm22") _, out("xmm23") _,
                out("xmm24") _, out("xmm25") _, out("xmm26") _, out("xmm27") _,
                out("xmm28") _, out("xmm29") _, out("xmm30") _, out("xmm31") _,
                out("k0") _, out("k1") _, out("k2") _, out("k3") _,
                out("k4") _, out("k5") _, out("k6") _, out("k7") _,
                out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
                out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
                out("mm0") _, out("mm1") _, out("mm2") _, out("mm3") _,
                out("mm4") _, out("mm5") _, out("mm6") _, out("mm7") _,
                out("tmm0") _, out("tmm1") _, out("tmm2") _, out("tmm3") _,
                out("tmm4") _, out("tmm5") _, out("tmm6") _, out("tmm7") _,
            );
        }
    }

    /// [`Sleepers::notify_slow`] behind the C calling convention, for the `asm!` call above.
    /// It never unwinds: `notify_slow` contains the panics of the wakers it runs, and any
    /// other panic there (none is known) aborts the process instead of unwinding into the
    /// block.
    ///
    /// # Safety
    ///
    /// `s` points to live [`Sleepers`].
    #[cold]
    #[inline(never)]
    unsafe extern "C" fn notify_from_asm(s: *const Sleepers) {
        struct AbortOnUnwind;
        impl Drop for AbortOnUnwind {
            fn drop(&mut self) {
                std::process::abort();
            }
        }
        let guard = AbortOnUnwind;
        // SAFETY: the caller's contract: `s` is live for this call.
        unsafe { (*s).notify_slow((*s).waiting.load(Ordering::Relaxed)) };
        core::mem::forget(guard);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Twelve integers and four floats, all live across a publisher's check that finds a
    /// sleeper each round; `s` `None` runs the same arithmetic with no check.
    #[inline(never)]
    fn busy_loop(s: Option<&Sleepers>, rounds: u64) -> (u64, f64) {
        let [mut a, mut b, mut c, mut d, mut e, mut f] = [1u64, 2, 3, 4, 5, 6];
        let [mut g, mut h, mut i, mut j, mut k, mut l] = [7u64, 8, 9, 10, 11, 12];
        let [mut x, mut y, mut z, mut w] = [0.5f64, 1.5, 2.5, 3.5];
        for r in 0..rounds {
            a = a.wrapping_mul(31).wrapping_add(r ^ l);
            b = b.rotate_left(5) ^ a;
            c = c.wrapping_add(b).wrapping_mul(7);
            d ^= c.rotate_right(11);
            e = e.wrapping_sub(d) ^ r;
            f = f.wrapping_mul(e | 1);
            x = x * 1.000_001 + (a & 0xff) as f64;
            y = y * 0.999_999 + (f & 0xff) as f64;
            if let Some(s) = s {
                s.notify();
            }
            g = g.wrapping_add(f).rotate_left(3);
            h ^= g.wrapping_mul(13);
            i = i.wrapping_add(h ^ a);
            j = j.rotate_left(7).wrapping_add(i);
            k = k.wrapping_mul(j | 1) ^ b;
            l = l.wrapping_add(k).wrapping_sub(c);
            z = z * 1.000_002 + (l & 0xff) as f64;
            w = w * 0.999_998 + (k & 0xff) as f64;
        }
        let ints = [a, b, c, d, e, f, g, h, i, j, k, l];
        let hash = ints.iter().fold(0u64, |s, v| s.rotate_left(9) ^ v);
        (hash, x + y + z + w)
    }

    /// The wake call hands every value the caller's loop holds back unchanged: a loop that
    /// keeps sixteen values live across a check that takes the wake path each round
    /// computes what it computes with no check at all.
    #[test]
    fn the_wake_path_keeps_the_callers_values() {
        register();
        // A loop whose counter lost its value could run on: it runs on a thread of its
        // own, and the test fails if it does not end in time.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let s = Sleepers::new();
            // A sleeper announced and never waiting: every check takes the wake path (the
            // wake leaves a thread sleeper's count alone).
            s.waiting.fetch_add(1, Ordering::SeqCst);
            let rounds = if cfg!(miri) {
                [1, 7, 50, 200]
            } else {
                [1, 7, 1000, 20_000]
            };
            let runs = rounds.map(|n| (busy_loop(Some(&s), n), busy_loop(None, n)));
            let _ = done.send((runs, s.has_sleepers()));
        });
        let (runs, sleeper) = finished
            .recv_timeout(Duration::from_secs(120))
            .expect("the loops ended");
        for (with_check, without) in runs {
            assert_eq!(with_check, without);
        }
        assert!(sleeper);
    }

    /// A waker run by the wake path can walk the stack through the call (a backtrace
    /// from a waker, or from a contained panic with `RUST_BACKTRACE` set, does).
    #[cfg(all(feature = "async", not(miri)))]
    #[test]
    fn a_waker_can_walk_the_stack_through_the_wake_call() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        use std::task::{Wake, Waker};

        struct Walks(AtomicBool);
        impl Wake for Walks {
            fn wake(self: Arc<Self>) {
                let bt = std::backtrace::Backtrace::force_capture();
                // The walk reached the test's own frame, above the wake call's block.
                let text = format!("{bt}");
                let through = text.contains("a_waker_can_walk_the_stack_through_the_wake_call");
                self.0.store(through, Ordering::SeqCst);
            }
        }
        register();
        let s = Sleepers::new();
        let walks = Arc::new(Walks(AtomicBool::new(false)));
        let waker = Waker::from(Arc::clone(&walks));
        let mut key = None;
        assert!(!s.register_waker(&mut key, &waker, || false));
        s.notify();
        assert!(
            walks.0.load(Ordering::SeqCst),
            "the waker ran and walked the stack past the call"
        );
    }
}
