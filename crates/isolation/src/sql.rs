//! The lock-only SQL the isolation runner executes, parsed as PostgreSQL's grammar (gram.y)
//! reads it: keywords in any case, unquoted names folded to lower case, statements separated by
//! `;`.
//!
//! - `BEGIN [WORK | TRANSACTION] [ISOLATION LEVEL …]`, `START TRANSACTION …`
//! - `COMMIT | END [WORK | TRANSACTION]`, `ROLLBACK | ABORT [WORK | TRANSACTION]`
//! - `LOCK [TABLE] [ONLY] name [*] [, …] [IN mode MODE] [NOWAIT]`
//! - `SET [SESSION] deadlock_timeout | lock_timeout { = | TO } value | DEFAULT`
//! - `CREATE TABLE name (…)`, `DROP TABLE [IF EXISTS] name [, …]`

use crate::IsolationError;
use pglocks_lmgr::LockMode;
use std::time::Duration;

/// A setting the runner models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `deadlock_timeout` (default 1 s).
    DeadlockTimeout,
    /// `lock_timeout` (default 0: none).
    LockTimeout,
}

/// One statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `BEGIN`.
    Begin,
    /// `COMMIT`.
    Commit,
    /// `ROLLBACK`.
    Rollback,
    /// `LOCK TABLE`.
    Lock {
        /// The tables, in order.
        tables: Vec<String>,
        /// The mode (default `ACCESS EXCLUSIVE`).
        mode: LockMode,
        /// `NOWAIT`.
        nowait: bool,
    },
    /// `SET name = value`; `None` is `DEFAULT`.
    Set(Setting, Option<Duration>),
    /// `CREATE TABLE`.
    CreateTable(String),
    /// `DROP TABLE`.
    DropTable {
        /// The tables.
        tables: Vec<String>,
        /// `IF EXISTS`.
        if_exists: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// An unquoted word, lower-cased.
    Word(String),
    /// A quoted identifier.
    Quoted(String),
    /// A string literal.
    Str(String),
    Punct(char),
}

fn unsupported(line: usize, what: impl std::fmt::Display) -> IsolationError {
    IsolationError::Sql {
        line,
        message: what.to_string(),
    }
}

fn tokenize(stmt: &str, line: usize) -> Result<Vec<Tok>, IsolationError> {
    let mut toks = Vec::new();
    let mut chars = stmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '-' if chars.peek() == Some(&'-') => while chars.next_if(|&c| c != '\n').is_some() {},
            '"' | '\'' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some(q) if q == c && chars.peek() == Some(&c) => {
                            chars.next();
                            s.push(c);
                        }
                        Some(q) if q == c => break,
                        Some(x) => s.push(x),
                        None => {
                            return Err(unsupported(
                                line,
                                format!("unterminated quote in \"{stmt}\""),
                            ))
                        }
                    }
                }
                toks.push(if c == '"' {
                    Tok::Quoted(s)
                } else {
                    Tok::Str(s)
                });
            }
            c if c.is_alphanumeric() || c == '_' || c == '.' => {
                let mut s = String::from(c);
                while let Some(x) =
                    chars.next_if(|x| x.is_alphanumeric() || *x == '_' || *x == '$' || *x == '.')
                {
                    s.push(x);
                }
                toks.push(Tok::Word(s.to_lowercase()));
            }
            c => toks.push(Tok::Punct(c)),
        }
    }
    Ok(toks)
}

/// Splits `text` at semicolons outside quotes.
fn split_statements(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut quote = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, ';') => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// Parses an SQL block that starts on `line`.
pub fn parse_sql(text: &str, line: usize) -> Result<Vec<Statement>, IsolationError> {
    split_statements(text)
        .into_iter()
        .map(|stmt| {
            let toks = tokenize(stmt, line)?;
            Statement::parse(&toks).ok_or_else(|| {
                unsupported(
                    line,
                    format!(
                        "\"{}\" is not a statement the lock model runs (BEGIN, COMMIT, ROLLBACK, \
                         LOCK TABLE, SET deadlock_timeout/lock_timeout, CREATE/DROP TABLE)",
                        stmt.trim()
                    ),
                )
            })
        })
        .collect()
}

/// A cursor over a statement's tokens.
struct Words<'a> {
    toks: &'a [Tok],
    pos: usize,
}

