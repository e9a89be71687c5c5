//! `raidcore-sim`: the host simulator's command-line tool (see [`raidcore_sim::cli`]).
fn main() -> std::process::ExitCode {
    raidcore_sim::cli::main()
}
