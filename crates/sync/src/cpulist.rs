//! Kernel cpu and node lists (`/sys/devices/system/cpu/online`, a node's `cpulist`: `0-3,8,10-11`),
//! read and written: the harness's topology reads the machine's with them, and
//! [`crate::cpu::numa_nodes`] the node count.

/// Largest cpu id accepted by [`parse_cpulist`] (Linux's `NR_CPUS` is at most
/// 8192; this leaves ample headroom while bounding memory use).
const MAX_CPU_ID: usize = 65_535;

/// Largest number of entries [`parse_cpulist`] will expand a list into.
const MAX_CPULIST_ENTRIES: usize = 1 << 20;

/// A cpu list (sysfs `cpulist` syntax such as `0-3,8,10-11`) that could not
/// be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed cpu list {text:?}: {reason}")]
pub struct CpulistError {
    /// The offending text (trimmed).
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parses a sysfs cpu list such as `0-3,8,10-11` into cpu ids, in the order
/// written (ranges expanded ascending; duplicates kept).
///
/// Surrounding whitespace (including the trailing newline of sysfs files) is
/// ignored, and an empty string yields an empty list. Reversed ranges, empty
/// elements, non-numeric text and ids above 65535 are errors.
pub fn parse_cpulist(s: &str) -> Result<Vec<usize>, CpulistError> {
    let text = s.trim();
    let fail = |reason: String| CpulistError {
        text: text.to_string(),
        reason,
    };
    let mut ids = Vec::new();
    if text.is_empty() {
        return Ok(ids);
    }
    for piece in text.split(',') {
        let (lo, hi) = parse_range(piece.trim()).map_err(fail)?;
        if ids.len() + (hi - lo) >= MAX_CPULIST_ENTRIES {
            return Err(fail(format!("more than {MAX_CPULIST_ENTRIES} entries")));
        }
        ids.extend(lo..=hi);
    }
    Ok(ids)
}

/// Parses one element of a cpu list: `N` or `LO-HI`.
fn parse_range(piece: &str) -> Result<(usize, usize), String> {
    let (lo, hi) = match piece.split_once('-') {
        Some((lo, hi)) => (parse_cpu_id(lo)?, parse_cpu_id(hi)?),
        None => {
            let id = parse_cpu_id(piece)?;
            (id, id)
        }
    };
    if lo > hi {
        return Err(format!("range {piece:?} is reversed"));
    }
    Ok((lo, hi))
}

/// Parses one cpu id (decimal digits only).
fn parse_cpu_id(s: &str) -> Result<usize, String> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{s:?} is not a cpu number"));
    }
    match s.parse::<usize>() {
        Ok(id) if id <= MAX_CPU_ID => Ok(id),
        _ => Err(format!("cpu number {s} exceeds {MAX_CPU_ID}")),
    }
}

/// Writes cpu ids compactly in sysfs list syntax, e.g. `0-31,64-95`.
///
/// Order is preserved: only runs of consecutive ascending ids are merged into
/// ranges, so `parse_cpulist(&format_cpulist(v)) == v` for every `v`. An
/// empty slice gives an empty string.
pub fn format_cpulist(ids: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut rest = ids;
    while let Some((&start, _)) = rest.split_first() {
        let run = 1 + rest
            .windows(2)
            .take_while(|w| w[0].checked_add(1) == Some(w[1]))
            .count();
        let end = rest[run - 1];
        parts.push(if run == 1 {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        rest = &rest[run..];
    }
    parts.join(",")
}
