//! `pglocks reproduce --machine sim:PROFILE --sensitivity`: how far each simulated verdict rests
//! on the values nothing sources.
//!
//! A simulated verdict is only as good as the constants behind it. The run varies them and
//! asks each claim again:
//! - **one at a time**: every value the profile lists as `unsourced` (and the cost model's own
//!   `model.jitter` and `model.answer_at`) at half and at twice its value, clamped to what the
//!   profile may hold (a value the clamp leaves where it was is not run again);
//! - **the rules**: the hold window off (`model.hold_window=false`), its documented alternative;
//! - **jointly**: eight Latin-hypercube draws, every listed value at once, each one's factor
//!   spread over [½, 2] on a log scale so that the eight draws cover that range once per value.
//!
//! The transfer jitter's draw is itself a source of spread (docs/simulator.md, "The simulator's
//! own noise"). The profile as it is runs with three seeds; if they disagree, the draw decides
//! the claim and it is undecided before any value is changed. A verdict counts as flipped only
//! when no seed supports it any more: a variant whose verdict differs from the claim's own is
//! run again with the other seeds, and it flips the claim only if every seed differs. A claim some variant flips is *undecided*,
//! sensitive to the values named. A claim decided by ratios alone is run at the one thread
//! counts its ratios read, the others at every count.

use super::rule::Grade;
use super::{claims, curve, pick, request, write_in, Claim, ReproduceArgs};
use crate::cli::CliError;
use pglocks_sim::Profile;
use pglocks_workloads::plan::Machine;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// Joint draws of every listed value.
const DRAWS: usize = 8;

/// The seeds a variant that changes a verdict is run again with (besides the profile's own).
const SEEDS: [u64; 2] = [1, 2];

/// One changed machine: what was changed, as `Profile::set` items.
#[derive(Debug, Clone, Serialize)]
struct Variant {
    /// How the report names it (`cycles.fence*0.5`, `joint draw 3`).
    name: String,
    /// The settings after the profile's name.
    items: Vec<String>,
}

/// One claim under every variant.
#[derive(Debug, Serialize)]
struct ClaimSensitivity {
    id: String,
    /// The claim's grade on the profile as it is.
    grade: Grade,
    /// Whether another seed of the profile as it is gives the other verdict: then the jitter's
    /// draw decides the claim before any value does.
    seed_decides: bool,
    /// The variants that flipped it (under every seed).
    flipped_by: Vec<String>,
    /// Variants whose first seed disagreed but another seed agreed.
    within_noise: Vec<String>,
}

/// The whole run, as `sensitivity.json` holds it.
#[derive(Debug, Serialize)]
struct Sensitivity {
    machine: String,
    variants: Vec<Variant>,
    claims: Vec<ClaimSensitivity>,
    host_seconds: f64,
}

/// The values a variant may hold: a scaled value is clamped into them.
fn clamp(path: &str, v: f64) -> f64 {
    match path {
        "line_bytes" => {
            if v > 64.0 {
                128.0
            } else {
                64.0
            }
        }
        "cycles.occupancy" | "model.answer_at" => v.clamp(0.01, 1.0),
        "cycles.smt_speed" => v.clamp(0.1, 1.0),
        "model.jitter" => v.clamp(0.0, 0.99),
        "cycles.outstanding_misses" => v.round().clamp(1.0, 64.0),
        "cycles.store_buffer" => v.round().clamp(0.0, 256.0),
        _ => v.max(0.0),
    }
}

/// `path` of `profile` times `factor`, clamped, as a setting; `None` when that leaves it as it
/// is. `latencies` is a factor itself.
fn scaled(profile: &Profile, path: &str, factor: f64) -> Option<String> {
    if path == "latencies" {
        return Some(format!("latencies*{factor}"));
    }
    let value = value_of(profile, path)?;
    let to = clamp(path, value * factor);
    ((to - value).abs() > 1e-12).then(|| format!("{path}={to}"))
}

/// The number at `path` in `profile`'s text (its `[model]` section included, which the text
/// leaves out when it is the default).
fn value_of(profile: &Profile, path: &str) -> Option<f64> {
    let mut root = toml::Value::try_from(profile).ok()?;
    let model = toml::Value::try_from(profile.model).ok()?;
    root.as_table_mut()?.insert("model".into(), model);
    let mut at = &root;
    for key in path.split('.') {
        at = at.get(key)?;
    }
    at.as_float().or_else(|| at.as_integer().map(|i| i as f64))
}

