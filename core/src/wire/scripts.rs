//! The script registry: every Lua script, built once from its file under
//! `core/lua/` and the shared files it includes, in two forms of the same
//! text: one function library holding every script (loaded once per server with
//! `FUNCTION LOAD`, called with `FCALL`), and each script on its own for
//! `EVALSHA` (servers without functions, and tests).
//!
//! A script names what it needs with `--- @include "lib/<name>"` lines; each
//! included file's text is put in front of the script once, in dependency
//! order. Every script's first statement is `begin_call(KEYS, ARGV)`
//! (`lib/call`, written here): the shared files define helpers only, and a run
//! binds its own keys and arguments, so the library's helpers are built once
//! per load instead of once per call. `gen/moves` is not a file: it is the transition table of
//! [`crate::transitions`] written as Lua (`may`, `may_move`, `TERMINAL`),
//! so the states each script accepts are the ones the Rust table lists.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::LazyLock;

use deadpool_redis::redis::Script;

use crate::state::JobState;
use crate::transitions::{Op, TRANSITIONS};

/// The Lua sources, by include name (path under `core/lua/` without `.lua`).
const SOURCES: &[(&str, &str)] = &[
    ("lib/keys", include_str!("../../lua/lib/keys.lua")),
    ("lib/call", include_str!("../../lua/lib/call.lua")),
    ("lib/time", include_str!("../../lua/lib/time.lua")),
    ("lib/ready", include_str!("../../lua/lib/ready.lua")),
    ("lib/indexes", include_str!("../../lua/lib/indexes.lua")),
    ("lib/events", include_str!("../../lua/lib/events.lua")),
    ("lib/wake", include_str!("../../lua/lib/wake.lua")),
    ("lib/locks", include_str!("../../lua/lib/locks.lua")),
    ("lib/flow", include_str!("../../lua/lib/flow.lua")),
    ("lib/moves", include_str!("../../lua/lib/moves.lua")),
    ("lib/jobs", include_str!("../../lua/lib/jobs.lua")),
    ("lib/attempts", include_str!("../../lua/lib/attempts.lua")),
    ("lib/stale", include_str!("../../lua/lib/stale.lua")),
    ("lib/retention", include_str!("../../lua/lib/retention.lua")),
    ("lib/args", include_str!("../../lua/lib/args.lua")),
    ("lib/create", include_str!("../../lua/lib/create.lua")),
    ("lib/schedule", include_str!("../../lua/lib/schedule.lua")),
    (
        "lib/quarantine",
        include_str!("../../lua/lib/quarantine.lua"),
    ),
    ("lib/groups", include_str!("../../lua/lib/groups.lua")),
    ("lib/cancel", include_str!("../../lua/lib/cancel.lua")),
    (
        "lib/new_attempt",
        include_str!("../../lua/lib/new_attempt.lua"),
    ),
    ("lib/stats", include_str!("../../lua/lib/stats.lua")),
    ("lib/search", include_str!("../../lua/lib/search.lua")),
    (
        "transitions/start",
        include_str!("../../lua/transitions/start.lua"),
    ),
    (
        "transitions/checkpoint",
        include_str!("../../lua/transitions/checkpoint.lua"),
    ),
    (
        "transitions/finish",
        include_str!("../../lua/transitions/finish.lua"),
    ),
    (
        "transitions/release",
        include_str!("../../lua/transitions/release.lua"),
    ),
    (
        "transitions/lease",
        include_str!("../../lua/transitions/lease.lua"),
    ),
    ("enqueue", include_str!("../../lua/enqueue.lua")),
    ("renew", include_str!("../../lua/renew.lua")),
    ("cancel", include_str!("../../lua/cancel.lua")),
    ("sweep", include_str!("../../lua/sweep.lua")),
    ("retry", include_str!("../../lua/retry.lua")),
    ("resolve", include_str!("../../lua/resolve.lua")),
    ("delete", include_str!("../../lua/delete.lua")),
    ("run_now", include_str!("../../lua/run_now.lua")),
    ("purge", include_str!("../../lua/purge.lua")),
    ("claim_cleanup", include_str!("../../lua/claim_cleanup.lua")),
    ("settle", include_str!("../../lua/settle.lua")),
    ("pause", include_str!("../../lua/pause.lua")),
    ("limit", include_str!("../../lua/limit.lua")),
    ("process_log", include_str!("../../lua/process_log.lua")),
    (
        "quarantine_repair",
        include_str!("../../lua/quarantine_repair.lua"),
    ),
    (
        "quarantine_purge",
        include_str!("../../lua/quarantine_purge.lua"),
    ),
    ("group_create", include_str!("../../lua/group_create.lua")),
    ("group_seal", include_str!("../../lua/group_seal.lua")),
    ("group_cancel", include_str!("../../lua/group_cancel.lua")),
    ("group_retry", include_str!("../../lua/group_retry.lua")),
    (
        "schedule_register",
        include_str!("../../lua/schedule_register.lua"),
    ),
    ("schedule_tick", include_str!("../../lua/schedule_tick.lua")),
    (
        "schedule_state",
        include_str!("../../lua/schedule_state.lua"),
    ),
];

