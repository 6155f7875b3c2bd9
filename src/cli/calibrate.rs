//! `pglocks calibrate`: measure this machine for the simulator and write its profile, which
//! `--machine sim:this` then runs on.
//!
//! The machine's costs, the private kernels' among them, are measured by
//! `pglocks_harness::calibrate`. What it cannot measure alone is `local`, the simulator's
//! charge per shim operation for the code no kernel counts (calls, branches, a model's
//! bookkeeping, the team's loop): that is fitted here, from one-thread runs of the two
//! workloads made of a lock's shim operations and little else, on this machine and on the
//! simulated one without the charge: the difference per operation over the shim operations an
//! operation makes, averaged over the two. Every other workload is charged by the same rule
//! and is not fitted: its agreement with this machine is the rule's test.
use super::CliError;
use clap::Args;
use pglocks_harness::{self as harness, HarnessError, TeamSpec, Topology};
use pglocks_sim::Profile;
use pglocks_workloads::{self as workloads, Preset};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `pglocks calibrate`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct CalibrateArgs {
    /// Write the profile here instead of the profile directory ($PGLOCKS_PROFILE_DIR, else
    /// ~/.config/pglocks/profiles/this.toml).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A few seconds instead of about a minute: a hundredth of the samples, shorter fitting runs.
    #[arg(long)]
    quick: bool,
}

/// The workloads whose one-thread runs fit `local`: (workload, impl).
pub(crate) const FIT: &[(&str, &str)] = &[("spin", "pg"), ("lwlock-exclusive", "pg")];

/// Set by the default build when it hands a command to the simulator's build
/// (`super::simbuild::exec`): the default build's program, which `calibrate` runs its fitting's
/// real runs with, so that `local` is fitted against the build every real `pglocks run` is
/// (the simulator's build checks on every atomic whether it simulates, which on the spinlock's
/// loop nearly doubles its time).
pub(crate) const REAL_BIN: &str = "PGLOCKS_REAL_BIN";

/// One thread's operations a second on `workload` (`imp`) for `ms` of measured time, run by the
/// default build `program` on this machine.
fn default_build_rate(
    program: &std::path::Path,
    workload: &str,
    imp: &str,
    ms: u64,
) -> Result<f64, CliError> {
    let failed = |why: String| {
        CliError::Usage(format!(
            "calibrate could not run {workload} on the default build ({}): {why}",
            program.display()
        ))
    };
    let out = std::process::Command::new(program)
        .args([
            "run",
            workload,
            "--impl",
            imp,
            "--threads",
            "1",
            "--repeat",
            "1",
        ])
        .args([
            "--duration",
            &format!("{ms}ms"),
            "--warmup",
            &format!("{}ms", ms / 4),
        ])
        .args(["--format", "json"])
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| failed(e.to_string()))?;
    report["series"][0]["points"][0]["ops_per_sec"]
        .as_f64()
        .ok_or_else(|| failed("its report has no ops_per_sec".into()))
}

