//! `pglocks calibrate`: measure this machine for the simulator and write its profile, which
//! `--machine sim:this` then runs on.
//!
//! The machine's costs are measured by `pglocks_harness::calibrate`. What it cannot measure
//! alone is the simulator's charge for the code that runs between two shim operations (hashing,
//! bookkeeping, a workload's loop): that is fitted here, from one-thread runs of a few
//! workloads on this machine and on the simulated one without the charge. For each of them, the
//! difference per operation is its `op_ns` (charged once per operation of that workload); that
//! difference divided by the shim operations an operation makes is an estimate of `local`
//! (charged per shim operation to every other workload), of which the median is kept.

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
const FIT: &[(&str, &str)] = &[
    ("spin", "pg"),
    ("lwlock-exclusive", "pg"),
    ("lwlock-shared", "pg"),
    ("lwlock-mixed", "pg"),
    ("buffer-lookup", "pg"),
    ("clog-set", "pg"),
    ("sinval-check", "pg"),
    ("select-only", "pg"),
];

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
            sim_op_cost: None,
            until: None,
        };
        let real = (s.run)(&spec(None, real_ms))?;
        let simulated = (s.run)(&spec(Some(Arc::new(profile.clone())), 4))?;
        let (real_ns, sim_ns) = (
            1e9 / real.ops_per_sec().max(1e-9),
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
        profile.op_ns.insert(
            workload.to_string(),
            ((real_ns - sim_ns).max(0.0) * 100.0).round() / 100.0,
        );
    }
    fits.sort_by(f64::total_cmp);
    let local_ns = fits.get(fits.len() / 2).copied().unwrap_or(0.0).max(0.0);
    profile.cycles.local = (local_ns * profile.ghz * 100.0).round() / 100.0;
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
        c.local,
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
        "{:<22} {:>10.2} {} ({:.2}–{:.2}{samples})",
        f.name, s.median, f.unit, s.least, s.most
    )
}
