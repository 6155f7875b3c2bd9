//! Knobs: how `--set knob=value` reads and writes one field of [`Settings`].
//!
//! Every field of `Settings` is declared once, in `settings.rs`, with the rule that gives its
//! value in each release and, for a field a user may change, the knob's name, its [`Codec`] (the
//! syntax of its values) and one line of help. The `settings!` macro below turns that one
//! declaration into the struct, the preset's values and the [`KNOBS`](crate::KNOBS) table, so
//! that the field, its default, its parser and its printer cannot drift apart.

use crate::preset::Settings;
use pglocks_sync::time::Duration;

/// One knob of `--set`.
#[derive(Clone, Copy)]
pub struct Knob {
    /// Its name on the command line.
    pub name: &'static str,
    /// What it takes and what it changes, one line.
    pub help: &'static str,
    /// Its value in some settings, written as `--set` takes it.
    pub(crate) get: fn(&Settings) -> String,
    /// Sets it from a value; the error says what the knob takes.
    pub(crate) set: fn(&mut Settings, &str) -> Result<(), String>,
}

impl std::fmt::Debug for Knob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Knob").field("name", &self.name).finish()
    }
}

/// The syntax of one knob's values: how a value is read (given the settings it changes, for
/// knobs whose valid values depend on the release) and how it is written back, so that
/// writing a value and reading it again changes nothing.
pub(crate) trait Codec<T> {
    /// The value `text` stands for, or what the knob takes.
    fn read(&self, text: &str, settings: &Settings) -> Result<T, String>;
    /// `value` as `read` takes it.
    fn write(&self, value: &T) -> String;
}

/// `on` or `off` (also `true`/`false`, `1`/`0`).
pub(crate) struct OnOff;

/// Reads an on/off value.
pub(crate) fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err("on or off".to_string()),
    }
}

/// How an on/off value is written.
pub(crate) fn on_off_name(on: bool) -> String {
    if on { "on" } else { "off" }.to_string()
}

impl Codec<bool> for OnOff {
    fn read(&self, text: &str, _: &Settings) -> Result<bool, String> {
        on_off(text)
    }
    fn write(&self, value: &bool) -> String {
        on_off_name(*value)
    }
}

/// A whole number from `.0` to `.1`.
pub(crate) struct Whole(pub u64, pub u64);

impl Whole {
    fn expected(&self) -> String {
        format!("a whole number from {} to {}", self.0, self.1)
    }
}

impl<T: TryFrom<u64> + ToString> Codec<T> for Whole {
    fn read(&self, text: &str, _: &Settings) -> Result<T, String> {
        text.parse::<u64>()
            .ok()
            .filter(|n| (self.0..=self.1).contains(n))
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| self.expected())
    }
    fn write(&self, value: &T) -> String {
        value.to_string()
    }
}

/// A fraction from 0 to 1.
pub(crate) struct Fraction;

impl Codec<f64> for Fraction {
    fn read(&self, text: &str, _: &Settings) -> Result<f64, String> {
        text.parse::<f64>()
            .ok()
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or_else(|| "a fraction from 0 to 1".to_string())
    }
    fn write(&self, value: &f64) -> String {
        value.to_string()
    }
}

/// Reads one duration in the syntax of every duration pglocks takes (`10us`, `1ms`, `2s`, `0`;
/// `pglocks_sync::time::parse_duration`).
pub(crate) fn read_duration(text: &str) -> Option<Duration> {
    pglocks_sync::time::parse_duration(text).ok()
}

/// Writes a duration as [`read_duration`] reads it.
pub(crate) fn write_duration(d: Duration) -> String {
    pglocks_sync::time::format_duration(d).to_string()
}

/// A duration from `least` to `most`; `expected` says so in words.
pub(crate) struct Dur {
    pub least: Duration,
    pub most: Duration,
    pub expected: &'static str,
}