pub(crate) fn calibrate(a: &CalibrateArgs) -> Result<(), CliError> {
    if !pglocks_sim::BUILT_IN {
        return Err(CliError::NoSimulator);
    }
    let topology = Topology::detect().map_err(HarnessError::from)?;
    eprintln!(
        "measuring {} ({} cpus)…",
        topology.model,
        topology.logical_cpus()
    );
    let measured = harness::calibrate::measure(&topology, a.quick);
    let mut profile = measured.profile;
    let real_ms = if a.quick { 100 } else { 1000 };
    let preset = Preset::by_name(workloads::DEFAULT_PRESET)?;
    let real_build = std::env::var_os(REAL_BIN).map(PathBuf::from);
    if real_build.is_none() {
        eprintln!(
            "  (the fitting's real runs are made by this build, whose shim checks every atomic; run `pglocks calibrate` from the default build to fit against it)"
        );
    }
    let mut fits = Vec::new();
    for (workload, imp) in FIT {
        let s = workloads::series(workload, preset, imp, &[])?;
        let spec = |sim: Option<Arc<Profile>>, ms| TeamSpec {
            threads: 1,
            duration: Duration::from_millis(ms),
            warmup: Duration::from_millis(ms / 4),
            pin_order: topology
                .cpus
                .first()
                .map(|c| vec![c.id])
                .unwrap_or_default(),
            sample_every: 0,
            sim,
            until: None,
        };
        let real_ops = match &real_build {
            Some(program) => default_build_rate(program, workload, imp, real_ms)?,
            None => (s.run)(&spec(None, real_ms))?.ops_per_sec(),
        };
        let simulated = (s.run)(&spec(Some(Arc::new(profile.clone())), 4))?;
        let (real_ns, sim_ns) = (
            1e9 / real_ops.max(1e-9),
            1e9 / simulated.ops_per_sec().max(1e-9),
        );
        // The simulation's operations include its warm-up's: a fifth of the run.
        let ops = simulated.sim.map_or(0, |c| c.ops) as f64 * 0.8;
        let per_op = ops / simulated.total_ops().max(1) as f64;
        let local_ns = if per_op > 0.0 {
            (real_ns - sim_ns) / per_op
        } else {
            0.0
        };
        eprintln!(
            "  {workload:<17} this machine {real_ns:>7.1} ns/op, simulated {sim_ns:>7.1} ns/op, {per_op:>5.1} shim operations/op: {local_ns:>5.2} ns each"
        );
        fits.push(local_ns);
    }
    let local_ns = (fits.iter().sum::<f64>() / fits.len().max(1) as f64).max(0.0);
    profile.cycles.local = Some((local_ns * profile.ghz * 100.0).round() / 100.0);
    let path = a
        .out
        .clone()
        .unwrap_or_else(pglocks_sim::profile::this_path);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|error| CliError::Io {
            path: dir.display().to_string(),
            error,
        })?;
    }
    let spreads: String = measured
        .figures
        .iter()
        .map(|f| format!("# {}\n", figure_line(f)))
        .collect();
    let text = format!(
        "# This machine, as `pglocks calibrate` measured it; `--machine sim:this` runs on it.\n# Each measured figure: the median kept, and the least and most of its samples.\n{spreads}{}",
        profile.to_toml()
    );
    std::fs::write(&path, text).map_err(|error| CliError::Io {
        path: path.display().to_string(),
        error,
    })?;
    let c = &profile.cycles;
    println!(
        "{}\n  {} GHz; hit {} cycles, atomic {}, line transfer {}, pause {}, fence {}, busy_work step {}, local {}, SMT speed {}\n  syscall {} ns, futex wake-up {} ns, context switch {} ns, timer slack {} ns, time slice {} µs",
        profile.describe(),
        profile.ghz,
        c.hit,
        c.atomic,
        c.die,
        c.pause,
        c.fence,
        profile.busy_step(),
        profile.local(),
        c.smt_speed,
        profile.os.syscall_ns,
        profile.os.wake_ns,
        profile.os.context_switch_ns,
        profile.os.timer_slack_ns,
        profile.os.quantum_us
    );
    println!("each figure's median, and the least and most of its samples:");
    for f in &measured.figures {
        println!("  {}", figure_line(f));
    }
    println!("wrote {}", path.display());
    Ok(())
}

/// `cycles.hit 0.9 cycles (0.88–1.02, 7 samples)`.
fn figure_line(f: &harness::calibrate::Figure) -> String {
    let s = f.spread;
    let samples = if f.samples > 0 {
        format!(", {} samples", f.samples)
    } else {
        String::new()
    };
    format!(
        "{:<22} {:>10.3} {} ({:.3}–{:.3}{samples})",
        f.name, s.median, f.unit, s.least, s.most
    )
}
