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
