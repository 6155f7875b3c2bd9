//! The `pglocks` command; all logic is in `pglocks::cli`.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = pglocks::cli::Cli::parse();
    match pglocks::cli::execute(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pglocks: error: {e}");
            ExitCode::from(2)
        }
    }
}
