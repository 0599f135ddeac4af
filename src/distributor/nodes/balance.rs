//! Load balancing between the nodes of a multi-node layout: when a node counts as
//! overloaded, and which bucket of flows it moves to which node.
//!
//! The load signal is the node's **fill**: the share of its workers' credit in use (packets
//! sent to its workers and not handed back, over active workers x credit), in per-mille.
//! A node whose workers keep up has a fill near 0; one whose workers fall behind runs out
//! of credit and its fill stays near 1000, with packets waiting at its caller. Each node
//! samples its fill every `period` calls and publishes it on its own progress line (a
//! store only when it changed), and reads the others' then: one line transfer per node
//! per period, nothing per packet or per burst.
//!
//! Decisions use the fill smoothed over samples (an exponential average, a quarter of the
//! weight on the newest), so fills that swing between samples do not trigger migrations.
//! A node whose smoothed fill stayed at or above `high` for `patience` samples in a row, while
//! another node's was below `high` and at least `margin` lower, moves one bucket to the
//! least filled such node (a node that is loaded itself takes nothing: between saturated
//! nodes the difference is noise, and chasing it only costs handovers): the bucket whose packets at its workers come closest to half the gap without
//! exceeding it (moving more would just move the overload). The packets at its workers
//! say how much each bucket weighs: the distributor keeps the tag of every packet in
//! flight for its order check, so counting them costs nothing on the hot path. While the
//! node stays loaded it moves one more bucket at each sample after the previous handover
//! ended; one sample that finds it not loaded starts the count of loaded samples again.

use core::fmt;

use super::NodeDistributor;

/// When a node counts as overloaded, and how eagerly it sheds flows
/// ([`NodeDistributor::set_balance`](super::NodeDistributor::set_balance)).
///
/// ```
/// use flowline::distributor::nodes::BalancePolicy;
/// let p = BalancePolicy::default();
/// assert_eq!((p.period, p.high, p.margin, p.patience), (64, 750, 250, 4));
/// assert!(p.check().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BalancePolicy {
    /// Calls of `distribute` between two load samples, at least 1.
    pub period: u32,
    /// Fill (per-mille of the node's worker credit in use) at and above which a node is
    /// loaded, 1 to 1000.
    pub high: u32,
    /// How much lower (per-mille) another node's fill must be to take a bucket, 1 to 1000;
    /// it must also be below `high` (not loaded itself).
    pub margin: u32,
    /// Loaded samples in a row before a node moves a bucket, at least 1.
    pub patience: u32,
}

impl Default for BalancePolicy {
    /// A sample every 64 calls; loaded at 75% of the credit in use, for 4 samples in a
    /// row, while another node is 25 points lower.
    fn default() -> Self {
        BalancePolicy {
            period: 64,
            high: 750,
            margin: 250,
            patience: 4,
        }
    }
}

/// A [`BalancePolicy`] field out of range; the message names it and its range.
///
/// ```
/// use flowline::distributor::nodes::BalancePolicy;
/// let e = BalancePolicy { period: 0, ..Default::default() }.check().unwrap_err();
/// assert!(e.to_string().contains("period"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadPolicy(&'static str);

impl fmt::Display for BadPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad balance policy: {}", self.0)
    }
}

impl std::error::Error for BadPolicy {}

impl BalancePolicy {
    /// Checks the fields' ranges.
    ///
    /// # Errors
    ///
    /// [`BadPolicy`] naming the first field out of range.
    ///
    /// ```
    /// use flowline::distributor::nodes::BalancePolicy;
    /// assert!(BalancePolicy { high: 1001, ..Default::default() }.check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), BadPolicy> {
        if self.period == 0 {
            return Err(BadPolicy("period must be at least 1 call"));
        }
        if !(1..=1000).contains(&self.high) {
            return Err(BadPolicy("high must be 1 to 1000 per-mille"));
        }
        if !(1..=1000).contains(&self.margin) {
            return Err(BadPolicy("margin must be 1 to 1000 per-mille"));
        }
        if self.patience == 0 {
            return Err(BadPolicy("patience must be at least 1 sample"));
        }
        Ok(())
    }
}

/// A node's balancing state: the policy, the calls since the last sample and the loaded
/// samples in a row.
#[derive(Debug)]
pub(crate) struct Balancer {
    policy: BalancePolicy,
    calls: u32,
    loaded_for: u32,
    /// The smoothed fill (`None` until the first sample, and while the node has no
    /// active worker).
    smoothed: Option<u32>,
}

impl Balancer {
    pub(crate) fn new(policy: BalancePolicy) -> Self {
        Balancer {
            policy,
            calls: 0,
            loaded_for: 0,
            smoothed: None,
        }
    }

    /// A new fill sample (`None`: no active worker): the smoothed fill the node publishes
    /// and decides by, an exponential average that gives the new sample a quarter of the
    /// weight, so a fill that swings from sample to sample (workers that catch up between
    /// two bursts) does not look like an overload, and a lasting one shows within a few
    /// samples.
    pub(crate) fn smooth(&mut self, fill: Option<u32>) -> Option<u32> {
        self.smoothed = match (self.smoothed, fill) {
            (_, None) => None,
            (None, Some(f)) => Some(f),
            (Some(s), Some(f)) => Some((3 * s + f + 2) / 4),
        };
        self.smoothed
    }

