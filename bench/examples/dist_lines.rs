//! Shared-line traffic of the distributor per packet, counted, for 1 to 14 workers: the
//! measure of whether the distributor scales with its workers that a 2-core machine can
//! take (time needs as many cores as threads; counts do not). The loop is the report's
//! (`report/lines.rs`); printed per packet, as the report's figure lines:
//!
//! * `dist_lines_{W}w_stores_per_pkt`: index stores the distributor published (its packet
//!   rings' `tail`, its return rings' `head`), each a line a worker then reads;
//! * `dist_lines_{W}w_loads_per_pkt`: loads the distributor made of the workers' indices
//!   that found them moved, each a transfer of that line to the distributor's core.
//!
//! The counting is compiled in only with `--cfg flowline_lines`:
//!
//! ```text
//! RUSTFLAGS="--cfg flowline_lines" cargo run --release -p flowline-bench --example dist_lines
//! ```
//!
//! The instructions per packet of the distributor's side of the same loop are the
//! instruction benchmarks `dist_lines_w{W}` (`cargo bench -p flowline-bench --bench
//! instructions`).

#[path = "report/lines.rs"]
mod lines;

fn main() {
    for workers in [1, 2, 4, 8, 14] {
        let Some((stores, loads)) = lines::count(workers, 1 << 20) else {
            eprintln!(
                "dist_lines: the counting is not compiled in; run with \
                 RUSTFLAGS=\"--cfg flowline_lines\""
            );
            std::process::exit(2);
        };
        println!("dist_lines_{workers}w_stores_per_pkt {stores:.4}");
        println!("dist_lines_{workers}w_loads_per_pkt {loads:.4}");
    }
}
