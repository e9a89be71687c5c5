//! The parity/CRC-32C comparison table of `raidcore-sim bench parity`, runnable without the
//! simulator: `cargo bench -p raidcore-tests --bench parity_table -- [--full] [--json] [--kernel NAME]
//! [--ops gen,recover2,crc32c] [--shapes 4,8,16] [--strips 4096,65536]`.
//! Quick mode (the default) takes about fifteen seconds (it fills a 1 GiB working set).

#[allow(dead_code)]
#[path = "../../host-sim/src/bench_parity.rs"]
mod bench_parity;

use bench_parity::{BenchParityOptions, format_table, run, to_json};
use raidcore::parity::Kernel;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = if args.iter().any(|a| a == "--full") {
        BenchParityOptions::full()
    } else {
        BenchParityOptions::quick()
    };
    if let Some(i) = args.iter().position(|a| a == "--kernel") {
        let name = args.get(i + 1).map_or("", String::as_str);
        opts.kernel = Some(
            Kernel::supported()
                .find(|k| k.name() == name)
                .unwrap_or_else(|| panic!("kernel {name:?} not supported here")),
        );
    }
    let list = |flag: &str| {
        let i = args.iter().position(|a| a == flag)?;
        Some(
            args.get(i + 1)?
                .split(',')
                .map(str::to_string)
                .collect::<Vec<String>>(),
        )
    };
    if let Some(ops) = list("--ops") {
        opts.ops.retain(|o| ops.iter().any(|x| x == o));
    }
    if let Some(v) = list("--shapes") {
        opts.data_strips = v.iter().filter_map(|x| x.parse().ok()).collect();
    }
    if let Some(v) = list("--strips") {
        opts.strip_bytes = v.iter().filter_map(|x| x.parse().ok()).collect();
    }
    let kernel = opts.kernel.unwrap_or_else(Kernel::selected);
    let json = args.iter().any(|a| a == "--json");
    if !bench_parity::isal_available() {
        eprintln!("ISA-L (libisal.so.2) not found: its column reads n/a");
    }
    let rows = run(&opts, |r| {
        if !json {
            eprintln!(
                "{} {}+2 {} {} done",
                r.op, r.data_strips, r.strip_bytes, r.working_set
            );
        }
    });
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&rows, kernel)).unwrap_or_default()
        );
    } else {
        print!("{}", format_table(&rows, kernel));
    }
}