impl Codec<Duration> for Dur {
    fn read(&self, text: &str, _: &Settings) -> Result<Duration, String> {
        read_duration(text)
            .filter(|d| (self.least..=self.most).contains(d))
            .ok_or_else(|| self.expected.to_string())
    }
    fn write(&self, value: &Duration) -> String {
        write_duration(*value)
    }
}

/// `auto` (the release's own choice: `None`) or a value of the inner codec.
pub(crate) struct Auto<C>(pub C);

impl<T, C: Codec<T>> Codec<Option<T>> for Auto<C> {
    fn read(&self, text: &str, settings: &Settings) -> Result<Option<T>, String> {
        match text {
            "auto" => Ok(None),
            _ => self
                .0
                .read(text, settings)
                .map(Some)
                .map_err(|e| format!("auto or {e}")),
        }
    }
    fn write(&self, value: &Option<T>) -> String {
        value
            .as_ref()
            .map_or_else(|| "auto".to_string(), |v| self.0.write(v))
    }
}

/// One of several named variants: the first name of a variant is how it is written, later
/// ones are aliases.
pub(crate) struct Names<T: 'static>(pub &'static [(&'static str, T)]);

impl<T: Copy + PartialEq> Names<T> {
    /// The names a user may write, aliases left out: "a, b or c".
    fn expected(&self) -> String {
        let names: Vec<&str> = self
            .0
            .iter()
            .enumerate()
            .filter(|(i, (_, v))| !self.0[..*i].iter().any(|(_, w)| w == v))
            .map(|(_, (n, _))| *n)
            .collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.concat(),
        }
    }
}

impl<T: Copy + PartialEq> Codec<T> for Names<T> {
    fn read(&self, text: &str, _: &Settings) -> Result<T, String> {
        self.0
            .iter()
            .find(|(n, _)| *n == text)
            .map(|(_, v)| *v)
            .ok_or_else(|| self.expected())
    }
    fn write(&self, value: &T) -> String {
        // `?` for a variant the table lacks, which the knobs' round-trip test rules out.
        self.0
            .iter()
            .find(|(_, v)| v == value)
            .map_or("?", |(n, _)| n)
            .to_string()
    }
}

/// A knob whose syntax is its own: a reader and a writer.
pub(crate) struct Custom<T> {
    pub read: fn(&str, &Settings) -> Result<T, String>,
    pub write: fn(&T) -> String,
}

impl<T> Codec<T> for Custom<T> {
    fn read(&self, text: &str, settings: &Settings) -> Result<T, String> {
        (self.read)(text, settings)
    }
    fn write(&self, value: &T) -> String {
        (self.write)(value)
    }
}

/// Declares [`Settings`] once: for each field its doc comment, its type, the rule that gives
/// its value in a release (a function of the [`Preset`](crate::Preset)), and any number of
/// knobs that set it (`knob "name": codec => "help"`). Makes the struct, `settings_of` (a
/// preset's values) and `KNOBS` (in declaration order).
macro_rules! settings {
    (
        $(
            $(#[$meta:meta])*
            $field:ident : $ty:ty = $rule:expr
            $(, knob $name:literal : $codec:expr => $help:expr)*
            ;
        )*
    ) => {
        /// The knob values in force for a series: a release's ([`Preset::settings`]), changed
        /// by `--set`s.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Settings {
            $( $(#[$meta])* pub $field: $ty, )*
        }

        /// The values of `preset`'s release.
        fn settings_of(preset: &Preset) -> Settings {
            Settings {
                $( $field: {
                    let rule: fn(&Preset) -> $ty = $rule;
                    rule(preset)
                }, )*
            }
        }

        /// Every knob `--set` accepts, in the order `pglocks list` shows them.
        pub const KNOBS: &[Knob] = &[
            $( $( Knob {
                name: $name,
                help: $help,
                get: |s| $crate::knob::Codec::<$ty>::write(&$codec, &s.$field),
                set: |s, text| {
                    let value = $crate::knob::Codec::<$ty>::read(&$codec, text, s)?;
                    s.$field = value;
                    Ok(())
                },
            }, )* )*
        ];
    };
}

pub(crate) use settings;