/// The include directive, as the first characters of a line.
const INCLUDE: &str = "--- @include \"";

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

/// The text of the include `name` (`gen/moves` is generated).
fn source(name: &str) -> Option<String> {
    if name == "gen/moves" {
        return Some(moves_lua());
    }
    SOURCES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| (*s).to_owned())
}

/// The names a source includes, in the order written.
fn includes(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|line| {
        line.strip_prefix(INCLUDE)
            .and_then(|rest| rest.strip_suffix('"'))
    })
}

/// Appends `name`'s includes (depth first, each once) and then `name` itself.
fn expand_into(name: &str, seen: &mut HashSet<String>, out: &mut String) {
    if !seen.insert(name.to_owned()) {
        return;
    }
    let Some(text) = source(name) else {
        // a missing include is a defect in this crate's own files: the unit
        // test below names it; Redis would report the undefined function
        let _ = writeln!(out, "error('leasehold: missing Lua include {name}')");
        return;
    };
    for dep in includes(&text) {
        expand_into(dep, seen, out);
    }
    out.push_str(&text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

/// The first statement of every script run (`lib/call`).
const BEGIN_CALL: &str = "begin_call(KEYS, ARGV)\n";

/// Appends what script `name` includes (and `lib/call`), each once, skipping
/// those in `seen`; returns the script's own text.
fn script_parts(name: &str, seen: &mut HashSet<String>, out: &mut String) -> String {
    let text = source(name).unwrap_or_default();
    expand_into("lib/call", seen, out);
    for dep in includes(&text) {
        expand_into(dep, seen, out);
    }
    text
}

/// The full text of the script `name` for `EVAL`, includes resolved; `None`
/// for an unknown name.
pub fn script_source(name: &str) -> Option<String> {
    if !SCRIPTS.contains(&name) {
        return None;
    }
    let mut out = String::new();
    let text = script_parts(name, &mut HashSet::new(), &mut out);
    out.push_str(BEGIN_CALL);
    out.push_str(&text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    Some(out)
}

/// Stands for the library's digest in its text until the digest is known.
const DIGEST: &str = "@DIGEST@";

/// The function library: every shared file once, then one function per
/// script (`leasehold_<digest>_<script>`) whose body is the script's text.
/// The digest (of the text itself) names the library and its functions, so
/// workers of different versions of this crate each call their own.
fn library() -> (String, String) {
    let mut body = String::new();
    let mut seen = HashSet::new();
    let mut functions = String::new();
    for name in SCRIPTS {
        let text = script_parts(name, &mut seen, &mut body);
        let _ = write!(
            functions,
            "redis.register_function('leasehold_{DIGEST}_{name}', function(KEYS, ARGV)\n\
             {BEGIN_CALL}{text}\nend)\n"
        );
    }
    body.push_str(&functions);
    let digest = Script::new(&body).get_hash()[..16].to_owned();
    let text = format!(
        "#!lua name=leasehold_{digest}\n{}",
        body.replace(DIGEST, &digest)
    );
    (text, digest)
}

/// The library's text and digest, built once.
static LIBRARY: LazyLock<(String, String)> = LazyLock::new(library);

/// The text of the function library (`FUNCTION LOAD`) holding every script.
pub fn library_source() -> &'static str {
    &LIBRARY.0
}

/// The scripts clients call, by name (the rest of `core/lua/` is included).
const SCRIPTS: [&str; 23] = [
    "enqueue",
    "renew",
    "cancel",
    "sweep",
    "retry",
    "resolve",
    "delete",
    "run_now",
    "purge",
    "claim_cleanup",
    "settle",
    "quarantine_repair",
    "quarantine_purge",
    "group_create",
    "group_seal",
    "group_cancel",
    "group_retry",
    "pause",
    "limit",
    "process_log",
    "schedule_register",
    "schedule_tick",
    "schedule_state",
];

/// A script clients call: its function in the library, and its own text for
/// `EVALSHA` where the server has no functions.
pub(crate) struct LuaScript {
    /// The script on its own, by SHA.
    pub(crate) eval: Script,
    /// Its function's name in the library.
    pub(crate) function: String,
}

impl LuaScript {
    fn new(name: &'static str) -> LuaScript {
        LuaScript {
            eval: Script::new(&script_source(name).unwrap_or_default()),
            function: format!("leasehold_{}_{name}", LIBRARY.1),
        }
    }
}

macro_rules! script {
    ($name:literal) => {
        LazyLock::new(|| LuaScript::new($name))
    };
}

/// enqueue.lua
pub(crate) static ENQUEUE: LazyLock<LuaScript> = script!("enqueue");
/// renew.lua
pub(crate) static RENEW: LazyLock<LuaScript> = script!("renew");
/// cancel.lua
pub(crate) static CANCEL: LazyLock<LuaScript> = script!("cancel");
/// sweep.lua
pub(crate) static SWEEP: LazyLock<LuaScript> = script!("sweep");
/// retry.lua
pub(crate) static RETRY: LazyLock<LuaScript> = script!("retry");
/// resolve.lua
pub(crate) static RESOLVE: LazyLock<LuaScript> = script!("resolve");
/// delete.lua: deletes a terminal job before retention would.
pub(crate) static DELETE: LazyLock<LuaScript> = script!("delete");
/// run_now.lua: makes a delayed QUEUED job due now.
pub(crate) static RUN_NOW: LazyLock<LuaScript> = script!("run_now");
/// purge.lua
pub(crate) static PURGE: LazyLock<LuaScript> = script!("purge");
/// claim_cleanup.lua
pub(crate) static CLAIM_CLEANUP: LazyLock<LuaScript> = script!("claim_cleanup");
/// settle.lua: every holder operation (start, checkpoint, finish, release) and
/// every lease, one or many per call.
pub(crate) static SETTLE: LazyLock<LuaScript> = script!("settle");
/// quarantine_repair.lua: re-validates a quarantined job and requeues it.
pub(crate) static QUARANTINE_REPAIR: LazyLock<LuaScript> = script!("quarantine_repair");
/// quarantine_purge.lua: deletes a quarantined job and its records.
pub(crate) static QUARANTINE_PURGE: LazyLock<LuaScript> = script!("quarantine_purge");
/// group_create.lua: creates a group of jobs.
pub(crate) static GROUP_CREATE: LazyLock<LuaScript> = script!("group_create");
/// group_seal.lua: closes a group to new children.
pub(crate) static GROUP_SEAL: LazyLock<LuaScript> = script!("group_seal");
/// group_cancel.lua: cancels a group, a batch of its children per call.
pub(crate) static GROUP_CANCEL: LazyLock<LuaScript> = script!("group_cancel");
/// group_retry.lua: retries the failed children of a group, a batch per call.
pub(crate) static GROUP_RETRY: LazyLock<LuaScript> = script!("group_retry");

/// pause.lua: pauses or resumes a pipeline or a queue.
pub(crate) static PAUSE: LazyLock<LuaScript> = script!("pause");
/// limit.lua: takes tokens from a named rate limiter inside a step.
pub(crate) static LIMIT: LazyLock<LuaScript> = script!("limit");
/// process_log.lua: a process step's record (exit, cut-off, progress, log tails).
pub(crate) static PROCESS_LOG: LazyLock<LuaScript> = script!("process_log");

/// schedule_register.lua: a worker writes a schedule's definition on start.
pub(crate) static SCHEDULE_REGISTER: LazyLock<LuaScript> = script!("schedule_register");
/// schedule_tick.lua: claims a schedule's due windows and enqueues their jobs.
pub(crate) static SCHEDULE_TICK: LazyLock<LuaScript> = script!("schedule_tick");
/// schedule_state.lua: pauses or resumes a schedule.
pub(crate) static SCHEDULE_STATE: LazyLock<LuaScript> = script!("schedule_state");

/// Every script, for preloading without functions.
pub(crate) fn all() -> [&'static LuaScript; 23] {
    [
        &ENQUEUE,
        &RENEW,
        &CANCEL,
        &SWEEP,
        &RETRY,
        &RESOLVE,
        &DELETE,
        &RUN_NOW,
        &PURGE,
        &CLAIM_CLEANUP,
        &SETTLE,
        &QUARANTINE_REPAIR,
        &QUARANTINE_PURGE,
        &GROUP_CREATE,
        &GROUP_SEAL,
        &GROUP_CANCEL,
        &GROUP_RETRY,
        &PAUSE,
        &LIMIT,
        &PROCESS_LOG,
        &SCHEDULE_REGISTER,
        &SCHEDULE_TICK,
        &SCHEDULE_STATE,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_include_resolves_and_every_source_is_used() {
        let mut used = HashSet::new();
        for name in SCRIPTS {
            let text = script_source(name).expect("a known script");
            assert!(
                !text.contains("missing Lua include"),
                "{name}: {}",
                text.lines()
                    .find(|l| l.contains("missing Lua include"))
                    .unwrap_or_default()
            );
            let mut seen = HashSet::from([name.to_owned()]);
            script_parts(name, &mut seen, &mut String::new());
            used.extend(seen);
        }
        for (name, _) in SOURCES {
            assert!(used.contains(*name), "{name}.lua is included by no script");
        }
    }

    #[test]
    fn no_script_lists_accepted_states_by_hand() {
        // the states an operation accepts come from gen/moves; a set
        // literal of states in a Lua file would be a second table
        for (name, text) in SOURCES {
            for state in JobState::ALL {
                let literal = format!("{} = true", state.as_str());
                assert!(
                    !text.contains(&literal),
                    "{name}.lua lists {literal}: use may/may_move (lib/moves)"
                );
            }
        }
    }

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

    /// Names a file defines at its top level (`local function f`, `local A, B =`).
    fn top_level_names(text: &str) -> Vec<String> {
        let mut names = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("local function ") {
                names.extend(rest.split('(').next().map(str::to_owned));
            } else if let Some(rest) = line.strip_prefix("local ") {
                // `local A, B = ...` or a declaration `local A, B`
                let lhs = rest.split_once('=').map_or(rest, |(lhs, _)| lhs);
                let lhs = lhs.split("--").next().unwrap_or_default();
                names.extend(lhs.split(',').map(|n| n.trim().to_owned()));
            }
        }
        names
    }

    /// A line without its comment and string literals.
    fn code_of(line: &str) -> String {
        let line = line.split("--").next().unwrap_or_default();
        let mut out = String::new();
        let mut quote = None;
        for c in line.chars() {
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == '\'' || c == '"' => quote = Some(c),
                None => out.push(c),
            }
        }
        out
    }

    /// The identifiers of a Lua text (comments and strings dropped).
    fn identifiers(text: &str) -> HashSet<String> {
        text.lines()
            .map(code_of)
            .collect::<Vec<_>>()
            .iter()
            .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// On a cluster, a call with a missing named key is refused before it runs
    /// while its slot migrates; every call names the base (`KEYS[1]`), so the
    /// base must never become a key: no script may read or write it as one.
    /// It is only ever the start of other names (`BASE .. ':job:' ..`), its
    /// length (`#BASE`) or the source of the queue's name (`string.match`).
    #[test]
    fn the_base_is_never_used_as_a_key() {
        for (name, text) in SOURCES {
            for (n, line) in text.lines().enumerate() {
                let code = code_of(line);
                if *name != "lib/keys" {
                    assert!(
                        !code.contains("KEYS[1]"),
                        "{name}:{}: KEYS[1] outside lib/keys: {line}",
                        n + 1
                    );
                }
                let mut rest = code.as_str();
                while let Some(at) = rest.find("BASE") {
                    let before = &rest[..at];
                    let after = &rest[at + 4..];
                    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
                    let whole = !before.ends_with(ident) && !after.starts_with(ident);
                    let allowed = after.trim_start().starts_with("..")
                        || before.ends_with('#')
                        || before.ends_with("match(")
                        || (*name == "lib/keys"
                            && (code.starts_with("local BASE")
                                || code.trim_start().starts_with("BASE, ")
                                || code.contains("= BASE or")));
                    assert!(
                        !whole || allowed,
                        "{name}:{}: BASE used other than as a name prefix: {line}",
                        n + 1
                    );
                    rest = after;
                }
            }
        }
    }

    #[test]
    fn no_two_shared_files_define_the_same_name() {
        // the library holds every shared file in one chunk: a second
        // definition of a name would silently replace the first for every
        // script registered after it
        let mut owner: std::collections::HashMap<String, &str> = Default::default();
        let moves = moves_lua();
        let files = SOURCES
            .iter()
            .filter(|(n, _)| n.starts_with("lib/") || n.starts_with("transitions/"))
            .map(|(n, t)| (*n, *t))
            .chain([("gen/moves", moves.as_str())]);
        for (name, text) in files {
            for defined in top_level_names(text) {
                if let Some(first) = owner.insert(defined.clone(), name) {
                    panic!("{defined} is defined by {first} and by {name}");
                }
            }
        }
    }

    #[test]
    fn the_library_registers_every_script_once() {
        let lib = library_source();
        assert!(lib.starts_with("#!lua name=leasehold_"));
        for name in SCRIPTS {
            let register = format!(
                "'leasehold_{}_{name}', function(KEYS, ARGV)\n{BEGIN_CALL}",
                LIBRARY.1
            );
            assert_eq!(lib.matches(&register).count(), 1, "{name}");
        }
        assert!(!lib.contains(DIGEST));
    }

    #[test]
    fn every_shared_name_a_script_uses_is_included() {
        let mut shared = HashSet::new();
        for (name, text) in SOURCES {
            if name.starts_with("lib/") {
                shared.extend(top_level_names(text));
            }
        }
        shared.extend(top_level_names(&moves_lua()));
        for name in SCRIPTS {
            let text = script_source(name).expect("a known script");
            let defined: HashSet<String> = top_level_names(&text).into_iter().collect();
            for used in identifiers(&text) {
                assert!(
                    !shared.contains(&used) || defined.contains(&used),
                    "{name}.lua uses {used} but includes no file defining it"
                );
            }
        }
    }
}
