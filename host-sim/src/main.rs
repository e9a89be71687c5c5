//! `raidcore-sim`: the host simulator's command-line tool.
fn main() {
    eprintln!("raidcore-sim: not built yet (see the host-sim issue)");
    std::process::exit(2);
}
