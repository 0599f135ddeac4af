//! A large `niche` ring's slots come zeroed from the allocator and are not touched until
//! used: dropping the ring reads only the slots between the ends' final positions. Checked
//! with the process's peak resident memory (`VmHWM`), in a test binary of its own so that
//! no other test moves the high-water mark.
#![cfg(all(not(loom), not(miri), target_os = "linux"))]

use flowline::fifo::niche;

fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_large_ring_is_not_touched_by_use_or_drop() {
    let before = peak_kib();
    // 2^27 slots of 8 bytes: 1 GiB of address space.
    let (mut tx, mut rx) = niche::channel::<Box<u64>>(1 << 27).unwrap();
    let (mut next, mut expect) = (0u64, 0u64);
    for _ in 0..3 {
        for _ in 0..1000 {
            tx.push(Box::new(next)).unwrap();
            next += 1;
        }
        for _ in 0..999 {
            assert_eq!(rx.pop().as_deref(), Some(&expect));
            expect += 1;
        }
    }
    drop(tx);
    drop(rx);
    let grown = peak_kib().saturating_sub(before);
    assert!(
        grown < 64 * 1024,
        "peak resident memory grew by {grown} KiB for a ring that used 3000 slots"
    );
}
