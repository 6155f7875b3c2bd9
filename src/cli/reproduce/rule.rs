//! The rule that turns a published figure and a measured curve into a grade.
//!
//! Every check of a claim carries the figure that was published (a ratio between two series at
//! a client count, a curve's peak and fall, or the statement that a curve no longer falls), or
//! says that nothing numeric was published. One rule, fixed before any run, grades a measured
//! curve against it:
//!
//! - **A published ratio** `p` between series `a` and `b` (at `at` clients): the measured ratio
//!   `r` is read at the largest thread count both series measured up to `at`. The *effect* of a
//!   ratio is `r − 1` (+11 % for 1.11, −26 % for 0.74). The check is *reproduced* when the
//!   measured effect is within ×/÷ 2 of the published one (+5.5 % to +22 % for +11 %), *direction
//!   only* when it has the published sign but not that size, *not reproduced* otherwise. An
//!   effect of [`NO_EFFECT`] or less either way has no sign: the default run's sentences call
//!   such a ratio "the same".
//! - **A published fall**: `series` peaks at `peak` clients and ends at `end` times that peak at
//!   `end_at` clients. The measured curve (up to `end_at` threads) *falls* when its last point
//!   comes after its peak and below [`TOLERANCE`] times it. A fall whose peak lies within ×/÷ 2
//!   of the published peak's client count, and whose size (1 − end / peak) is within ×/÷ 2 of the
//!   published one, reproduces the figure; any other fall is the direction only; no fall is not
//!   reproduced.
//! - **A published "no longer falls"** (`holds`): no point of `series` (up to `through` threads)
//!   is below [`TOLERANCE`] times its best at fewer threads.
//! - **Nothing numeric published**: the weakest honest check, the direction. A ratio beyond
//!   [`NO_EFFECT`] on the published side of 1, or a fall of any size past [`TOLERANCE`],
//!   reproduces it; with every draw agreeing (`super::verdict`), the direction is beyond the
//!   runs' or the seeds' spread.
//!
//! A claim's grade in one draw (one run of a real sweep, one seed of a simulated one) is the
//! lowest of its checks' grades. The verdict then asks every draw (`super::verdict`): they must
//! all give the same grade, or the claim is *unstable*.

use super::Curve;
use serde::{Deserialize, Serialize};

/// A curve that keeps this share of its best so far *holds*; one whose last point is below this
/// share of its peak *falls*. A rule of the verdicts, not a figure of any claim, and from no
/// source: it is the 0.9 the claims' `holds` and `falls` checks used before they carried their
/// published figures, kept so that no bar moved when the rule came.
pub(super) const TOLERANCE: f64 = 0.9;

/// The largest effect of a ratio that has no direction: ±3 %, the noise band within which the
/// default run's sentences call two series the same (`pglocks_harness::compare::DEFAULT_NOISE`).
pub(super) const NO_EFFECT: f64 = pglocks_harness::compare::DEFAULT_NOISE;

/// How a measured figure stands against the published one, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Grade {
    /// The measured effect is missing or has the other sign.
    NotReproduced,
    /// The published sign, not its size.
    DirectionOnly,
    /// The published size (or, where none was published, the direction).
    Reproduced,
}

impl Grade {
    pub(super) fn label(self) -> &'static str {
        match self {
            Grade::NotReproduced => "not reproduced",
            Grade::DirectionOnly => "direction only",
            Grade::Reproduced => "reproduced",
        }
    }
}

/// One test of a claim's curves, with its published figure; a claim's grade is its checks'
/// lowest.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub(super) enum Check {
    /// Series `a`'s throughput over series `b`'s.
    Ratio {
        a: String,
        b: String,
        /// The published ratio (1.11 for +11 %); absent when nothing numeric was published.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        published: Option<f64>,
        /// The client count it was published at: the ratio is read at the largest thread count
        /// both series measured up to it (absent: the largest both measured).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<usize>,
    },
    /// `series` rises to a peak and then falls.
    Falls {
        series: String,
        /// The published peak's client count.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peak: Option<usize>,
        /// The published last point over the peak (0.74: 26 % below it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<f64>,
        /// The published last point's client count: the curve is read up to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end_at: Option<usize>,
    },
    /// `series` no longer falls as threads are added (up to `through` threads, when given).
    Holds {
        series: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        through: Option<usize>,
    },
}

