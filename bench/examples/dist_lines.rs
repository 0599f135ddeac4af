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
//! With `--write`, the figures also go to `bench/dist-lines.txt`, which the report prints
//! when it is built without the counting (the counts are deterministic: one thread, a
//! fixed packet sequence). A change that moves them rewrites the file in the same commit.
//!
//! The instructions per packet of the distributor's side of the same loop are the
//! instruction benchmarks `dist_lines_w{W}` (`cargo bench -p flowline-bench --bench
//! instructions`).

#[path = "report/lines.rs"]
mod lines;

fn main() {
    let write = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--write") => true,
        Some(a) => {
            eprintln!("dist_lines: unknown argument {a:?} (only --write)");
            std::process::exit(2);
        }
    };
    let mut file = String::from(
        "# Line transfers per packet of the distributor (bench/examples/dist_lines.rs),\n\
         # written by `dist_lines --write` under --cfg flowline_lines. Do not edit by hand.\n",
    );
    for workers in lines::WORKERS {
        let Some((stores, loads)) = lines::count(workers, 1 << 20) else {
            eprintln!(
                "dist_lines: the counting is not compiled in; run with \
                 RUSTFLAGS=\"--cfg flowline_lines\""
            );
            std::process::exit(2);
        };
        for (what, v) in [("stores", stores), ("loads", loads)] {
            let line = format!("dist_lines_{workers}w_{what}_per_pkt {v:.4}");
            println!("{line}");
            file.push_str(&line);
            file.push('\n');
        }
    }
    if write {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/dist-lines.txt");
        if let Err(e) = std::fs::write(path, file) {
            eprintln!("dist_lines: {path}: {e}");
            std::process::exit(1);
        }
    }
}
