//! Two-node layouts (`distributor::nodes::new` with `nodes: 2`), as the node tests build
//! them by hand.

use flowline::distributor::nodes::{self, NodeDistributor, NodesConfig};
use flowline::distributor::Worker;

/// One node of a layout and its workers.
pub type Ends<T, F> = (NodeDistributor<T, F>, Vec<Worker<T>>);

/// A layout of two nodes of `workers_per_node` workers each, with `credit` credit per
/// worker and bridges of `bridge` packets. Node 1's ends come first, then node 0's: the
/// order popping the layout gives them, so that bindings
/// `let ((n1, w1), (n0, w0)) = two_nodes(..)` drop in the same order as popped ones.
pub fn two_nodes<T, F>(
    workers_per_node: usize,
    credit: usize,
    bridge: usize,
    tag: F,
) -> (Ends<T, F>, Ends<T, F>)
where
    F: FnMut(&T) -> u64 + Clone,
{
    let cfg = NodesConfig::default()
        .nodes(2)
        .workers_per_node(workers_per_node)
        .credit(credit)
        .bridge(bridge);
    let mut layout = nodes::new(cfg, tag).unwrap();
    let n1 = layout.pop().unwrap();
    let n0 = layout.pop().unwrap();
    (n1, n0)
}

/// [`two_nodes`], each node publishing what each call routed (`set_batching(1, 0)`): for
/// tests that check what single calls do.
pub fn two_nodes_single_calls<T, F>(
    workers_per_node: usize,
    credit: usize,
    bridge: usize,
    tag: F,
) -> (Ends<T, F>, Ends<T, F>)
where
    F: FnMut(&T) -> u64 + Clone,
{
    let (mut n1, mut n0) = two_nodes(workers_per_node, credit, bridge, tag);
    n0.0.set_batching(1, 0);
    n1.0.set_batching(1, 0);
    (n1, n0)
}
