//! The benchmark report: every scenario side by side with its peers, in one run.
//!
//! ```text
//! cargo run --release -p flowline-bench --example report -- [--quick] [--reps N] [FILTER...]
//! ```
//!
//! Runs all scenarios, or those whose name contains a FILTER, and prints one line per
//! figure, `name value unit` (`name` = `<impl>_<scenario>`), ratio lines
//! `ratio_<scenario>_<a>_vs_<b> value x` (above 1: `a` wins; the ratio of the medians),
//! `pratio_<scenario>_<a>_vs_<b> value x` (the median of the ratios taken within each
//! repetition, where `a` and `b` ran back to back: steadier when the placement moves
//! between repetitions), and `probe_rtt_ns` (CPU 0 <->
//! CPU 1 cache-line round trip) before and after each scenario; then a table. Threads are
//! pinned to CPU 0 and CPU 1; compared implementations alternate within a scenario and the
//! printed value is the median of the repetitions. `--quick` shrinks every loop (a smoke
//! run for CI, not a measurement). The ring scenarios (`spsc_r1024_*`, and the `mpsc`
//! ones' burst buffers) move through 8 memory layouts, one per repetition (`--reps 8`
//! runs each once; `REPORT_LAYOUT=a,o` fixes one: see `spsc.rs`).

mod bytes;
mod cell;
mod counter;
mod dist;
mod dist_batching;
#[path = "../pcap_replay/frames.rs"]
mod frames;
mod harness;
mod lines;
mod lock;
mod markdown;
mod mpsc;
mod pipe;
mod scale;
mod spsc;
mod wait;

fn main() {
    let mut filters = Vec::new();
    let mut reps = 5;
    let mut quick = false;
    let mut threads = scale::default_threads();
    let mut markdown_to: Option<String> = None;
    let mut anchors: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--reps" => {
                reps = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n: &usize| n > 0)
                    .unwrap_or_else(|| {
                        eprintln!("--reps takes a positive number");
                        std::process::exit(2)
                    })
            }
            "--markdown" => {
                markdown_to = Some(args.next().unwrap_or_else(|| {
                    eprintln!("--markdown takes a file to write");
                    std::process::exit(2)
                }))
            }
            "--anchors" => {
                anchors = Some(args.next().unwrap_or_else(|| {
                    eprintln!("--anchors takes a file of `name value unit` lines");
                    std::process::exit(2)
                }))
            }
            "--threads" => {
                threads = args
                    .next()
                    .and_then(|l| {
                        l.split(',')
                            .map(|n| n.trim().parse::<usize>().ok().filter(|&n| n >= 2))
                            .collect::<Option<Vec<usize>>>()
                    })
                    .unwrap_or_else(|| {
                        eprintln!("--threads takes a list of counts of 2 or more, as 2,4,8,15");
                        std::process::exit(2)
                    })
            }
            "-h" | "--help" => {
                println!("usage: report [--quick] [--reps N] [--threads 2,4,..] [--markdown F [--anchors F]] [FILTER...]");
                println!("  --quick       smoke run: every scenario with tiny loops, to check that it runs;");
                println!("                its figures mean nothing");
                println!("  --reps N      repetitions per scenario (medians of N)");
                println!("  --threads L   thread counts for the scale_* scenarios");
                println!("  --markdown F  also write the results as a Markdown page to F (BENCHMARKS.md)");
                println!("  --anchors F   with --markdown: add the figures of F (`name value unit` lines,");
                println!("                `# source: ...` lines saying where they came from)");
                println!("  FILTER        run only scenarios whose names contain one of these");
                println!("env: REPORT_CPUS=a,b,.. (CPUs to pin to), REPORT_LAYOUT=advance,offset (one ring layout)");
                println!("     REPORT_COPY=memcpy|items (how the spsc chunk scenarios copy)");
                println!("scenarios: cell_2writers_unchanged cell_2writers_unchanged_reading cell_2writers_private cell_reader_unchanged");
                println!("           cell_1thread_unchanged cell_1thread_changing");
                println!("           spsc_r1024_burst1 spsc_r1024_burst8 spsc_r1024_burst32 spsc_pingpong");
                println!("           spsc_paced40ns_latency spsc_paced100ns_latency");
                println!("           mpsc_r1024_burst1 mpsc_r1024_burst8 mpsc_r1024_burst32");
                println!("           mpsc_2p_oversub_burst8");
                println!("           counter_2writers_inc counter_pktgen");
                println!("           dist_1worker dist_any_order_1worker dist_ordered_1worker dist_ordered_elephant_2workers dist_pcap dist_2nodes dist_2nodes_migrating dist_2nodes_balance");
                println!("           dist_lines dist_latency_light_{{W}}w dist_latency_full_{{W}}w (W = 1, 2)");
                println!(
                    "           pipe_a_1worker pipe_ap_1worker pipe_oa_1worker pipe_oap_1worker bytes_64k"
                );
                println!("           lock_uncontended lock_contended_2threads");
                println!(
                    "           wait_spsc_burst1 wait_spsc_burst32 wait_wake_latency wait_idle_cpu"
                );
                println!(
                    "           wait_async_wake_latency wait_async_pingpong_current wait_async_pingpong_multi"
                );
                println!("           scale_counter_{{T}}t scale_pktgen_{{T}}t scale_cell_{{T}}t scale_cell_readers_{{T}}t");
                println!("           scale_mpsc_{{T}}t scale_dist_{{T}}t scale_dist_work_{{T}}t scale_2nodes_work_{{T}}t");
                println!("           scale_ordered_elephant_3t");
                println!(
                    "           (T from --threads; default: those of 2,4,8,15 that the CPUs hold)"
                );
                return;
            }
            f if f.starts_with('-') => {
                eprintln!("unknown flag {f}; see --help");
                std::process::exit(2)
            }
            f => filters.push(f.to_string()),
        }
    }
    if quick && reps == 5 {
        reps = 1;
    }
    let mut r = harness::Report::new(filters, reps, quick);
    cell::run(&mut r);
    spsc::run(&mut r);
    mpsc::run(&mut r);
    counter::run(&mut r);
    dist::run(&mut r);
    dist_batching::run(&mut r);
    pipe::run(&mut r);
    lock::run_all(&mut r);
    wait::run(&mut r);
    bytes::run(&mut r);
    scale::run(&mut r, &threads);
    r.print_table();
    if let Some(path) = markdown_to {
        let page = markdown::render(&r.results, r.reps, r.quick, anchors.as_deref(), &path)
            .and_then(|page| std::fs::write(&path, page).map_err(|e| format!("{path}: {e}")));
        if let Err(e) = page {
            eprintln!("report: {e}");
            std::process::exit(1);
        }
    }
}
