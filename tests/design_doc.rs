//! `docs/design.md` shows the transition table exactly as `core/src/transitions.rs`
//! defines it: the block between the two markers is rendered from
//! `leasehold::transitions::TRANSITIONS` here and must match byte for byte, so the document
//! cannot drift from the data the scripts are tested against.

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
