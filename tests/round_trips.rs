//! The fuzz targets' properties (`fuzz/checks.rs`) in the normal test run, on proptest's
//! inputs: every accepted syntax of a thread list, durations, every knob's values, generated
//! valid isolation specs and arbitrary text for each parser, arbitrary `pg_xact` bytes for the
//! CLOG page reader. No input may panic; what is written in an accepted syntax reads back as
//! what was written. Case counts are small: `cargo fuzz` (fuzz/README.md) is the long version.

#[path = "../fuzz/checks.rs"]
mod checks;

use pglocks::cli::parse_threads;
use pglocks::isolation::spec::Blocker;
use pglocks::slru::BLCKSZ;
use pglocks::workloads::KNOBS;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use std::time::Duration;

/// One item of a `--threads` list, in one of the accepted syntaxes.
#[derive(Debug, Clone)]
enum Item {
    One(usize),
    Range(usize, usize),
    Doubling(usize, usize, usize),
    Steps(usize, usize, usize),
}

impl Item {
    /// The item as a user types it, with `pad` spaces around each part.
    fn render(&self, pad: &str) -> String {
        match *self {
            Item::One(n) => format!("{pad}{n}{pad}"),
            Item::Range(a, b) => format!("{pad}{a}{pad}..{pad}{b}{pad}"),
            Item::Doubling(a, b, f) => format!("{pad}{a}..{b}:x{f}{pad}"),
            Item::Steps(a, b, s) => format!("{pad}{a}..{b}:+{s}{pad}"),
        }
    }

    /// The thread counts it stands for, computed the plain way.
    fn expand(&self) -> Vec<usize> {
        match *self {
            Item::One(n) => vec![n],
            Item::Range(a, b) => (a..=b).collect(),
            Item::Doubling(a, b, f) => (0..)
                .map(|i| a * f.pow(i))
                .take_while(|&t| t <= b)
                .collect(),
            Item::Steps(a, b, s) => (a..=b).step_by(s).collect(),
        }
    }
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        (1usize..=65_536).prop_map(Item::One),
        (1usize..1000, 0usize..40).prop_map(|(a, n)| Item::Range(a, a + n)),
        (1usize..100, 0usize..5000, 2usize..5).prop_map(|(a, n, f)| Item::Doubling(a, a + n, f)),
        (1usize..1000, 0usize..200, 1usize..30).prop_map(|(a, n, s)| Item::Steps(a, a + n, s)),
    ]
}

const STATEMENTS: &[&str] = &[
    "BEGIN;",
    "COMMIT;",
    "ROLLBACK;",
    "LOCK TABLE a;",
    "LOCK TABLE a, b IN SHARE MODE NOWAIT;",
    "lock table b in row exclusive mode;",
    "SET deadlock_timeout = '10ms';",
    "BEGIN; LOCK TABLE a IN ACCESS SHARE MODE;",
    "CREATE TABLE a (i int);",
    "DROP TABLE IF EXISTS a, b;",
];

