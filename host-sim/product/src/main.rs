//! `raidcore`: the operator's command for pools on disk images (see [`raidcore_host::cli`]).
fn main() -> std::process::ExitCode {
    raidcore_host::cli::main()
}
