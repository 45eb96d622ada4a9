//! `gen/moves`, the one Lua include that is not a file: the transition table
//! of [`crate::transitions`] written as Lua (`may`, `may_move`, `TERMINAL`,
//! `STATES`) when the scripts are built, so the states each script accepts
//! are the ones the Rust table lists.

use std::fmt::Write as _;

use crate::state::JobState;
use crate::transitions::{Op, TRANSITIONS};

/// The transition table as Lua: `may(op, from)` and `may_move(op, from, to)`
/// written out as comparisons, one branch per operation and from-state of
/// [`TRANSITIONS`] (string comparisons only: a script run builds no table and
/// no string for them), the `TERMINAL` set and `STATES[state]` for every
/// state (what an unreadable `state` field is not).
pub(crate) fn moves_lua() -> String {
    let mut out = String::from(
        "-- gen/moves: generated from the transition table (core/src/transitions.rs)\n\
         -- when the scripts are built; edit the table, not this text.\n",
    );
    out.push_str("local TERMINAL = {");
    for state in JobState::ALL.iter().filter(|s| s.is_terminal()) {
        let _ = write!(out, " {} = true,", state.as_str());
    }
    out.push_str(" }\nlocal STATES = {");
    for state in JobState::ALL {
        let _ = write!(out, " {} = true,", state.as_str());
    }
    out.push_str(" }\n\n-- Whether the table lets `op` take a job from `from` to `to`.\n");
    out.push_str("local function may_move(op, from, to)\n");
    for op in Op::ALL {
        let froms: Vec<JobState> = JobState::ALL
            .into_iter()
            .filter(|f| TRANSITIONS.iter().any(|t| t.op == op && t.from == *f))
            .collect();
        if froms.is_empty() {
            continue;
        }
        let _ = writeln!(out, "  if op == '{}' then", op.as_str());
        for from in froms {
            let tos: Vec<String> = TRANSITIONS
                .iter()
                .filter(|t| t.op == op && t.from == from)
                .map(|t| format!("to == '{}'", t.to.as_str()))
                .collect();
            let _ = writeln!(
                out,
                "    if from == '{}' then return {} end",
                from.as_str(),
                tos.join(" or ")
            );
        }
        out.push_str("    return false\n  end\n");
    }
    out.push_str("  return false\nend\n\n-- Whether the table lets `op` act on a job in state `from` at all.\n");
    out.push_str("local function may(op, from)\n");
    for op in Op::ALL {
        let froms: Vec<String> = JobState::ALL
            .into_iter()
            .filter(|f| TRANSITIONS.iter().any(|t| t.op == op && t.from == *f))
            .map(|f| format!("from == '{}'", f.as_str()))
            .collect();
        if froms.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "  if op == '{}' then return {} end",
            op.as_str(),
            froms.join(" or ")
        );
    }
    out.push_str("  return false\nend\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The branch of `may_move` for `op` and `from`: the line naming its to-states.
    fn may_move_line(lua: &str, op: Op, from: JobState) -> Option<String> {
        let body = lua.split("local function may_move").nth(1)?;
        let body = body.split("local function may(").next()?;
        let block = body
            .split(&format!("  if op == '{}' then\n", op.as_str()))
            .nth(1)?;
        let block = block.split("    return false\n").next()?;
        block
            .lines()
            .find(|l| l.contains(&format!("if from == '{}' then", from.as_str())))
            .map(str::to_owned)
    }

    #[test]
    fn the_generated_table_has_every_row_and_nothing_else() {
        let lua = moves_lua();
        let mut comparisons = 0;
        for op in Op::ALL {
            for from in JobState::ALL {
                let rows: Vec<_> = TRANSITIONS
                    .iter()
                    .filter(|t| t.op == op && t.from == from)
                    .collect();
                let line = may_move_line(&lua, op, from);
                match (rows.is_empty(), &line) {
                    (true, None) => {}
                    (true, Some(l)) => panic!("{op} from {from}: no row, but {l}"),
                    (false, None) => panic!("{op} from {from}: rows {rows:?} missing from\n{lua}"),
                    (false, Some(l)) => {
                        for t in &rows {
                            assert!(
                                l.contains(&format!("to == '{}'", t.to.as_str())),
                                "{t:?}: {l}"
                            );
                        }
                        comparisons += l.matches("to == ").count();
                    }
                }
            }
        }
        assert_eq!(comparisons, TRANSITIONS.len(), "{lua}");
    }
}
