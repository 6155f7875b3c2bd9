//! The isolation-spec language of PostgreSQL's isolation tester (specscanner.l, specparse.y,
//! and `check_testspec` in isolationtester.c, 14+):
//!
//! ```text
//! setup { SQL }*  [teardown { SQL }]
//! session NAME [setup { SQL }] (step NAME { SQL })+ [teardown { SQL }]   -- one or more
//! permutation STEP[(MARKER, ...)] ...                                    -- zero or more
//! ```
//! Names are bare identifiers or double-quoted ones (`""` escapes a quote); `#` starts a comment;
//! an SQL block runs from `{` to the first `}` with spaces and tabs (not newlines) trimmed at
//! both ends. A marker is `*` (report the step as waiting when launched), another step's name
//! (do not report this step complete while that one runs), or `STEP notices N`.
//!
//! The SQL in the blocks is parsed here too ([`crate::sql`]), so a statement the model cannot
//! run is reported with the line of its block before anything runs.

use crate::sql::{parse_sql, Statement};
use crate::IsolationError;

/// A parsed SQL block: its text (as printed) and its statements.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlBlock {
    /// The text between the braces, trimmed as the tester trims it.
    pub text: String,
    /// The statements in it.
    pub statements: Vec<Statement>,
    /// The line the block starts on.
    pub line: usize,
}

/// A step: a name and the SQL a session sends for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Its name.
    pub name: String,
    /// Its SQL.
    pub sql: SqlBlock,
    /// The index of its session.
    pub session: usize,
}

/// A session: one backend running its steps in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Its name.
    pub name: String,
    /// Run on its connection before each permutation.
    pub setup: Option<SqlBlock>,
    /// Indexes of its steps in [`TestSpec::steps`].
    pub steps: Vec<usize>,
    /// Run on its connection after each permutation.
    pub teardown: Option<SqlBlock>,
}

/// A permutation step's marker (`PermutationStepBlocker`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// `(*)`: reported as waiting when launched.
    Once,
    /// `(other)`: not reported complete while step `other` is running.
    Step(usize),
    /// `(other notices N)`: not reported complete until `other`'s session has sent N notices
    /// since this step was launched.
    Notices(usize, usize),
}

/// One entry of a permutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermutationStep {
    /// The step (index in [`TestSpec::steps`]).
    pub step: usize,
    /// Its markers.
    pub blockers: Vec<Blocker>,
}