/// A session as generated: quoted name?, setup, steps (quoted name?, SQL), teardown.
type GenSession = (
    bool,
    Option<&'static str>,
    Vec<(bool, &'static str)>,
    Option<&'static str>,
);

/// A permutation entry as generated: the step, and markers (kind, other entry, notices).
type GenEntry = (Index, Vec<(u8, Index, usize)>);

fn block(sql: &str) -> String {
    format!("{{ {sql} }}")
}

/// A quoted identifier with `""` for each quote in `name`.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn thread_lists_in_every_syntax_read_back(items in prop::collection::vec(item(), 1..6),
                                              pad in select(&["", " ", "  "][..])) {
        let text = items.iter().map(|i| i.render(pad)).collect::<Vec<_>>().join(",");
        let expected: Vec<usize> = items.iter().flat_map(Item::expand).collect();
        prop_assert_eq!(checks::threads(&text), Some(expected));
    }

    #[test]
    fn thread_lists_past_the_limits_are_usage_errors(a in 1usize..65_536, big in 65_537usize..) {
        let too_many = 4097 + a % 100;
        for text in [
            format!("{a},{big}"),
            format!("{a}..{big}"),
            format!("{a}..{big}:x2"),
            format!("1..{too_many}:+1"),
        ] {
            prop_assert_eq!(checks::threads(&text), None, "{}", text);
        }
    }

    #[test]
    fn thread_list_text_never_panics(text in "[0-9.,:x+ -]{0,24}|\\PC{0,24}") {
        checks::threads(&text);
    }

    #[test]
    fn durations_read_back(secs in 0u64..100_000_000, nanos in 0u32..1_000_000_000, ms in 0u64..10_000_000) {
        // Up to the flags' limit a duration reads back as it is written; past it, it is a
        // usage error.
        let max = pglocks::cli::MAX_FLAG_DURATION;
        let within = |d: Duration| (d <= max).then_some(d);
        let d = Duration::new(secs, nanos);
        prop_assert_eq!(checks::duration(&pglocks::sync::time::format_duration(d).to_string()), within(d));
        prop_assert_eq!(checks::duration(&format!("{ms}ms")), within(Duration::from_millis(ms)));
        prop_assert_eq!(checks::duration(&format!(" {secs}s ")), within(Duration::from_secs(secs)));
    }

    #[test]
    fn duration_text_never_panics(text in "[0-9.a-z ]{0,16}|\\PC{0,16}") {
        checks::duration(&text);
    }

    #[test]
    fn every_knob_value_read_back_through_apply(
        preset in any::<usize>(),
        value in prop_oneof![
            any::<u32>().prop_map(|n| n.to_string()),
            (0u32..3000).prop_map(|n| n.to_string()),
            (0.0f64..1.2).prop_map(|r| r.to_string()),
            (0u64..3_000_000, select(&["ns", "us", "ms", "s", ""][..]))
                .prop_map(|(n, unit)| format!("{n}{unit}")),
            (0u64..50, 0u64..50).prop_map(|(a, b)| format!("{a}ms..{b}ms")),
            select(&["on", "off", "one", "lock", "atomic", "cas", "none", "64", "auto",
                     "spin", "atomic18", "file", "null", "dense", "free", "locked"][..])
                .prop_map(str::to_string),
        ],
    ) {
        // The value for every knob: most reject it, the ones that take it must read back.
        for knob in KNOBS.iter().map(|k| k.name) {
            checks::knob(preset, &format!("{knob}={value}"));
        }
    }

    #[test]
    fn knob_text_never_panics(preset in any::<usize>(), text in "\\PC{0,32}") {
        checks::knob(preset, &text);
    }

    #[test]
    fn pgoutput_bytes_never_panic_and_accepted_messages_read_back(
        kind in prop::sample::select(b"BCIUDSEcAZ".to_vec()),
        rest in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = vec![kind];
        bytes.extend(rest);
        checks::pgoutput(&bytes);
    }

    #[test]
    fn pgoutput_messages_of_the_publisher_read_back(seed in any::<u64>()) {
        let cfg = pglocks::apply::PublisherConfig {
            large_changes: 30,
            work_mem_changes: 10,
            seed,
            ..Default::default()
        };
        for m in pglocks::apply::publish(&cfg, 6).messages {
            prop_assert_eq!(checks::pgoutput(&m.to_bytes()).is_some(), true);
        }
    }

    #[test]
    fn isolation_spec_text_never_panics(text in "\\PC{0,200}") {
        checks::isolation_spec(&text);
    }

    #[test]
    fn generated_isolation_specs_parse_to_what_was_generated(
        setup in prop::collection::vec(select(STATEMENTS), 0..3),
        teardown in prop::option::of(select(STATEMENTS)),
        sessions in prop::collection::vec(
            (any::<bool>(),
             prop::option::of(select(STATEMENTS)),
             prop::collection::vec((any::<bool>(), select(STATEMENTS)), 1..4),
             prop::option::of(select(STATEMENTS))),
            1..4),
        perms in prop::collection::vec(
            prop::collection::vec(
                (any::<Index>(), prop::collection::vec((0u8..3, any::<Index>(), 0usize..5), 0..3)),
                1..6),
            0..3),
    ) {
        let sessions: Vec<GenSession> = sessions;
        let perms: Vec<Vec<GenEntry>> = perms;
        // Names: bare or quoted (with a quote inside), never a keyword.
        let session_name = |i: usize, q: bool| if q { format!("sess \"{i}\"") } else { format!("s{i}") };
        let step_name = |i: usize, j: usize, q: bool| {
            if q { format!("step \"{i}.{j}\"") } else { format!("s{i}_{j}") }
        };
        let ident = |name: &str, q: bool| if q { quoted(name) } else { name.to_string() };
        // Every step in file order: (name, quoted?, sql, session).
        let mut steps = Vec::new();
        let mut text = String::from("# generated\n");
        for sql in &setup {
            text += &format!("setup {}\n", block(sql));
        }
        if let Some(sql) = teardown {
            text += &format!("teardown {}\n", block(sql));
        }
        for (i, (q, s_setup, s_steps, s_teardown)) in sessions.iter().enumerate() {
            text += &format!("session {}\n", ident(&session_name(i, *q), *q));
            if let Some(sql) = s_setup {
                text += &format!("setup {}\n", block(sql));
            }
            for (j, (sq, sql)) in s_steps.iter().enumerate() {
                let name = step_name(i, j, *sq);
                text += &format!("step {}\t{}\n", ident(&name, *sq), block(sql));
                steps.push((name, *sq, *sql, i));
            }
            if let Some(sql) = s_teardown {
                text += &format!("teardown {}\n", block(sql));
            }
        }
        // Permutations: each entry a step; markers name another entry of another session.
        let mut expected_perms = Vec::new();
        for perm in &perms {
            let chosen: Vec<usize> = perm.iter().map(|(ix, _)| ix.index(steps.len())).collect();
            text += "permutation";
            let mut expected = Vec::new();
            for ((_, markers), &step) in perm.iter().zip(&chosen) {
                let (name, q, _, session) = &steps[step];
                text += &format!(" {}", ident(name, *q));
                let others: Vec<usize> =
                    chosen.iter().copied().filter(|&o| steps[o].3 != *session).collect();
                let mut written = Vec::new();
                let mut blockers = Vec::new();
                for &(kind, ref other, n) in markers {
                    if kind == 0 || others.is_empty() {
                        written.push("*".to_string());
                        blockers.push(Blocker::Once);
                        continue;
                    }
                    let o = others[other.index(others.len())];
                    let (oname, oq, _, _) = &steps[o];
                    if kind == 1 {
                        written.push(ident(oname, *oq));
                        blockers.push(Blocker::Step(o));
                    } else {
                        written.push(format!("{} notices {n}", ident(oname, *oq)));
                        blockers.push(Blocker::Notices(o, n));
                    }
                }
                if !written.is_empty() {
                    text += &format!("({})", written.join(", "));
                }
                expected.push((step, blockers));
            }
            text += "\n";
            expected_perms.push(expected);
        }
        let spec = checks::isolation_spec(&text).unwrap_or_else(|| {
            panic!("a generated spec was rejected: {:?}\n{text}", pglocks::isolation::parse_spec(&text))
        });
        let texts = |v: &[pglocks::isolation::spec::SqlBlock]| {
            v.iter().map(|b| b.text.clone()).collect::<Vec<_>>()
        };
        prop_assert_eq!(texts(&spec.setup), setup.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        prop_assert_eq!(spec.teardown.as_ref().map(|b| b.text.as_str()), teardown);
        prop_assert_eq!(spec.sessions.len(), sessions.len());
        for (i, (got, (q, s_setup, _, s_teardown))) in spec.sessions.iter().zip(&sessions).enumerate() {
            prop_assert_eq!(&got.name, &session_name(i, *q));
            prop_assert_eq!(got.setup.as_ref().map(|b| b.text.as_str()), *s_setup);
            prop_assert_eq!(got.teardown.as_ref().map(|b| b.text.as_str()), *s_teardown);
        }
        prop_assert_eq!(spec.steps.len(), steps.len());
        for (got, (name, _, sql, session)) in spec.steps.iter().zip(&steps) {
            prop_assert_eq!(&got.name, name);
            prop_assert_eq!(got.sql.text.as_str(), *sql);
            prop_assert_eq!(got.sql.statements.len(), sql.matches(';').count());
            prop_assert_eq!(got.session, *session);
        }
        let got_perms: Vec<Vec<(usize, Vec<Blocker>)>> = spec
            .permutations
            .iter()
            .map(|p| p.iter().map(|s| (s.step, s.blockers.clone())).collect())
            .collect();
        prop_assert_eq!(got_perms, expected_perms);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn clog_pages_of_arbitrary_bytes_read_as_their_bits(
        pages in 0usize..3,
        tail in prop_oneof![Just(0usize), 1usize..BLCKSZ],
        seed in any::<u64>(),
    ) {
        // Bytes from a xorshift stream: cheap, and every status pattern shows up.
        let mut x = seed | 1;
        let data: Vec<u8> = (0..pages * BLCKSZ + tail)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        checks::ClogReader::new().check(&data);
    }
}

#[test]
fn the_readme_examples_of_thread_lists() {
    assert_eq!(parse_threads("1..64:x2").unwrap(), [1, 2, 4, 8, 16, 32, 64]);
    assert_eq!(parse_threads("2..16:+2").unwrap().len(), 8);
    // Once expanded-then-checked, these took minutes and gigabytes (found by cargo fuzz).
    assert!(parse_threads("6..8020000002").is_err());
    assert!(parse_threads("1..18446744073709551615:x2").is_err());
}

#[test]
fn several_knobs_in_one_set_read_back() {
    // Found by cargo fuzz: `--set` takes several assignments, and each must read back.
    for (preset, text) in [
        (0, "    backends=4,msg_size= 14"),
        (3, "hit_ratio=1,think=2000"),
        (5, "backends=4,backends=9"),
        (7, "fsync=off,flush_device=file"),
    ] {
        assert!(checks::knob(preset, text), "{text}");
    }
    assert_eq!(
        pglocks::workloads::Settings::split_assignments("wal_fault=fsync:5,write:3,think=2"),
        ["wal_fault=fsync:5,write:3", "think=2"]
    );
}
