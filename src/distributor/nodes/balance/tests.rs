//! Unit tests of the balance policy: overload, hysteresis and the bucket picked.

use super::{pick_bucket, BalancePolicy, Balancer};

fn policy() -> BalancePolicy {
    BalancePolicy {
        period: 2,
        high: 700,
        margin: 300,
        patience: 3,
    }
}

#[test]
fn the_fill_is_smoothed_over_samples() {
    let mut b = Balancer::new(policy());
    assert_eq!(b.smooth(Some(1000)), Some(1000));
    assert_eq!(b.smooth(Some(0)), Some(750));
    assert_eq!(b.smooth(Some(0)), Some(563));
    assert_eq!(
        b.smooth(None),
        None,
        "no worker: unknown, and it starts again"
    );
    assert_eq!(b.smooth(Some(200)), Some(200));
    // A lasting overload shows within a few samples.
    let s: Vec<u32> = (0..4).map(|_| b.smooth(Some(1000)).unwrap()).collect();
    assert_eq!(s, [400, 550, 663, 747]);
}

#[test]
fn a_sample_every_period_calls() {
    let mut b = Balancer::new(policy());
    let due: Vec<bool> = (0..6).map(|_| b.tick()).collect();
    assert_eq!(due, [false, true, false, true, false, true]);
}

#[test]
fn moves_only_after_patience_loaded_samples_with_a_lighter_node() {
    let mut b = Balancer::new(policy());
    // Loaded, node 1 light enough: the third sample in a row decides.
    assert_eq!(b.decide(900, [(1, 100)].into_iter()), None);
    assert_eq!(b.decide(900, [(1, 100)].into_iter()), None);
    assert_eq!(b.decide(900, [(1, 100)].into_iter()), Some((1, 800)));
    // While it stays loaded, every sample decides.
    assert_eq!(b.decide(800, [(1, 300)].into_iter()), Some((1, 500)));
    // A sample below `high` resets the count.
    assert_eq!(b.decide(600, [(1, 100)].into_iter()), None);
    assert_eq!(b.decide(900, [(1, 100)].into_iter()), None);
    assert_eq!(b.decide(900, [(1, 100)].into_iter()), None);
    assert_eq!(b.decide(900, [(1, 100)].into_iter()), Some((1, 800)));
    // No node `margin` lower: never, and it resets.
    let mut b = Balancer::new(policy());
    for _ in 0..10 {
        assert_eq!(b.decide(900, [(1, 601), (2, 950)].into_iter()), None);
    }
    assert_eq!(b.decide(1000, [(1, 601)].into_iter()), None);
    // A node that is loaded itself takes nothing, however much lower its fill.
    let mut b = Balancer::new(policy());
    for _ in 0..10 {
        assert_eq!(b.decide(1000, [(1, 700)].into_iter()), None);
    }
    assert_eq!(b.decide(1000, [(1, 699)].into_iter()), None);
    assert_eq!(b.decide(1000, [(1, 699)].into_iter()), None);
    assert_eq!(b.decide(1000, [(1, 699)].into_iter()), Some((1, 301)));
    // The least filled node wins; equal fills go to the lower node.
    let mut b = Balancer::new(policy());
    let others = || [(2, 100), (1, 100), (3, 50)].into_iter();
    b.decide(1000, others());
    b.decide(1000, others());
    assert_eq!(b.decide(1000, others()), Some((3, 950)));
    let mut b = Balancer::new(policy());
    let others = || [(2, 100), (1, 100)].into_iter();
    b.decide(1000, others());
    b.decide(1000, others());
    assert_eq!(b.decide(1000, others()), Some((1, 900)));
}

#[test]
fn picks_the_heaviest_bucket_within_the_budget() {
    let loads = [(7, 5), (3, 12), (9, 12), (4, 30), (1, 0)];
    assert_eq!(pick_bucket(&loads, 20), Some(3));
    assert_eq!(pick_bucket(&loads, 30), Some(4));
    assert_eq!(pick_bucket(&loads, 11), Some(7));
    assert_eq!(pick_bucket(&loads, 4), None, "every bucket is too heavy");
    assert_eq!(pick_bucket(&[(1, 0)], 100), None, "no packets");
}

#[test]
fn bad_policies_name_their_field() {
    let d = BalancePolicy::default();
    for (p, field) in [
        (BalancePolicy { period: 0, ..d }, "period"),
        (BalancePolicy { high: 0, ..d }, "high"),
        (BalancePolicy { high: 1001, ..d }, "high"),
        (BalancePolicy { margin: 0, ..d }, "margin"),
        (BalancePolicy { patience: 0, ..d }, "patience"),
    ] {
        assert!(p.check().unwrap_err().to_string().contains(field), "{p:?}");
    }
}