/// A whole spec file.
#[derive(Debug, Clone, PartialEq)]
pub struct TestSpec {
    /// Global setup blocks, run on the control connection before each permutation.
    pub setup: Vec<SqlBlock>,
    /// Global teardown, after each permutation.
    pub teardown: Option<SqlBlock>,
    /// The sessions.
    pub sessions: Vec<Session>,
    /// Every step, in file order.
    pub steps: Vec<Step>,
    /// The permutations listed (empty: run all interleavings).
    pub permutations: Vec<Vec<PermutationStep>>,
    /// Steps defined but used by no listed permutation (the tester warns on stderr).
    pub unused_steps: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Keyword(&'static str),
    Ident(String),
    Sql(String),
    Int(usize),
    Punct(char),
}

const KEYWORDS: [&str; 6] = [
    "notices",
    "permutation",
    "session",
    "setup",
    "step",
    "teardown",
];

/// `spec_yyerror`'s "MESSAGE at line N".
fn syntax(line: usize, message: &str) -> IsolationError {
    IsolationError::Syntax(format!("{message} at line {line}"))
}

/// specscanner.l: the tokens of `text`, each with its line.
fn scan(text: &str) -> Result<Vec<(Tok, usize)>, IsolationError> {
    let mut toks = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    let is_space = |c: char| matches!(c, ' ' | '\t' | '\r' | '\x0c');
    let ident_start = |c: char| c.is_ascii_alphabetic() || c == '_' || !c.is_ascii();
    let ident_cont = |c: char| ident_start(c) || c.is_ascii_digit() || c == '$';
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if is_space(c) => {}
            '#' => while chars.next_if(|&c| c != '\n' && c != '\r').is_some() {},
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            s.push('"');
                        }
                        Some('"') => break,
                        Some('\n') => {
                            return Err(syntax(line, "unexpected newline in quoted identifier"))
                        }
                        Some(c) => s.push(c),
                        None => return Err(syntax(line, "unterminated quoted identifier")),
                    }
                }
                toks.push((Tok::Ident(s), line));
            }
            '{' => {
                let start = line;
                while chars.next_if(|&c| is_space(c)).is_some() {}
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            s.push(c);
                        }
                        None => return Err(syntax(line, "unterminated sql block")),
                    }
                }
                let trimmed = s.trim_end_matches(is_space).len();
                s.truncate(trimmed);
                toks.push((Tok::Sql(s), start));
            }
            c if c.is_ascii_digit() => {
                let mut n = c.to_digit(10).unwrap_or(0) as usize;
                while let Some(d) = chars.next_if(|c| c.is_ascii_digit()) {
                    n = n
                        .saturating_mul(10)
                        .saturating_add(d.to_digit(10).unwrap_or(0) as usize);
                }
                toks.push((Tok::Int(n), line));
            }
            c if ident_start(c) => {
                let mut s = String::from(c);
                while let Some(c) = chars.next_if(|&c| ident_cont(c)) {
                    s.push(c);
                }
                let tok = match KEYWORDS.iter().find(|k| **k == s) {
                    Some(k) => Tok::Keyword(k),
                    None => Tok::Ident(s),
                };
                toks.push((tok, line));
            }
            ',' | '(' | ')' | '*' => toks.push((Tok::Punct(c), line)),
            c => {
                return Err(IsolationError::Syntax(format!(
                    "syntax error at line {line}: unexpected character \"{c}\""
                )));
            }
        }
    }
    Ok(toks)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    last_line: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn line(&self) -> usize {
        self.toks.get(self.pos).map_or(self.last_line, |&(_, l)| l)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(t, _)| t.clone());
        self.pos += 1;
        t
    }

    fn eat_keyword(&mut self, k: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Keyword(x)) if *x == k) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn error(&self) -> IsolationError {
        syntax(self.line(), "syntax error")
    }

    fn ident(&mut self) -> Result<String, IsolationError> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.error()),
        }
    }

    fn sql(&mut self) -> Result<SqlBlock, IsolationError> {
        let line = self.line();
        match self.next() {
            Some(Tok::Sql(text)) => {
                let statements = parse_sql(&text, line)?;
                Ok(SqlBlock {
                    text,
                    statements,
                    line,
                })
            }
            _ => Err(syntax(line, "syntax error")),
        }
    }
}

