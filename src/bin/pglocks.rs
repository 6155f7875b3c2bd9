//! The `pglocks` command; all logic is in `pglocks::cli`. Exit status: 0, 1 when `stress` found
//! a violation or a hang or its setup failed (a model refused the settings) or `compare
//! --fail-if-slower` found B slower, 2 for a usage or input error, 130 when Ctrl-C stopped `run`
//! or `stress` (after printing what it measured). A command that needs a simulated machine in a
//! build without the simulator becomes the simulator's build (`pglocks::cli::simbuild`).

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // A closed stdout (`pglocks list | head`) ends the process quietly, as it ends a C tool,
    // instead of a panic in `println!`.
    // SAFETY: restores the default disposition of one signal, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = pglocks::cli::Cli::parse();
    match pglocks::cli::execute(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(pglocks::cli::CliError::NoSimulator) => {
            // Returns only if the simulator's build cannot be had.
            let e = pglocks::cli::simbuild::exec();
            eprintln!("pglocks: error: {e}");
            ExitCode::from(2)
        }
        Err(e @ pglocks::cli::CliError::StressFailed(_)) => {
            eprintln!("pglocks: stress failed:\n{e}");
            ExitCode::from(1)
        }
        Err(e @ (pglocks::cli::CliError::StressSetup(_) | pglocks::cli::CliError::Slower(_))) => {
            eprintln!("pglocks: {e}");
            ExitCode::from(1)
        }
        Err(e @ pglocks::cli::CliError::Interrupted(_)) => {
            eprintln!("pglocks: {e}");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("pglocks: error: {e}");
            ExitCode::from(2)
        }
    }
}