/// One check on one draw's curves.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Measured {
    pub grade: Grade,
    /// The figure the grade came from (a ratio, a curve's end over its peak, its lowest share):
    /// the number whose least and most over the draws the summary gives.
    pub value: f64,
    /// Where it was read, in words ("at 32 threads").
    pub at: String,
}

/// `n` threads, in words.
pub(super) fn threads(n: usize) -> String {
    format!("{n} {}", if n == 1 { "thread" } else { "threads" })
}

/// `x` as a ratio: `1.11×`, `159×`.
fn times(x: f64) -> String {
    format!("{}\u{d7}", num(x))
}

/// A ratio's effect in words: `+11 %`, `−26 %`, or `8×` for a large one.
fn effect(ratio: f64) -> String {
    if ratio >= 2.0 {
        times(ratio)
    } else {
        let pct = (ratio - 1.0) * 100.0;
        let sign = if pct < 0.0 { "\u{2212}" } else { "+" };
        format!("{sign}{} %", trim(pct.abs()))
    }
}

/// A number with no more digits than it needs (22, 5.5, 0.25).
fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Whether `measured` is within ×/÷ 2 of `published` (both of one sign).
fn within_twofold(measured: f64, published: f64) -> bool {
    let q = measured / published;
    (0.5..=2.0).contains(&q)
}

/// The grade of a measured effect against a published one (`None`: only its sign was said,
/// and `published_sign` is it).
fn size_grade(measured: f64, published: Option<f64>, published_sign: f64) -> Grade {
    match published {
        _ if measured * published_sign <= NO_EFFECT => Grade::NotReproduced,
        Some(p) if within_twofold(measured, p) => Grade::Reproduced,
        Some(_) => Grade::DirectionOnly,
        None => Grade::Reproduced,
    }
}

impl Check {
    /// The series the check reads.
    #[cfg(test)]
    pub(super) fn series(&self) -> Vec<&str> {
        match self {
            Check::Ratio { a, b, .. } => vec![a, b],
            Check::Falls { series, .. } | Check::Holds { series, .. } => vec![series],
        }
    }

    /// Whether the published figure is malformed (a ratio of 1, a fall to above the peak).
    pub(super) fn invalid(&self) -> Option<String> {
        match self {
            Check::Ratio {
                published: Some(p), ..
            } if !(p.is_finite() && *p > 0.0 && (p - 1.0).abs() > 1e-9) => {
                Some(format!("a published ratio of {p} has no direction"))
            }
            Check::Falls { end: Some(e), .. } if !(0.0..1.0).contains(e) => Some(format!(
                "a published fall ends at {e} of its peak, not below it"
            )),
            Check::Falls { peak, end, .. } if peak.is_some() != end.is_some() => {
                Some("a published fall needs both its peak and its end".into())
            }
            _ => None,
        }
    }

    /// The rule, in words, as the summary prints it.
    pub(super) fn rule(&self) -> String {
        match self {
            Check::Ratio {
                a,
                b,
                published: Some(p),
                at,
            } => {
                let lo = 1.0 + (p - 1.0) / 2.0;
                let hi = 1.0 + (p - 1.0) * 2.0;
                let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                format!(
                    "{a} / {b}: {} published{}; reproduced from {} to {}, direction only {} {}",
                    effect(*p),
                    at.map_or(String::new(), |n| format!(" at {n} clients")),
                    effect(lo),
                    effect(hi),
                    if *p > 1.0 { "above" } else { "below" },
                    effect(1.0 + NO_EFFECT * (p - 1.0).signum()),
                )
            }
            Check::Ratio {
                a,
                b,
                published: None,
                at,
            } => format!(
                "{a} / {b} above {}{} (nothing numeric published: the direction)",
                effect(1.0 + NO_EFFECT),
                at.map_or(String::new(), |n| format!(" at {} or fewer", threads(n)))
            ),
            Check::Falls {
                series,
                peak: Some(peak),
                end: Some(end),
                end_at,
            } => {
                let fall = 1.0 - end;
                format!(
                    "{series} peaks at {peak} clients and ends at {end:.2}\u{d7} that peak{} published; \
                     reproduced with the peak at {}\u{2013}{} threads and a fall of {}\u{2013}{} %, \
                     direction only for another fall below {TOLERANCE}\u{d7} its peak",
                    end_at.map_or(String::new(), |n| format!(" at {n} clients")),
                    peak.div_ceil(2),
                    peak * 2,
                    trim(fall * 50.0),
                    trim((fall * 200.0).min(100.0)),
                )
            }
            Check::Falls { series, end_at, .. } => format!(
                "{series} ends below {TOLERANCE}\u{d7} its peak{} (nothing numeric published: the direction)",
                end_at.map_or(String::new(), |n| format!(" by {}", threads(n)))
            ),
            Check::Holds { series, through } => format!(
                "{series} never below {TOLERANCE}\u{d7} its best at fewer threads{}",
                through.map_or(String::new(), |n| format!(" up to {}", threads(n)))
            ),
        }
    }