/// Parses and checks a spec file's text.
pub fn parse_spec(text: &str) -> Result<TestSpec, IsolationError> {
    let toks = scan(text)?;
    let last_line = text.lines().count().max(1);
    let mut p = Parser {
        toks,
        pos: 0,
        last_line,
    };
    let mut spec = TestSpec {
        setup: Vec::new(),
        teardown: None,
        sessions: Vec::new(),
        steps: Vec::new(),
        permutations: Vec::new(),
        unused_steps: Vec::new(),
    };
    while p.eat_keyword("setup") {
        spec.setup.push(p.sql()?);
    }
    if p.eat_keyword("teardown") {
        spec.teardown = Some(p.sql()?);
    }
    while p.eat_keyword("session") {
        let name = p.ident()?;
        let setup = if p.eat_keyword("setup") {
            Some(p.sql()?)
        } else {
            None
        };
        let mut steps = Vec::new();
        while p.eat_keyword("step") {
            let name = p.ident()?;
            let sql = p.sql()?;
            steps.push(spec.steps.len());
            spec.steps.push(Step {
                name,
                sql,
                session: spec.sessions.len(),
            });
        }
        if steps.is_empty() {
            return Err(p.error());
        }
        let teardown = if p.eat_keyword("teardown") {
            Some(p.sql()?)
        } else {
            None
        };
        spec.sessions.push(Session {
            name,
            setup,
            steps,
            teardown,
        });
    }
    if spec.sessions.is_empty() {
        return Err(p.error());
    }
    let mut named: Vec<Vec<(String, Vec<RawBlocker>)>> = Vec::new();
    while p.eat_keyword("permutation") {
        let mut steps = Vec::new();
        while let Some(Tok::Ident(_)) = p.peek() {
            let name = p.ident()?;
            let mut blockers = Vec::new();
            if p.peek() == Some(&Tok::Punct('(')) {
                p.pos += 1;
                loop {
                    blockers.push(match p.next() {
                        Some(Tok::Punct('*')) => RawBlocker::Once,
                        Some(Tok::Ident(other)) => {
                            if p.eat_keyword("notices") {
                                match p.next() {
                                    Some(Tok::Int(n)) => RawBlocker::Notices(other, n),
                                    _ => return Err(syntax(p.line(), "syntax error")),
                                }
                            } else {
                                RawBlocker::Step(other)
                            }
                        }
                        _ => return Err(syntax(p.line(), "syntax error")),
                    });
                    match p.next() {
                        Some(Tok::Punct(',')) => {}
                        Some(Tok::Punct(')')) => break,
                        _ => return Err(syntax(p.line(), "syntax error")),
                    }
                }
            }
            steps.push((name, blockers));
        }
        if steps.is_empty() {
            return Err(p.error());
        }
        named.push(steps);
    }
    if p.peek().is_some() {
        return Err(p.error());
    }
    check(&mut spec, named)?;
    Ok(spec)
}

enum RawBlocker {
    Once,
    Step(String),
    Notices(String, usize),
}

/// `check_testspec`: unique step names, permutation steps and markers that exist.
fn check(
    spec: &mut TestSpec,
    named: Vec<Vec<(String, Vec<RawBlocker>)>>,
) -> Result<(), IsolationError> {
    let mut names: Vec<&str> = spec.steps.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(IsolationError::Spec(format!(
            "duplicate step name: {}",
            w[0]
        )));
    }
    let find = |name: &str| spec.steps.iter().position(|s| s.name == name);
    let mut used = vec![false; spec.steps.len()];
    for perm in &named {
        let mut out = Vec::new();
        for (name, _) in perm {
            let step = find(name).ok_or_else(|| {
                IsolationError::Spec(format!(
                    "undefined step \"{name}\" specified in permutation"
                ))
            })?;
            used[step] = true;
            out.push(step);
        }
        let mut steps = Vec::new();
        for ((name, raw), &step) in perm.iter().zip(&out) {
            let mut blockers = Vec::new();
            for b in raw {
                let (other, notices) = match b {
                    RawBlocker::Once => {
                        blockers.push(Blocker::Once);
                        continue;
                    }
                    RawBlocker::Step(o) => (o, None),
                    RawBlocker::Notices(o, n) => (o, Some(*n)),
                };
                // Only steps of this permutation can be concurrent with it.
                let other_step = perm
                    .iter()
                    .zip(&out)
                    .find(|((n, _), _)| n == other)
                    .map(|(_, &s)| s)
                    .ok_or_else(|| {
                        IsolationError::Spec(format!(
                            "undefined blocking step \"{other}\" referenced in permutation step \"{name}\""
                        ))
                    })?;
                if spec.steps[other_step].session == spec.steps[step].session {
                    return Err(IsolationError::Spec(format!(
                        "permutation step \"{name}\" cannot block on its own session"
                    )));
                }
                blockers.push(match notices {
                    None => Blocker::Step(other_step),
                    Some(n) => Blocker::Notices(other_step, n),
                });
            }
            steps.push(PermutationStep { step, blockers });
        }
        spec.permutations.push(steps);
    }
    if !spec.permutations.is_empty() {
        let mut unused: Vec<String> = spec
            .steps
            .iter()
            .zip(&used)
            .filter(|(_, &u)| !u)
            .map(|(s, _)| s.name.clone())
            .collect();
        unused.sort();
        spec.unused_steps = unused;
    }
    Ok(())
}

