//! The shapes the instruction benchmarks share (`instructions.rs` for flowline, `peers.rs`
//! for rtrb and crossbeam): the operation count, the ring size, and the single-item and
//! burst loops. Each expands where `black_box` and `library_benchmark` are in scope.

/// Operations (items, bursts' items, packets) per benchmark.
pub const N: usize = 4096;
/// Slots per ring.
pub const RING: usize = 1024;

/// Pushes then pops one item, `N` times, through two closures over the same ring ends.
macro_rules! single {
    ($name:ident, $setup:ident: $ends:ty, |$tx:ident, $v:ident| $push:expr, |$rx:ident| $pop:expr) => {
        #[library_benchmark]
        #[bench::n(setup = $setup)]
        fn $name(ends: $ends) -> u64 {
            #[allow(unused_mut)]
            let (mut $tx, mut $rx) = ends;
            let mut sum = 0u64;
            for i in 0..N as u64 {
                let $v = black_box(i | 1);
                $push;
                sum = sum.wrapping_add($pop);
            }
            black_box(($tx, $rx));
            sum
        }
    };
}

/// Pushes then pops a burst of `$b`, `N / $b` times (`N` items).
macro_rules! burst {
    ($name:ident, $setup:ident: $ends:ty, $b:literal, $t:ty, $one:expr,
     |$tx:ident, $src:ident| $push:expr, |$rx:ident, $dst:ident| $pop:expr) => {
        #[library_benchmark]
        #[bench::n(setup = $setup)]
        fn $name(ends: $ends) -> usize {
            #[allow(unused_mut)]
            let (mut $tx, mut $rx) = ends;
            let $src: [$t; $b] = [$one; $b];
            let mut $dst: [$t; $b] = [$one; $b];
            let mut moved = 0;
            for _ in 0..N / $b {
                let $src = black_box(&$src);
                assert_eq!($push, $b);
                assert_eq!($pop, $b);
                moved += black_box(&$dst).len();
            }
            black_box(($tx, $rx));
            moved
        }
    };
}
