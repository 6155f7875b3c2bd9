//! How the report's numbers are written: throughputs (`12.346M` ops/s), latencies and wait times
//! (ns, µs, ms), efficiencies and fractions, metric values, and, from them, the line that
//! describes the machine and the cells of a point's row as the terminal, Markdown and HTML
//! tables show them. One place, so that every output writes a number the same way.
//!
//! This module reads the report's types and the report never calls back into it: the document
//! is data, and how it is written lives here.

use crate::report::{Machine, Point};

/// A throughput (or any count) in a short human form with three decimals: `12.346M`, `1.500k`,
/// `999.000`.
pub fn si(v: f64) -> String {
    let (div, suffix) = si_unit(v);
    format!("{:.3}{suffix}", v / div)
}

/// The divisor and suffix (G, M, k or none) of `v` in SI form.
fn si_unit(v: f64) -> (f64, &'static str) {
    match v.abs() {
        x if x >= 1e9 => (1e9, "G"),
        x if x >= 1e6 => (1e6, "M"),
        x if x >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    }
}

/// A throughput in three significant figures, for a table of many: `27.6k`, `355k`, `1.53M`.
pub fn si3(v: f64) -> String {
    let (div, suffix) = si_unit(v);
    let scaled = v / div;
    let digits = match scaled.abs() {
        x if x >= 100.0 => 0,
        x if x >= 10.0 => 1,
        _ => 2,
    };
    format!("{scaled:.digits$}{suffix}")
}

/// `number` (decimal digits, maybe a point) without trailing zeros after the point: `1.500` →
/// `1.5`, `2.0` → `2`, `120` stays.
fn trimmed(number: String) -> String {
    if number.contains('.') {
        number
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        number
    }
}

/// [`si`] without trailing zeros, for a chart's axis: `1.5M`, `500k`, `0`.
pub fn si_short(v: f64) -> String {
    let text = si(v);
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &text[digits.len()..];
    trimmed(digits.to_string()) + suffix
}

/// A latency in nanoseconds, short, with at most one decimal and none that is zero: `850ns`,
/// `12.5us`, `3ms`, `1.5s`.
pub fn duration_ns(ns: f64) -> String {
    let (number, unit) = match ns {
        x if x >= 1e9 => (format!("{:.1}", x / 1e9), "s"),
        x if x >= 1e6 => (format!("{:.1}", x / 1e6), "ms"),
        x if x >= 1e3 => (format!("{:.1}", x / 1e3), "us"),
        x => (format!("{x:.0}"), "ns"),
    };
    trimmed(number) + unit
}

/// A total wait time in nanoseconds as milliseconds with three decimals: `36.000`.
pub fn wait_ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// A fraction as a percentage with one decimal: `0.931` → `93.1%`.
pub fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// A metric's value: an integer without decimals, anything else with two.
pub fn metric_value(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A ratio of two throughputs with two decimals and a times sign: `2.02×`, `0.85×`.
pub fn times(ratio: f64) -> String {
    format!("{ratio:.2}\u{d7}")
}

/// A ratio as a signed change in percent with one decimal: `1.123` → `+12.3%`, `0.5` → `-50.0%`.
pub fn change(ratio: f64) -> String {
    format!("{:+.1}%", (ratio - 1.0) * 100.0)
}

/// `text` broken at spaces into lines of at most `width` characters (a longer word keeps a line
/// of its own), each line after the first starting with `indent`; for prose in a terminal.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line_len = 0;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if line_len > 0 && line_len + 1 + len > width {
            out.push('\n');
            out.push_str(indent);
            line_len = indent.chars().count();
        } else if line_len > 0 {
            out.push(' ');
            line_len += 1;
        }
        out.push_str(word);
        line_len += len;
    }
    out
}

/// The machine in one line: "8 cpus, 1 node, MODEL", and for a simulated machine what it was
/// and what it cost: "simulated westmere-80: 80 cpus, 8 nodes, MODEL; 0.9 s of host time,
/// 49.300M simulated operations per host second".
pub fn machine(m: &Machine) -> String {
    let nodes = if m.nodes == 1 { "node" } else { "nodes" };
    let base = format!("{} cpus, {} {nodes}, {}", m.cpus, m.nodes, m.model);
    match &m.simulated {
        None => base,
        Some(s) => format!(
            "simulated {}: {base}; {:.1} s of host time, {} simulated operations per host second",
            s.profile,
            s.host_time_ms as f64 / 1000.0,
            si(s.operations_per_host_sec)
        ),
    }
}