    /// One call of `distribute`; whether a sample is due.
    #[inline]
    pub(crate) fn tick(&mut self) -> bool {
        self.calls += 1;
        if self.calls < self.policy.period {
            return false;
        }
        self.calls = 0;
        true
    }

    /// A sample: this node's fill `own`, and `(node, fill)` of the others that have
    /// workers. The node to shed load to and the gap (per-mille) when this node has been
    /// loaded for `patience` samples in a row (and at every later sample while it stays
    /// loaded: one bucket moves per handover until the load evens out).
    pub(crate) fn decide(
        &mut self,
        own: u32,
        others: impl Iterator<Item = (usize, u32)>,
    ) -> Option<(usize, u32)> {
        let p = self.policy;
        // A node that is loaded itself takes nothing: between two saturated nodes the
        // difference of their fills is noise, and moving buckets back and forth on it
        // only costs handovers.
        let target = others
            .filter(|&(_, f)| f < p.high && f.saturating_add(p.margin) <= own)
            .min_by_key(|&(n, f)| (f, n));
        match target {
            Some((to, f)) if own >= p.high => {
                // Saturates at `patience`: once overloaded, every sample that still finds
                // the node loaded decides (one bucket per handover), until one does not.
                self.loaded_for = (self.loaded_for + 1).min(p.patience);
                if self.loaded_for >= p.patience {
                    Some((to, own - f))
                } else {
                    None
                }
            }
            _ => {
                self.loaded_for = 0;
                None
            }
        }
    }
}

/// The bucket to move: of `(bucket, packets at the workers)`, the heaviest one with at
/// most `budget` packets (lowest bucket number among equals); `None` if every bucket is
/// heavier (moving it would move the overload) or none has packets.
pub(crate) fn pick_bucket(loads: &[(usize, u64)], budget: u64) -> Option<usize> {
    loads
        .iter()
        .filter(|&&(_, n)| n > 0 && n <= budget)
        .max_by_key(|&&(b, n)| (n, core::cmp::Reverse(b)))
        .map(|&(b, _)| b)
}

impl<T, F> NodeDistributor<T, F>
where
    F: FnMut(&T) -> u64,
{
    /// Balancing, once per period of calls: samples this node's fill, publishes it, and
    /// moves a bucket to a node with room if this one has been loaded long enough (see
    /// [`BalancePolicy`]). One migration at a time: nothing while one out of this node or
    /// into it is in progress.
    pub(super) fn balance(&mut self) {
        let Some(b) = self.balancer.as_mut() else {
            return;
        };
        if !b.tick() {
            return;
        }
        let fill = b.smooth(self.dist.fill_permille());
        self.progress.set_load(self.id, fill);
        let Some(own) = fill else { return };
        if self.drain.is_some() || self.holding {
            return;
        }
        let (id, progress) = (self.id, &self.progress);
        let others = (0..self.nodes)
            .filter(|&o| o != id)
            .filter_map(|o| progress.load(o).map(|f| (o, f)));
        let Some((to, gap)) = b.decide(own, others) else {
            return;
        };
        // Half the gap, in packets at this node's workers: the bucket to move should
        // weigh no more, or the overload just moves.
        let capacity = self.dist.active_workers() as u64 * self.dist.credit();
        let budget = capacity * u64::from(gap) / 2000;
        let own_map = self.ownership();
        let loads: Vec<(usize, u64)> = self
            .dist
            .in_flight_by_bucket()
            .into_iter()
            .filter(|&(bucket, _)| own_map.owns_bucket(bucket))
            .collect();
        if let Some(bucket) = pick_bucket(&loads, budget.max(1)) {
            if self.migrate(bucket, to).is_ok() {
                self.stats.rebalances += 1;
            }
        }
    }

    /// Turns load balancing on with `policy` (or off with `None`): this node then samples
    /// how full its workers are every `policy.period` calls of
    /// [`distribute`](Self::distribute), and when it has stayed loaded while another
    /// balancing node had room, migrates one bucket of its flows there
    /// ([`migrate`](Self::migrate), with its handover's order and exactly-once
    /// guarantees), the bucket whose packets at its workers weigh closest to half the
    /// difference. Only nodes that balance publish their load, so turn it on at every
    /// node. Costs: nothing per packet; per period, one scan of the workers' counts and
    /// one store and one load per other node of a line each; per decision, one pass over
    /// the packets at the workers. A node with a single hot flow (heavier than half the
    /// gap) keeps it: moving it would move the overload.
    ///
    /// # Errors
    ///
    /// [`BadPolicy`] for a field out of range ([`BalancePolicy::check`]); nothing changes.
    ///
    /// ```
    /// use flowline::distributor::nodes::{self, BalancePolicy, NodesConfig};
    /// let c = NodesConfig::default().nodes(2).workers_per_node(1).credit(8).bridge(8);
    /// let mut layout = nodes::new(c, |p: &u64| *p).unwrap();
    /// for (node, _) in layout.iter_mut() {
    ///     node.set_balance(Some(BalancePolicy::default())).unwrap();
    /// }
    /// let bad = BalancePolicy { patience: 0, ..Default::default() };
    /// assert!(layout[0].0.set_balance(Some(bad)).is_err());
    /// ```
    pub fn set_balance(&mut self, policy: Option<BalancePolicy>) -> Result<(), BadPolicy> {
        if let Some(p) = &policy {
            p.check()?;
        }
        self.balancer = policy.map(Balancer::new);
        if self.balancer.is_none() {
            self.progress.set_load(self.id, None);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
