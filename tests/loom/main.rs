//! loom models of every protocol (built and run only with `RUSTFLAGS="--cfg loom"`).

mod cell;
mod counter;
mod distributor;
mod futures;
mod lockmeter;
mod mpsc;
mod niche;
mod slot;
mod spsc;
mod wait;

/// Without `--cfg loom` this program has no model to run: the line cargo prints for this
/// test says how to run them.
#[cfg(not(loom))]
#[test]
#[ignore = "the loom models run only with RUSTFLAGS=\"--cfg loom\" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom"]
fn loom_models_need_cfg_loom() {}