/// A point's efficiency with two decimals, `-` without one.
fn efficiency(p: &Point) -> String {
    p.efficiency
        .map_or_else(|| "-".into(), |e| format!("{e:.2}"))
}

/// A point's ideal throughput ([`si`]), `-` without one.
fn ideal(p: &Point) -> String {
    p.ideal_ops_per_sec.map_or_else(|| "-".into(), si)
}

/// A point's throughput as a [`percent`] of its ideal, `-` without one.
fn of_ideal(p: &Point) -> String {
    p.ideal_fraction().map_or_else(|| "-".into(), percent)
}

/// One point's row of a main table: `name`, threads, ops/s, ns/op/thread, efficiency, the ideal
/// and the fraction of it if `with_ideal`, the `latencies` given, and every run's ops/s.
pub fn point_cells(name: String, p: &Point, with_ideal: bool, latencies: &[u64]) -> Vec<String> {
    let mut row = vec![
        name,
        p.threads.to_string(),
        si(p.ops_per_sec),
        format!("{:.2}", p.ns_per_op()),
        efficiency(p),
    ];
    if with_ideal {
        row.extend([ideal(p), of_ideal(p)]);
    }
    row.extend(latencies.iter().map(u64::to_string));
    row.push(
        crate::report::ci95(&p.runs_ops_per_sec)
            .map_or_else(|| "-".into(), |c| format!("\u{b1}{}", percent(c))),
    );
    let runs: Vec<String> = p.runs_ops_per_sec.iter().map(|&r| si(r)).collect();
    row.push(runs.join(" "));
    row
}

/// The text a CSV writer over a buffer holds, once flushed.
pub(crate) fn csv_text(w: csv::Writer<Vec<u8>>) -> Result<String, crate::HarnessError> {
    let bytes = w
        .into_inner()
        .map_err(|e| crate::HarnessError::Csv(e.into_error().into()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_units() {
        assert_eq!(si(12_345_678.0), "12.346M");
        assert_eq!(si(999.0), "999.000");
        assert_eq!(si(1500.0), "1.500k");
        assert_eq!(si3(27_630.4), "27.6k");
        assert_eq!(si3(1_533_634.9), "1.53M");
        assert_eq!(si3(354_855.4), "355k");
        assert_eq!(si3(150.0), "150");
        assert_eq!(si3(2.5e9), "2.50G");
    }

    #[test]
    fn durations_waits_and_fractions() {
        assert_eq!(duration_ns(850.0), "850ns");
        assert_eq!(duration_ns(12_500.0), "12.5us");
        assert_eq!(duration_ns(3.2e6), "3.2ms");
        assert_eq!(duration_ns(1.0e5), "100us");
        assert_eq!(duration_ns(1_999.999_999), "2us");
        assert_eq!(si_short(1_500_000.0), "1.5M");
        assert_eq!(si_short(500_000.0), "500k");
        assert_eq!(si_short(0.0), "0");
        assert_eq!(si_short(120.0), "120");
        assert_eq!(wait_ms(36_000_000), "36.000");
        assert_eq!(percent(0.931), "93.1%");
        assert_eq!(metric_value(1234.0), "1234");
        assert_eq!(metric_value(1.5), "1.50");
        assert_eq!(times(2.0199), "2.02\u{d7}");
        assert_eq!(change(1.1234), "+12.3%");
        assert_eq!(change(0.5), "-50.0%");
    }

    #[test]
    fn machine_line_says_what_was_simulated() {
        let mut m = Machine {
            cpus: 8,
            nodes: 1,
            model: "Test CPU".into(),
            simulated: None,
        };
        assert_eq!(machine(&m), "8 cpus, 1 node, Test CPU");
        m.nodes = 2;
        m.simulated = Some(crate::report::Simulated {
            profile: "westmere-80".into(),
            host_time_ms: 900,
            operations: 44_370_000,
            operations_per_host_sec: 49_300_000.0,
        });
        assert_eq!(
            machine(&m),
            "simulated westmere-80: 8 cpus, 2 nodes, Test CPU; 0.9 s of host time, \
             49.300M simulated operations per host second"
        );
    }

    #[test]
    fn prose_wraps_at_spaces() {
        assert_eq!(wrap("aa bb cc dd", 5, "  "), "aa bb\n  cc\n  dd");
        assert_eq!(wrap("a  verylongword b", 4, ""), "a\nverylongword\nb");
        assert_eq!(wrap("", 10, ""), "");
    }
}
