//! Unit tests of polite polling: when a read pauses, and how its state moves.

use super::*;

/// Feeds `gains` to a fresh state, waiting whenever it says so, and returns how many
/// reads waited.
fn waits(gains: impl IntoIterator<Item = usize>) -> usize {
    let mut p = Polite::new();
    let mut n = 0;
    for g in gains {
        let w = p.should_wait();
        n += usize::from(w);
        p.observe(g, w, true);
    }
    n
}

#[test]
fn large_reads_are_counted_in_bytes() {
    let large = PolitePolling::LargeReads;
    assert_eq!(large.min_want(8), 32);
    assert_eq!(large.min_want(64), 4);
    assert_eq!(large.min_want(100), 3);
    assert_eq!(large.min_want(256), 1);
    assert_eq!(large.min_want(4096), 1);
    assert_eq!(large.min_want(0), usize::MAX, "zero-sized items never wait");
    assert_eq!(PolitePolling::On.min_want(8), 1);
    assert_eq!(PolitePolling::Off.min_want(8), usize::MAX);
    assert_eq!(PolitePolling::default(), PolitePolling::Off);
}

#[test]
fn a_consumer_that_waits_for_each_item_never_waits_politely() {
    // Ping-pong: reads find nothing until the one item comes.
    let gains = (0..if cfg!(miri) { 1_000 } else { 10_000 }).map(|i| usize::from(i % 5 == 4));
    assert_eq!(waits(gains), 0);
}

#[test]
fn a_trailing_consumer_waits_while_waiting_pays_off() {
    // Two reads with one item each, then every (waited) read brings a line or more.
    let gains = [1, 1]
        .into_iter()
        .chain(core::iter::repeat(PAYOFF).take(1000));
    assert_eq!(waits(gains), 1000);
}

#[test]
fn waits_that_bring_little_get_rarer_up_to_the_maximum_hold() {
    // A producer on the consumer's own thread: every read finds exactly one item.
    let reads = if cfg!(miri) { 12_000 } else { 100_000 };
    let n = waits(core::iter::repeat(1).take(reads));
    // Holds 2, 4, ..., 2048: 11 waits, each after `hold` reads, so 4094 + 11 reads;
    // then one wait per 4097 reads at the maximum hold.
    assert_eq!(n, 11 + (reads - 4105) / 4097);
    let mut p = Polite::new();
    for _ in 0..20 {
        p.observe(1, false, true);
        p.observe(1, false, true);
        p.observe(1, true, true);
    }
    assert!(p.hold == MAX_HOLD);
    // A wait that pays off brings the hold back to the minimum.
    p.observe(1, true, true);
    p.observe(PAYOFF, true, true);
    assert_eq!(p.hold, MIN_HOLD);
}

#[test]
fn waits_that_bring_no_more_than_reads_without_them_get_rarer() {
    // A producer on the consumer's own thread pushes 8 items before each drain of 8
    // (the consumer never finds the ring empty): every read finds 8, waited or not.
    let reads = if cfg!(miri) { 12_000 } else { 100_000 };
    let n = waits(core::iter::repeat(PAYOFF).take(reads));
    assert_eq!(n, 11 + (reads - 4105) / 4097);
    // Bigger batches alike.
    let n = waits(core::iter::repeat(100).take(reads));
    assert_eq!(n, 11 + (reads - 4105) / 4097);
    // A trailing consumer: one or two items per read without a wait, a line after one.
    let mut p = Polite::new();
    p.observe(2, false, true);
    p.observe(1, false, true);
    assert!(p.should_wait());
    p.observe(PAYOFF - 1, true, true);
    assert_eq!(p.hold, 2 * MIN_HOLD, "fewer than PAYOFF: not paid off");
    p.observe(2, false, true);
    p.observe(2, false, true);
    p.observe(2, false, true);
    p.observe(2, false, true);
    assert!(p.should_wait());
    p.observe(PAYOFF, true, true);
    assert_eq!(
        p.hold, MIN_HOLD,
        "PAYOFF and twice the last unwaited gain: paid off"
    );
    p.observe(PAYOFF, true, true);
    assert_eq!(
        p.hold, MIN_HOLD,
        "waits that go on paying off keep the minimum hold"
    );
    // Twice the last unwaited read is needed, not just PAYOFF.
    p.observe(0, false, true);
    p.observe(4, false, true);
    p.observe(10, false, true);
    assert!(p.should_wait());
    p.observe(19, true, true);
    assert_eq!(p.hold, 2 * MIN_HOLD, "19 < 2 * 10");
    // A read that tops up a partly used cached view is not compared.
    for _ in 0..4 {
        p.observe(1, false, true);
    }
    p.observe(50, false, false);
    assert!(p.should_wait());
    p.observe(PAYOFF, true, true);
    assert_eq!(p.hold, MIN_HOLD, "the top-up of 50 is not counted");
    // A huge unwaited gain saturates instead of wrapping (70_000 as u16 would be 4464).
    p.observe(70_000, false, true);
    assert_eq!(p.last, u16::MAX);
    assert!(p.should_wait());
    p.observe(usize::from(u16::MAX), true, true);
    assert_eq!(p.hold, 2 * MIN_HOLD);
}

#[test]
fn a_read_that_finds_nothing_ends_the_streak() {
    let mut p = Polite::new();
    p.observe(1, false, true);
    p.observe(1, false, true);
    assert!(p.should_wait());
    p.observe(0, true, true);
    assert!(!p.should_wait());
    p.observe(3, false, true);
    assert!(!p.should_wait());
}

#[test]
fn a_disabled_state_never_waits() {
    let mut p = Polite::new();
    p.set_enabled(false);
    assert!(!p.enabled());
    assert_eq!(
        {
            let mut n = 0;
            for _ in 0..if cfg!(miri) { 5_000 } else { 100_000 } {
                n += usize::from(p.should_wait());
                p.observe(PAYOFF, false, true);
            }
            n
        },
        0
    );
    p.set_enabled(true);
    assert!(p.enabled());
}