/// The variants of `profile`: each value at half and twice, the hold window off, and the joint
/// draws.
fn variants(profile: &Profile) -> Vec<Variant> {
    let mut paths: Vec<String> = profile.unsourced.clone();
    paths.extend(["model.jitter".to_string(), "model.answer_at".to_string()]);
    let mut out = Vec::new();
    for path in &paths {
        for factor in [0.5, 2.0] {
            if let Some(item) = scaled(profile, path, factor) {
                out.push(Variant {
                    name: format!("{path}*{factor}"),
                    items: vec![item],
                });
            }
        }
    }
    out.push(Variant {
        name: "model.hold_window=false".into(),
        items: vec!["model.hold_window=false".into()],
    });
    // Latin hypercube: value k takes, in draw d, the midpoint of stratum perm_k(d) of [-1, 1]
    // in log2, so that every value's eight factors cover [½, 2] once each.
    let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let perms: Vec<Vec<usize>> = paths
        .iter()
        .map(|_| {
            let mut p: Vec<usize> = (0..DRAWS).collect();
            for i in (1..DRAWS).rev() {
                p.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            p
        })
        .collect();
    for d in 0..DRAWS {
        let items: Vec<String> = paths
            .iter()
            .zip(&perms)
            .filter_map(|(path, perm)| {
                let log2 = -1.0 + 2.0 * (perm[d] as f64 + 0.5) / DRAWS as f64;
                let factor = (2f64.powf(log2) * 1000.0).round() / 1000.0;
                scaled(profile, path, factor)
            })
            .collect();
        out.push(Variant {
            name: format!("joint draw {}", d + 1),
            items,
        });
    }
    out
}

/// The grade of `claim` on `profile` with `items` set (and `seed`, if given): its checks'
/// lowest.
fn grade(
    claim: &Claim,
    a: &ReproduceArgs,
    profile: &Profile,
    items: &[String],
    seed: Option<u64>,
) -> Result<Grade, CliError> {
    let mut spec = profile.name.clone();
    for item in items {
        spec.push('+');
        spec.push_str(item);
    }
    if let Some(s) = seed {
        let _ = write!(spec, "+model.seed={s}");
    }
    let machine = Machine::parse(&format!("sim:{spec}"))?;
    let cpus = profile.cpu_count();
    let mut req = request(claim, a, &machine, cpus)?;
    req.progress = false;
    // A ratio reads the largest thread count both series measured (up to its published
    // count): a claim of ratios alone runs at those counts only.
    let read_at: Option<Vec<usize>> = claim
        .checks
        .iter()
        .map(|c| match c {
            super::Check::Ratio { at, .. } => req
                .threads
                .iter()
                .copied()
                .filter(|&t| at.map_or(true, |n| t <= n))
                .max(),
            _ => None,
        })
        .collect();
    if let Some(mut counts) = read_at {
        counts.sort_unstable();
        counts.dedup();
        req.threads = counts;
    }
    let report = req.plan()?.run()?;
    Ok(claim
        .checks
        .iter()
        .map(|c| {
            c.grade(|l| curve(&report, l))
                .map_or(Grade::NotReproduced, |m| m.grade)
        })
        .min()
        .unwrap_or(Grade::NotReproduced))
}

/// `pglocks reproduce --sensitivity`.
pub(super) fn run(a: &ReproduceArgs, out: &Path) -> Result<(), CliError> {
    let Machine::Simulated(profile) = Machine::parse(&a.machine)? else {
        return Err(CliError::Usage(
            "--sensitivity varies a simulated machine's values: give --machine sim:PROFILE".into(),
        ));
    };
    // A claim published on another profile's machine is varied on that profile, in its own run.
    let (all, elsewhere): (Vec<_>, Vec<_>) = pick(claims()?, &a.claims)?
        .into_iter()
        .partition(|c| !matches!(&c.profile, Some(p) if *p != profile.name));
    for c in &elsewhere {
        let p = c.profile.as_deref().unwrap_or_default();
        eprintln!(
            "{}: published on a machine {p} models; vary it with --machine sim:{p}",
            c.id
        );
    }
    let started = std::time::Instant::now();
    let variants = variants(&profile);
    eprintln!(
        "{} variants of {} for {} claims",
        variants.len(),
        profile.name,
        all.len()
    );
    let mut results = Vec::new();
    for claim in &all {
        let base = grade(claim, a, &profile, &[], None)?;
        let mut seed_decides = false;
        for seed in SEEDS {
            seed_decides |= grade(claim, a, &profile, &[], Some(seed))? != base;
        }
        let (mut flipped_by, mut within_noise) = (Vec::new(), Vec::new());
        for v in &variants {
            if grade(claim, a, &profile, &v.items, None)? == base {
                continue;
            }
            let mut supported = false;
            for seed in SEEDS {
                if grade(claim, a, &profile, &v.items, Some(seed))? == base {
                    supported = true;
                    break;
                }
            }
            if supported {
                within_noise.push(v.name.clone());
            } else {
                flipped_by.push(v.name.clone());
            }
        }
        eprintln!(
            "  {}: {}{}{}",
            claim.id,
            base.label(),
            if seed_decides {
                ", another seed gives the other verdict"
            } else {
                ""
            },
            if flipped_by.is_empty() {
                String::new()
            } else {
                format!(", flipped by {}", flipped_by.join(", "))
            }
        );
        results.push(ClaimSensitivity {
            id: claim.id.clone(),
            grade: base,
            seed_decides,
            flipped_by,
            within_noise,
        });
    }
    let s = Sensitivity {
        machine: profile.name.clone(),
        variants,
        claims: results,
        host_seconds: started.elapsed().as_secs_f64(),
    };
    let table = markdown(&s);
    print!("{table}");
    let json = serde_json::to_string_pretty(&s)
        .map_err(|e| CliError::Usage(format!("cannot write the summary: {e}")))?;
    write_in(out, "sensitivity.json", &json)?;
    write_in(out, "sensitivity.md", &table)?;
    Ok(())
}

/// The table: each claim's verdict on the profile, and what it becomes.
fn markdown(s: &Sensitivity) -> String {
    let mut t = format!(
        "pglocks reproduce --sensitivity on simulated {}: {} variants, {:.0} s of host time\n\n\
         | claim | on the profile | under every variant |\n|---|---|---|\n",
        s.machine,
        s.variants.len(),
        s.host_seconds
    );
    for c in &s.claims {
        let verdict = c.grade.label();
        let under = if c.seed_decides {
            "undecided (another seed of the profile as it is gives the other verdict)".to_string()
        } else if c.flipped_by.is_empty() {
            let noise = if c.within_noise.is_empty() {
                String::new()
            } else {
                format!(" (another seed needed under {})", c.within_noise.join(", "))
            };
            format!("{verdict}{noise}")
        } else {
            format!("undecided (sensitive to {})", c.flipped_by.join(", "))
        };
        let _ = writeln!(t, "| {} | {verdict} | {under} |", c.id);
    }
    t.push_str("\nThe variants:\n\n");
    for v in &s.variants {
        let _ = writeln!(t, "- {}: {}", v.name, v.items.join(" + "));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_unsourced_value_is_halved_and_doubled_within_its_range_and_drawn_jointly() {
        let p = Profile::find("westmere-80").unwrap();
        let v = variants(&p);
        let names: Vec<&str> = v.iter().map(|v| v.name.as_str()).collect();
        assert!(names.contains(&"cycles.fence*0.5") && names.contains(&"cycles.fence*2"));
        // Occupancy is at its most (1): only half is a change; line_bytes only doubles.
        assert!(names.contains(&"cycles.occupancy*0.5"));
        assert!(!names.contains(&"cycles.occupancy*2"));
        assert!(!names.contains(&"line_bytes*0.5") && names.contains(&"line_bytes*2"));
        assert!(names.contains(&"model.jitter*2") && names.contains(&"model.hold_window=false"));
        let jitter = v.iter().find(|v| v.name == "model.jitter*2").unwrap();
        assert_eq!(jitter.items, ["model.jitter=0.99"]);
        // Eight joint draws, each a profile the simulator accepts; every value's eight factors
        // fall in distinct strata.
        let draws: Vec<&Variant> = v.iter().filter(|v| v.name.starts_with("joint")).collect();
        assert_eq!(draws.len(), DRAWS);
        let fences: Vec<f64> = draws
            .iter()
            .map(|d| {
                let spec = format!("westmere-80+{}", d.items.join("+"));
                Profile::find(&spec).unwrap().cycles.fence / p.cycles.fence
            })
            .collect();
        let mut strata: Vec<i64> = fences
            .iter()
            .map(|f| ((f.log2() + 1.0) * DRAWS as f64 / 2.0).floor() as i64)
            .collect();
        strata.sort();
        assert_eq!(strata, (0..DRAWS as i64).collect::<Vec<_>>(), "{fences:?}");
    }
}
