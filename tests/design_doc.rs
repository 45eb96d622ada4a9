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
