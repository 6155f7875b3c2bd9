//! The simulator's build of `pglocks`: the same sources compiled with `--cfg pglocks_sim`, which
//! a command that asks for a simulated machine runs instead of this one.
//!
//! A real run must not pay for the simulator (the shim's check on every atomic costs a lock's
//! uncontended path a tenth of its time), so the hooks exist only in a build of their own, as
//! loom's models do. When `run`, the default run or `reproduce` is given `--machine sim:…`, or
//! `calibrate` (which fits the simulator) is run, in a build without them, the command fails
//! with [`CliError::NoSimulator`] before it does anything, and the `pglocks` binary hands the
//! whole command line to the simulator's build ([`exec`]): the program named by
//! `PGLOCKS_SIM_BIN`, or else the one cargo builds beside this executable
//! (`<target>/sim/<profile>/pglocks`, from the sources this one was built from; cargo makes it
//! once and does nothing while it is up to date). Its output, exit status and Ctrl-C are the
//! command's own: this process becomes it.

use super::CliError;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the environment of the simulator's build when this one starts it: a build that finds
/// it set and still cannot simulate was pointed at a wrong program, and says so instead of
/// starting itself again.
const HANDED_OVER: &str = "PGLOCKS_SIM_HANDED_OVER";

/// Runs this command line on the simulator's build of `pglocks`, replacing this process.
/// Returns only if that cannot be done, with the reason.
pub fn exec() -> CliError {
    if std::env::var_os(HANDED_OVER).is_some() {
        return CliError::Usage(format!(
            "PGLOCKS_SIM_BIN{} is not a simulator's build of pglocks (one built with RUSTFLAGS=\"--cfg pglocks_sim\")",
            std::env::var("PGLOCKS_SIM_BIN")
                .map(|p| format!(" ({p})"))
                .unwrap_or_default()
        ));
    }
    let program = match program() {
        Ok(p) => p,
        Err(e) => return e,
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut command = Command::new(&program);
    command.args(args).env(HANDED_OVER, "1");
    if let Ok(me) = std::env::current_exe() {
        command.env(super::calibrate::REAL_BIN, me);
    }
    let error = command.exec();
    CliError::Usage(format!(
        "cannot start the simulator's build of pglocks ({}): {error}",
        program.display()
    ))
}

/// The simulator's build of `pglocks`: this executable if it is one, else the program named by
/// `PGLOCKS_SIM_BIN`, else the one cargo builds (or finds up to date) beside this executable.
pub fn program() -> Result<PathBuf, CliError> {
    if pglocks_sim::BUILT_IN {
        return std::env::current_exe()
            .map_err(|e| CliError::Usage(format!("cannot find this executable: {e}")));
    }
    match std::env::var_os("PGLOCKS_SIM_BIN") {
        Some(p) => Ok(PathBuf::from(p)),
        None => build(),
    }
}

/// Has cargo build (or find up to date) the simulator's build beside this executable, and
/// returns its path.
fn build() -> Result<PathBuf, CliError> {
    let unavailable = |why: String| {
        CliError::Usage(format!(
            "this build of pglocks has no simulator and cannot make one ({why}); build one with \
             RUSTFLAGS=\"--cfg pglocks_sim\" cargo build --release and name it in PGLOCKS_SIM_BIN"
        ))
    };
    let exe = std::env::current_exe().map_err(|e| unavailable(e.to_string()))?;
    // `<target>/<profile>/pglocks` (or `<target>/<profile>/deps/…` for a test's own binary).
    let profile_dir = exe
        .parent()
        .ok_or_else(|| unavailable("no directory above the executable".into()))?;
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| unavailable("an executable outside cargo's target directory".into()))?;
    let target = profile_dir
        .parent()
        .ok_or_else(|| unavailable("an executable outside cargo's target directory".into()))?;
    let sources = Path::new(env!("CARGO_MANIFEST_DIR"));
    if !sources.join("Cargo.toml").is_file() {
        return Err(unavailable(format!(
            "its sources are not at {}",
            sources.display()
        )));
    }
    let sim_target = target.join("sim");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut rustflags = std::env::var("RUSTFLAGS").unwrap_or_default();
    rustflags.push_str(" --cfg pglocks_sim");
    eprintln!("pglocks: a simulated machine runs on a build of its own (cargo makes it once)");
    let mut cargo_build = Command::new(cargo);
    cargo_build
        .current_dir(sources)
        .args(["build", "--quiet", "--bin", "pglocks", "--profile"])
        .arg(match profile {
            "debug" => "dev",
            other => other,
        })
        .env("CARGO_TARGET_DIR", &sim_target)
        .env("RUSTFLAGS", rustflags.trim());
    let status = cargo_build
        .status()
        .map_err(|e| unavailable(format!("cargo: {e}")))?;
    if !status.success() {
        return Err(unavailable(format!("cargo build: {status}")));
    }
    Ok(sim_target.join(profile).join("pglocks"))
}