    /// Grades the curves `of` gives (one draw's): the grade, and the figure it came from.
    pub(super) fn grade(&self, of: impl Fn(&str) -> Option<Curve>) -> Result<Measured, String> {
        let find = |label: &str| {
            of(label)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("no series {label} in the report"))
        };
        let upto = |mut c: Curve, n: Option<usize>, label: &str| {
            c.retain(|p| n.map_or(true, |n| p.0 <= n));
            if c.is_empty() {
                Err(format!("{label} has no point up to {n:?} threads"))
            } else {
                Ok(c)
            }
        };
        match self {
            Check::Ratio {
                a,
                b,
                published,
                at,
            } => {
                let (ca, cb) = (upto(find(a)?, *at, a)?, find(b)?);
                let (t, x, y) = ca
                    .iter()
                    .rev()
                    .find_map(|&(t, x)| cb.iter().find(|p| p.0 == t).map(|&(_, y)| (t, x, y)))
                    .ok_or_else(|| format!("{a} and {b} share no thread count"))?;
                let r = x / y.max(f64::MIN_POSITIVE);
                let sign = published.map_or(1.0, |p| p - 1.0).signum();
                Ok(Measured {
                    grade: size_grade(r - 1.0, published.map(|p| p - 1.0), sign),
                    value: r,
                    at: format!("at {}", threads(t)),
                })
            }
            Check::Falls {
                series,
                peak,
                end,
                end_at,
            } => {
                let c = upto(find(series)?, *end_at, series)?;
                let top = c
                    .iter()
                    .copied()
                    .max_by(|x, y| x.1.total_cmp(&y.1))
                    .expect("a curve with points");
                let last = *c.last().expect("a curve with points");
                let share = last.1 / top.1.max(f64::MIN_POSITIVE);
                let fell = top.0 < last.0 && share < TOLERANCE;
                let grade = match (peak, end) {
                    _ if !fell => Grade::NotReproduced,
                    (Some(p), Some(e)) => {
                        let peak_ok = within_twofold(top.0 as f64, *p as f64);
                        if peak_ok && within_twofold(1.0 - share, 1.0 - e) {
                            Grade::Reproduced
                        } else {
                            Grade::DirectionOnly
                        }
                    }
                    _ => Grade::Reproduced,
                };
                Ok(Measured {
                    grade,
                    value: share,
                    at: format!("at {} (its peak at {})", threads(last.0), top.0),
                })
            }
            Check::Holds { series, through } => {
                let c = upto(find(series)?, *through, series)?;
                // The lowest share of the best so far, and where it was.
                let (mut best, mut worst) = (c[0].1, (1.0_f64, c[0].0));
                for &(t, x) in &c[1..] {
                    let share = x / best.max(f64::MIN_POSITIVE);
                    if share < worst.0 {
                        worst = (share, t);
                    }
                    best = best.max(x);
                }
                Ok(Measured {
                    grade: if worst.0 >= TOLERANCE {
                        Grade::Reproduced
                    } else {
                        Grade::NotReproduced
                    },
                    value: worst.0,
                    at: if worst.0 < 1.0 {
                        format!("at {}", threads(worst.1))
                    } else {
                        "(it never falls)".into()
                    },
                })
            }
        }
    }

    /// The figure in words: the headline's (the medians', or the profile's own seed's), and
    /// its least and most over the draws: `pg92 / pg91 = 1.09× at 32 threads (1.05–1.12 over
    /// 3 seeds)`.
    pub(super) fn figure(&self, first: &Measured, all: &[Measured], draws: &str) -> String {
        let lo = all.iter().map(|m| m.value).fold(f64::INFINITY, f64::min);
        let hi = all
            .iter()
            .map(|m| m.value)
            .fold(f64::NEG_INFINITY, f64::max);
        let range = if all.len() > 1 {
            format!(
                " ({}\u{2013}{} over {} {draws})",
                num(lo),
                num(hi),
                all.len()
            )
        } else {
            String::new()
        };
        let what = match self {
            Check::Ratio { a, b, .. } => format!("{a} / {b} = {}", times(first.value)),
            Check::Falls { series, .. } => {
                format!("{series} ends at {:.2}\u{d7} its peak", first.value)
            }
            Check::Holds { series, .. } => {
                format!(
                    "{series} at its lowest {:.2}\u{d7} its best at fewer threads",
                    first.value
                )
            }
        };
        format!("{what} {}{range}", first.at)
    }
}