/// `run_all_permutations`: every interleaving of the sessions' steps that keeps each session's
/// order, in the tester's order (sessions tried first to last at each position).
pub fn all_permutations(spec: &TestSpec) -> Vec<Vec<PermutationStep>> {
    fn recurse(
        spec: &TestSpec,
        piles: &mut [usize],
        current: &mut Vec<PermutationStep>,
        out: &mut Vec<Vec<PermutationStep>>,
    ) {
        let mut found = false;
        for (s, session) in spec.sessions.iter().enumerate() {
            if piles[s] < session.steps.len() {
                found = true;
                current.push(PermutationStep {
                    step: session.steps[piles[s]],
                    blockers: Vec::new(),
                });
                piles[s] += 1;
                recurse(spec, piles, current, out);
                piles[s] -= 1;
                current.pop();
            }
        }
        if !found {
            out.push(current.clone());
        }
    }
    let mut out = Vec::new();
    recurse(
        spec,
        &mut vec![0; spec.sessions.len()],
        &mut Vec::new(),
        &mut out,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
# a comment
setup { CREATE TABLE a (i int); }
teardown { DROP TABLE a; }
session s1
setup  { SET deadlock_timeout = '10ms'; }
step s1a	{ BEGIN; LOCK TABLE a; }
step "s1 c" { COMMIT; }
session "s""2"
step s2a { LOCK TABLE a IN SHARE MODE NOWAIT; }
permutation s1a(*) s2a("s1 c") "s1 c"
permutation s2a
"#;

    #[test]
    fn parses_the_spec_language() {
        let spec = parse_spec(SPEC).unwrap();
        assert_eq!(spec.sessions.len(), 2);
        assert_eq!(spec.sessions[1].name, "s\"2");
        assert_eq!(spec.steps[0].sql.text, "BEGIN; LOCK TABLE a;");
        assert_eq!(spec.steps[0].sql.statements.len(), 2);
        assert_eq!(spec.steps[1].name, "s1 c");
        assert_eq!(spec.permutations.len(), 2);
        assert_eq!(spec.permutations[0][0].blockers, vec![Blocker::Once]);
        assert_eq!(spec.permutations[0][1].blockers, vec![Blocker::Step(1)]);
        assert!(spec.unused_steps.is_empty());
    }

    #[test]
    fn all_interleavings_keep_each_sessions_order() {
        let spec =
            parse_spec("session a step a1 {BEGIN;} step a2 {COMMIT;} session b step b1 {BEGIN;}")
                .unwrap();
        let names: Vec<String> = all_permutations(&spec)
            .iter()
            .map(|p| {
                p.iter()
                    .map(|s| spec.steps[s.step].name.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        assert_eq!(names, ["a1 a2 b1", "a1 b1 a2", "b1 a1 a2"]);
    }

    #[test]
    fn mistakes_name_their_line() {
        let e = parse_spec("session s1\nstep a { BEGIN; }\nstep b {\n SELECT 1; }").unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        let e = parse_spec("session s1\nstep a { BEGIN; }\n!").unwrap_err();
        assert_eq!(
            e.to_string(),
            "syntax error at line 3: unexpected character \"!\""
        );
        let e = parse_spec("session s1 step a {BEGIN;} step a {COMMIT;}").unwrap_err();
        assert_eq!(e.to_string(), "duplicate step name: a");
        let e = parse_spec("session s1 step a {BEGIN;} permutation b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "undefined step \"b\" specified in permutation"
        );
        let e = parse_spec("session s1 step a {BEGIN;} step b {BEGIN;} permutation a(b) b")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "permutation step \"a\" cannot block on its own session"
        );
    }
}
