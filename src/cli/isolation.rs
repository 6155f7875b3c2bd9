//! `pglocks isolation`: PostgreSQL's isolation specs (lock-only SQL) on a release's lock
//! manager, printed as isolationtester prints them.

use super::CliError;
use pglocks_workloads::Preset;
use std::path::PathBuf;

/// `pglocks isolation`: runs each spec and prints the tester's output (its warnings on stderr).
pub(crate) fn isolation(specs: &[PathBuf], preset: &str) -> Result<(), CliError> {
    use pglocks_isolation as isolation;
    let settings = Preset::by_name(preset)?.settings();
    for path in specs {
        let fail = |error: String| CliError::Isolation {
            file: path.display().to_string(),
            error,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let spec = isolation::parse_spec(&text).map_err(|e| fail(e.to_string()))?;
        let out = isolation::run_spec(&spec, settings.lock_manager_config(1), None)
            .map_err(|e| fail(e.to_string()))?;
        eprint!("{}", out.stderr);
        print!("{}", out.stdout);
    }
    Ok(())
}
