//! `pglocks list`: the registry as a user reads it — the workloads with their implementations
//! and knobs, the presets, the machines, the knobs, and what each release sets differently.

use pglocks_sim::Profile;
use pglocks_workloads as workloads;

/// `pglocks list`.
pub(crate) fn print_list() {
    println!("workloads (pglocks run WORKLOAD --impl ...):");
    for w in workloads::WORKLOADS {
        println!("  {:<16} {}", w.name, w.summary);
        for i in w.impls {
            let star = if i.on_shim { ' ' } else { '*' };
            println!("      --impl {:<12}{star}{}", i.name, i.summary);
        }
        if w.locks.spinlock {
            let numa: Vec<&str> = workloads::SPINLOCK_IMPLS.iter().map(|i| i.name).collect();
            println!(
                "      --impl {}: in place of every s_lock (see below)",
                numa.join(", ")
            );
        }
        if w.rw_lwlock_stands_in() {
            let rw: Vec<&str> = workloads::LWLOCK_RW_IMPLS.iter().map(|i| i.name).collect();
            println!(
                "      --impl {}: in place of every LWLock (see below)",
                rw.join(", ")
            );
        }
        if !w.knobs.is_empty() {
            println!("      knobs: {}", w.knobs.join(", "));
        }
    }
    println!("\nspinlocks in place of s_lock (--impl, on the workloads whose model takes one):");
    for i in workloads::SPINLOCK_IMPLS {
        println!("  {:<12} {}", i.name, i.summary);
    }
    println!("\nreader-writer locks in place of the LWLocks (--impl, on the workloads marked so):");
    for i in workloads::LWLOCK_RW_IMPLS {
        println!("  {:<12} {}", i.name, i.summary);
    }
    println!(
        "\npresets (--preset, default {}):",
        workloads::DEFAULT_PRESET
    );
    let width = workloads::PRESETS
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(0);
    for p in workloads::PRESETS {
        let same = p.same_as().map(|q| q.name);
        let text = match (p.summary, same) {
            ("", Some(q)) => format!("{}: no modelled change, the rules of {q}", p.version),
            ("", None) => p.version.to_string(),
            (s, Some(q)) => format!("{s} (no modelled change: the rules of {q})"),
            (s, None) => s.to_string(),
        };
        println!("  {:<width$} {text}", p.name);
    }
    println!("\nmachines (--machine real | sim:PROFILE; the impls marked * do not run simulated):");
    let names = Profile::names();
    let width = names.iter().map(String::len).max().unwrap_or(0).max(10);
    println!("  {:<w$} this machine (the default)", "real", w = width + 4);
    for name in names {
        match Profile::find(&name) {
            Ok(p) => println!("  sim:{name:<width$} {} ({})", p.summary, p.describe()),
            Err(e) => println!("  sim:{name:<width$} (unreadable: {e})"),
        }
    }
    println!("\nknobs (--set knob=value, applied on top of the preset):");
    let width = workloads::KNOBS
        .iter()
        .map(|k| k.name.len())
        .max()
        .unwrap_or(0);
    for k in workloads::KNOBS {
        println!("  {:<width$} {}", k.name, k.help);
    }
    print_preset_table(width);
}

/// What the preset table shows for knob `k`: its `--set` value, except where that hides the
/// release's difference (the fast path's layout, the CLOG buffers the release sizes).
fn preset_cell(s: &workloads::Settings, k: &str) -> String {
    match k {
        "fast_path" => match s.fast_path {
            pglocks_lmgr::FastPathLayout::None => "off".into(),
            pglocks_lmgr::FastPathLayout::Slots16 => "16".into(),
            pglocks_lmgr::FastPathLayout::Groups(n) => format!("{n}x16"),
            pglocks_lmgr::FastPathLayout::Custom(_) => "custom".into(),
        },
        "clog_buffers" => s.clog_buffers().to_string(),
        _ => s.knob_value(k).unwrap_or_default(),
    }
}

/// The knobs whose values differ between releases, one row each, one column per preset that
/// has a modelled change (from the presets themselves).
fn print_preset_table(knob_width: usize) {
    let presets: Vec<&workloads::Preset> = workloads::PRESETS
        .iter()
        .filter(|p| p.same_as().is_none())
        .collect();
    let settings: Vec<_> = presets.iter().map(|p| p.settings()).collect();
    let rows: Vec<(&str, Vec<String>)> = workloads::KNOBS
        .iter()
        .map(|k| {
            let values = settings.iter().map(|s| preset_cell(s, k.name)).collect();
            (k.name, values)
        })
        .filter(|(_, v): &(&str, Vec<String>)| v.iter().any(|x| x != &v[0]))
        .collect();
    let widths: Vec<usize> = presets
        .iter()
        .enumerate()
        .map(|(i, p)| {
            rows.iter()
                .map(|r| r.1[i].len())
                .fold(p.name.len(), usize::max)
        })
        .collect();
    println!(
        "
what the releases with a modelled change set differently (every other knob is the same in all):"
    );
    let mut line = format!("  {:<knob_width$}", "knob");
    for (p, w) in presets.iter().zip(&widths) {
        line += &format!(" {:<w$}", p.name);
    }
    println!("{}", line.trim_end());
    for (k, values) in &rows {
        let mut line = format!("  {k:<knob_width$}");
        for (v, w) in values.iter().zip(&widths) {
            line += &format!(" {v:<w$}");
        }
        println!("{}", line.trim_end());
    }
}