impl Words<'_> {
    fn eat(&mut self, word: &str) -> bool {
        if matches!(self.toks.get(self.pos), Some(Tok::Word(w)) if w == word) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.toks.get(self.pos) == Some(&Tok::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn done(&self) -> bool {
        self.pos == self.toks.len()
    }

    fn name(&mut self) -> Option<String> {
        let n = match self.toks.get(self.pos)? {
            Tok::Word(w) => w.clone(),
            Tok::Quoted(q) => q.clone(),
            _ => return None,
        };
        self.pos += 1;
        Some(n)
    }

    fn names(&mut self) -> Option<Vec<String>> {
        let mut v = vec![self.name()?];
        while self.eat_punct(',') {
            v.push(self.name()?);
        }
        Some(v)
    }

    fn rest_is_words(&mut self) -> bool {
        while let Some(Tok::Word(_)) = self.toks.get(self.pos) {
            self.pos += 1;
        }
        self.done()
    }
}

/// A time setting's value: a number of milliseconds, or a string with a unit (guc.c's
/// `parse_int` with `GUC_UNIT_MS`).
fn parse_ms(value: &str) -> Option<Duration> {
    let v = value.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let num: f64 = num.parse().ok()?;
    let ms = match unit.trim() {
        "" | "ms" => num,
        "us" => num / 1000.0,
        "s" => num * 1e3,
        "min" => num * 60e3,
        "h" => num * 3600e3,
        "d" => num * 86400e3,
        _ => return None,
    };
    Some(Duration::from_micros((ms * 1000.0).round() as u64))
}

impl Statement {
    fn parse(toks: &[Tok]) -> Option<Statement> {
        let mut w = Words { toks, pos: 0 };
        let tx_words = |w: &mut Words<'_>| {
            let _ = w.eat("work") || w.eat("transaction");
        };
        if w.eat("begin") || (w.eat("start") && w.eat("transaction")) {
            tx_words(&mut w);
            // ISOLATION LEVEL … / READ WRITE …: irrelevant to locks.
            return w.rest_is_words().then_some(Statement::Begin);
        }
        if w.eat("commit") || w.eat("end") {
            tx_words(&mut w);
            return w.done().then_some(Statement::Commit);
        }
        if w.eat("rollback") || w.eat("abort") {
            tx_words(&mut w);
            return w.done().then_some(Statement::Rollback);
        }
        if w.eat("lock") {
            let _ = w.eat("table");
            let _ = w.eat("only");
            let mut tables = vec![w.name()?];
            let _ = w.eat_punct('*');
            while w.eat_punct(',') {
                tables.push(w.name()?);
                let _ = w.eat_punct('*');
            }
            let mut mode = LockMode::AccessExclusive;
            if w.eat("in") {
                let mut words = Vec::new();
                while !w.eat("mode") {
                    match w.toks.get(w.pos)? {
                        Tok::Word(x) => words.push(x.clone()),
                        _ => return None,
                    }
                    w.pos += 1;
                }
                mode = LockMode::from_sql(&words.join(" "))?;
            }
            let nowait = w.eat("nowait");
            return w.done().then_some(Statement::Lock {
                tables,
                mode,
                nowait,
            });
        }
        if w.eat("set") {
            let _ = w.eat("session");
            let setting = if w.eat("deadlock_timeout") {
                Setting::DeadlockTimeout
            } else if w.eat("lock_timeout") {
                Setting::LockTimeout
            } else {
                return None;
            };
            if !(w.eat_punct('=') || w.eat("to")) {
                return None;
            }
            let value = match w.toks.get(w.pos)? {
                Tok::Word(d) if d == "default" => None,
                Tok::Word(v) | Tok::Str(v) => Some(parse_ms(v)?),
                _ => return None,
            };
            w.pos += 1;
            return w.done().then_some(Statement::Set(setting, value));
        }
        if w.eat("create") && w.eat("table") {
            let name = w.name()?;
            // The column list does not matter to locks.
            return w.eat_punct('(').then_some(Statement::CreateTable(name));
        }
        w.pos = 0;
        if w.eat("drop") && w.eat("table") {
            let if_exists = w.eat("if") && w.eat("exists");
            let tables = w.names()?;
            return w
                .done()
                .then_some(Statement::DropTable { tables, if_exists });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_lock_statements() {
        let s = parse_sql(
            "begin isolation level read committed; LOCK TABLE a, \"B\" IN share row exclusive MODE NOWAIT; Lock x;",
            1,
        )
        .unwrap();
        assert_eq!(
            s,
            vec![
                Statement::Begin,
                Statement::Lock {
                    tables: vec!["a".into(), "B".into()],
                    mode: LockMode::ShareRowExclusive,
                    nowait: true
                },
                Statement::Lock {
                    tables: vec!["x".into()],
                    mode: LockMode::AccessExclusive,
                    nowait: false
                },
            ]
        );
        assert_eq!(
            parse_sql(
                "SET deadlock_timeout = '10ms'; set lock_timeout to 2; SET lock_timeout = '1s'",
                1
            )
            .unwrap(),
            vec![
                Statement::Set(Setting::DeadlockTimeout, Some(Duration::from_millis(10))),
                Statement::Set(Setting::LockTimeout, Some(Duration::from_millis(2))),
                Statement::Set(Setting::LockTimeout, Some(Duration::from_secs(1))),
            ]
        );
        assert_eq!(
            parse_sql(
                "CREATE TABLE t (i int primary key); DROP TABLE IF EXISTS t, u;",
                1
            )
            .unwrap()
            .len(),
            2
        );
    }

    #[test]
    fn anything_else_is_refused_with_its_line() {
        let e = parse_sql("SELECT 1", 7).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 7: \"SELECT 1\" is not a statement"),
            "{e}"
        );
        assert!(parse_sql("LOCK TABLE a IN SHARED MODE", 1).is_err());
        assert!(parse_sql("SET work_mem = 1", 1).is_err());
    }
}