/// A figure's number, to the digits the summary shows.
fn num(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 9.1-like curve (peaks at 16, then falls) and a 9.2-like one (rises).
    fn curves(l: &str) -> Option<Curve> {
        match l {
            "old" => Some(vec![(1, 10.0), (16, 100.0), (32, 80.0), (64, 40.0)]),
            "new" => Some(vec![(1, 10.0), (16, 120.0), (32, 200.0), (64, 190.0)]),
            _ => None,
        }
    }

    fn ratio(published: Option<f64>, at: Option<usize>) -> Check {
        Check::Ratio {
            a: "new".into(),
            b: "old".into(),
            published,
            at,
        }
    }

    #[test]
    fn a_ratio_reproduces_within_twofold_of_the_published_effect_and_keeps_its_sign() {
        // At 64 threads new / old = 4.75: an effect of +375 %.
        let g = |p| ratio(Some(p), None).grade(curves).unwrap();
        assert_eq!(g(4.0).value, 4.75);
        assert_eq!(g(4.0).grade, Grade::Reproduced);
        assert_eq!(g(2.9).grade, Grade::Reproduced); // +190 %: twice is +380 %
        assert_eq!(g(2.8).grade, Grade::DirectionOnly);
        assert_eq!(g(1.11).grade, Grade::DirectionOnly);
        assert_eq!(g(8.0).grade, Grade::Reproduced); // +700 %: half is +350 %
        assert_eq!(g(9.0).grade, Grade::DirectionOnly);
        assert_eq!(g(0.5).grade, Grade::NotReproduced);
        // Read at the published client count: at 16 threads the ratio is 1.2, +20 %.
        let at16 = ratio(Some(1.11), Some(20)).grade(curves).unwrap();
        assert_eq!((at16.value, at16.grade), (1.2, Grade::Reproduced));
        assert_eq!(at16.at, "at 16 threads");
        // Within ±3 % a ratio has no direction: at 16 threads new / old is 1.2, at 1 thread 1.
        assert_eq!(
            ratio(Some(1.11), Some(1)).grade(curves).unwrap().grade,
            Grade::NotReproduced
        );
        // Nothing numeric: the direction.
        assert_eq!(
            ratio(None, None).grade(curves).unwrap().grade,
            Grade::Reproduced
        );
        let backwards = Check::Ratio {
            a: "old".into(),
            b: "new".into(),
            published: None,
            at: None,
        };
        assert_eq!(backwards.grade(curves).unwrap().grade, Grade::NotReproduced);
        // A published slowdown of 26 %: old / new at 64 is 0.21, a fall of 79 %; at 32, 0.4.
        let slower = |at| Check::Ratio {
            a: "old".into(),
            b: "new".into(),
            published: Some(0.74),
            at,
        };
        assert_eq!(
            slower(None).grade(curves).unwrap().grade,
            Grade::DirectionOnly
        );
        assert_eq!(
            ratio(Some(1.11), Some(0)).grade(curves).unwrap_err(),
            "new has no point up to Some(0) threads"
        );
    }

    #[test]
    fn a_fall_reproduces_with_the_published_peak_and_size_and_a_hold_never_drops() {
        let falls = |series: &str, peak, end, end_at| Check::Falls {
            series: series.into(),
            peak,
            end,
            end_at,
        };
        // old: peak 100 at 16, 40 at 64 (a fall of 60 %).
        let g = |c: Check| c.grade(curves).unwrap();
        for (peak, end, grade) in [
            (20, 0.6, Grade::Reproduced),
            (20, 0.7, Grade::Reproduced),
            (20, 0.74, Grade::DirectionOnly),
            // A published fall of 20 %: 60 % is more than twice it.
            (20, 0.8, Grade::DirectionOnly),
            // A published peak at 64 clients: 16 is a quarter of it.
            (64, 0.6, Grade::DirectionOnly),
        ] {
            let m = g(falls("old", Some(peak), Some(end), None));
            assert_eq!(m.grade, grade, "a peak at {peak}, an end at {end}");
        }
        // Read up to 32 threads: 80 over 100 is a fall of 20 %.
        let to32 = g(falls("old", Some(20), Some(0.8), Some(32)));
        assert_eq!((to32.value, to32.grade), (0.8, Grade::Reproduced));
        assert_eq!(g(falls("old", None, None, None)).grade, Grade::Reproduced);
        // new ends at 0.95 of its peak: no fall.
        assert_eq!(
            g(falls("new", None, None, None)).grade,
            Grade::NotReproduced
        );
        let holds = |series: &str, through| Check::Holds {
            series: series.into(),
            through,
        };
        assert_eq!(g(holds("new", None)).grade, Grade::Reproduced);
        let old = g(holds("old", None));
        assert_eq!((old.value, old.grade), (0.4, Grade::NotReproduced));
        assert_eq!(g(holds("old", Some(16))).grade, Grade::Reproduced);
        assert!(holds("missing", None).grade(curves).is_err());
    }

    #[test]
    fn the_rule_in_words_gives_the_bounds_it_applies() {
        assert_eq!(
            ratio(Some(1.11), Some(32)).rule(),
            "new / old: +11 % published at 32 clients; reproduced from +5.5 % to +22 %, \
             direction only above +3 %"
        );
        assert_eq!(
            ratio(Some(8.0), None).rule(),
            "new / old: 8.00\u{d7} published; reproduced from 4.50\u{d7} to 15.00\u{d7}, \
             direction only above +3 %"
        );
        let fall = Check::Falls {
            series: "old".into(),
            peak: Some(20),
            end: Some(0.79),
            end_at: Some(80),
        };
        assert!(
            fall.rule()
                .contains("peak at 10\u{2013}40 threads and a fall of 10.5\u{2013}42 %"),
            "{}",
            fall.rule()
        );
        assert_eq!(
            ratio(None, Some(64)).rule(),
            "new / old above +3 % at 64 threads or fewer (nothing numeric published: the direction)"
        );
        assert!(ratio(Some(1.0), None).invalid().is_some());
        assert!(ratio(Some(1.11), None).invalid().is_none());
    }

    #[test]
    fn the_figure_gives_the_first_draw_and_the_range_over_all() {
        let m = |value, grade| Measured {
            grade,
            value,
            at: "at 32 threads".into(),
        };
        let all = [
            m(1.09, Grade::Reproduced),
            m(1.05, Grade::Reproduced),
            m(1.12, Grade::Reproduced),
        ];
        assert_eq!(
            ratio(None, None).figure(&all[0], &all, "seeds"),
            "new / old = 1.09\u{d7} at 32 threads (1.05\u{2013}1.12 over 3 seeds)"
        );
        assert_eq!(
            ratio(None, None).figure(&all[0], &all[..1], "runs"),
            "new / old = 1.09\u{d7} at 32 threads"
        );
        let fall = Check::Falls {
            series: "old".into(),
            peak: None,
            end: None,
            end_at: None,
        };
        let m = fall.grade(curves).unwrap();
        assert_eq!(
            fall.figure(&m, std::slice::from_ref(&m), "runs"),
            "old ends at 0.40\u{d7} its peak at 64 threads (its peak at 16)"
        );
    }
}
