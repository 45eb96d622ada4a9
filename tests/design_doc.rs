//! `docs/design.md` shows the transition table exactly as `core/src/transitions.rs`
//! defines it: the block between the two markers is rendered from
//! `leasehold::transitions::TRANSITIONS` here and must match byte for byte, so the document
//! cannot drift from the data the scripts are tested against. The grid of
//! allowed and forbidden moves, and the moves the prose calls forbidden, are
//! checked against the same table.

use leasehold::queue::JobState;
use leasehold::transitions::Kind;
use leasehold::transitions::TRANSITIONS;

/// The design document, read at compile time.
const DESIGN: &str = include_str!("../docs/design.md");

/// The line before the table in `docs/design.md`.
const BEGIN: &str = "<!-- transitions:begin (rendered from core/src/transitions.rs; checked by tests/design_doc.rs) -->";
/// The line after it.
const END: &str = "<!-- transitions:end -->";

/// How the document names a row's kind.
fn kind(kind: Kind) -> &'static str {
    match kind {
        Kind::Move => "move",
        Kind::Stay => "stay",
        Kind::NewAttempt => "new attempt",
    }
}

/// The table as the document must show it: one line per row of `TRANSITIONS`,
/// in the same order, between the markers.
fn rendered() -> String {
    let mut out = String::new();
    out.push_str(BEGIN);
    out.push('\n');
    out.push_str("| # | operation | from | to | kind | when |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for (n, t) in TRANSITIONS.iter().enumerate() {
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {} |\n",
            n + 1,
            t.op,
            t.from,
            t.to,
            kind(t.kind),
            t.when
        ));
    }
    out.push_str(END);
    out
}

/// The block between the markers in the document (markers included), if both are there once.
fn documented() -> Option<&'static str> {
    let start = DESIGN.find(BEGIN)?;
    let end = DESIGN[start..].find(END)? + start + END.len();
    let once = DESIGN.matches(BEGIN).count() == 1 && DESIGN.matches(END).count() == 1;
    once.then(|| &DESIGN[start..end])
}

#[test]
fn design_doc_shows_the_transition_table_of_transitions_rs() {
    let expected = rendered();
    match documented() {
        Some(block) if block == expected => {}
        Some(block) => panic!(
            "docs/design.md's transition table differs from core/src/transitions.rs.\n\
             Replace the block between the markers with:\n\n{expected}\n\n(the document has:)\n\n{block}\n"
        ),
        None => panic!(
            "docs/design.md must contain each marker once; put this block in it:\n\n{expected}\n"
        ),
    }
}

/// The line before the list of scripts in `docs/design.md`.
const SCRIPTS_BEGIN: &str =
    "<!-- scripts:begin (every file under core/lua; checked by tests/design_doc.rs) -->";
/// The line after it.
const SCRIPTS_END: &str = "<!-- scripts:end -->";

/// Every `.lua` file under `core/lua`, as a path relative to it.
fn lua_files() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("core/lua");
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("core/lua is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "lua") {
                let rel = path.strip_prefix(&root).expect("under core/lua");
                found.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn design_doc_names_every_script_and_include_once() {
    let start = DESIGN
        .find(SCRIPTS_BEGIN)
        .expect("the scripts:begin marker");
    let end = DESIGN[start..]
        .find(SCRIPTS_END)
        .expect("the scripts:end marker")
        + start;
    let listed: Vec<&str> = DESIGN[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let files = lua_files();
    assert!(files.len() > 20, "found the scripts: {files:?}");
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| !listed.contains(&f.as_str()))
        .collect();
    let stray: Vec<&&str> = listed
        .iter()
        .filter(|l| !files.iter().any(|f| f == *l))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let twice: Vec<&&str> = listed.iter().filter(|l| !seen.insert(**l)).collect();
    assert!(
        missing.is_empty() && stray.is_empty() && twice.is_empty(),
        "docs/design.md's list of scripts must name every file under core/lua once: \
         missing {missing:?}, not a file {stray:?}, twice {twice:?}"
    );
}

/// The line before the grid of moves in `docs/design.md`.
const MOVES_BEGIN: &str =
    "<!-- moves:begin (rendered from core/src/transitions.rs; checked by tests/design_doc.rs) -->";
/// The line after it.
const MOVES_END: &str = "<!-- moves:end -->";

/// What the table allows from `from` to `to`: `move` (a row of kind move),
/// `new attempt` (only rows that queue a new attempt) or `—` (no row).
fn pair_kind(from: JobState, to: JobState) -> &'static str {
    let rows = || TRANSITIONS.iter().filter(|t| t.from == from && t.to == to);
    if rows().any(|t| t.kind == Kind::Move) {
        "move"
    } else if rows().any(|t| t.kind == Kind::NewAttempt) {
        "new attempt"
    } else {
        "—"
    }
}

/// The grid as the document must show it: from (rows) × to (columns).
fn rendered_moves() -> String {
    let mut out = format!("{MOVES_BEGIN}\n| from \\ to |");
    for to in JobState::ALL {
        out.push_str(&format!(" {to} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(JobState::ALL.len()));
    out.push('\n');
    for from in JobState::ALL {
        out.push_str(&format!("| {from} |"));
        for to in JobState::ALL {
            let kind = if from == to {
                "·"
            } else {
                pair_kind(from, to)
            };
            out.push_str(&format!(" {kind} |"));
        }
        out.push('\n');
    }
    out.push_str(MOVES_END);
    out
}

/// The pairs the prose names as forbidden: `A→B` between "Forbidden moves,
/// among them" and "are simply absent".
fn prose_forbidden() -> Vec<(String, String)> {
    let start = DESIGN
        .find("Forbidden moves, among them ")
        .expect("the sentence listing forbidden moves");
    let end = DESIGN[start..]
        .find("are simply absent")
        .expect("the end of that list")
        + start;
    DESIGN[start..end]
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter_map(|w| w.split_once('→'))
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect()
}

#[test]
fn design_doc_lists_the_moves_of_the_table() {
    let expected = rendered_moves();
    let start = DESIGN.find(MOVES_BEGIN).expect("the moves:begin marker");
    let end = DESIGN[start..]
        .find(MOVES_END)
        .expect("the moves:end marker")
        + start;
    let block = &DESIGN[start..end + MOVES_END.len()];
    assert_eq!(
        block, expected,
        "docs/design.md's grid of moves differs from core/src/transitions.rs; \
         replace the block between the markers with:\n\n{expected}\n"
    );
    let named = prose_forbidden();
    assert!(
        named.len() >= 3,
        "the prose names forbidden moves: {named:?}"
    );
    for (from, to) in &named {
        let state = |s: &str| {
            JobState::ALL
                .into_iter()
                .find(|j| j.as_str() == s)
                .unwrap_or_else(|| panic!("{s:?} in the prose is not a state"))
        };
        assert_eq!(
            pair_kind(state(from), state(to)),
            "—",
            "docs/design.md calls {from}→{to} forbidden, but the table has a row for it"
        );
    }
    // the prose says RUNNING→QUEUED happens, as a new attempt only
    assert_eq!(
        pair_kind(JobState::Running, JobState::Queued),
        "new attempt"
    );
}
