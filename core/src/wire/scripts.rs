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
//! per load instead of once per call. `gen/moves` is not a file: it is the
//! transition table written as Lua (`moves.rs`).
//!
//! The scripts clients call are listed once, in `scripts!` below: each
//! script's static, its file, and its place in the library all come from
//! that one list; each script's argument builder and reply reader is its own
//! file under `ops/`.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::LazyLock;

use deadpool_redis::redis::Script;

use super::moves::moves_lua;

/// The shared files scripts include, by include name (their path under
/// `core/lua/` without `.lua`).
macro_rules! includes {
    ($($name:literal),* $(,)?) => {
        /// The shared Lua files, by include name, and their text.
        const INCLUDES: &[(&str, &str)] =
            &[$(($name, include_str!(concat!("../../lua/", $name, ".lua")))),*];
    };
}

includes![
    "lib/keys",
    "lib/call",
    "lib/time",
    "lib/ready",
    "lib/indexes",
    "lib/events",
    "lib/wake",
    "lib/locks",
    "lib/flow",
    "lib/moves",
    "lib/jobs",
    "lib/attempts",
    "lib/stale",
    "lib/retention",
    "lib/args",
    "lib/new_job",
    "lib/create",
    "lib/schedule",
    "lib/quarantine",
    "lib/groups",
    "lib/cancel",
    "lib/new_attempt",
    "lib/outputs",
    "lib/stats",
    "lib/search",
    "transitions/start",
    "transitions/finish",
    "transitions/release",
    "transitions/lease",
];

/// The one list of the scripts clients call: for each, its static (a
/// `LuaScript`) and its file `core/lua/<name>.lua`. From it come `SCRIPTS`
/// (names and texts: the library, `script_source`, the tests) and `all()`
/// (preloading without functions).
macro_rules! scripts {
    ($($(#[doc = $doc:literal])* $static:ident = $name:literal;)*) => {
        $(
            $(#[doc = $doc])*
            pub(crate) static $static: LazyLock<LuaScript> =
                LazyLock::new(|| LuaScript::new($name));
        )*

        /// The scripts clients call, by name, and their own text.
        const SCRIPTS: &[(&str, &str)] =
            &[$(($name, include_str!(concat!("../../lua/", $name, ".lua")))),*];

        /// Every script, for preloading without functions.
        pub(crate) fn all() -> impl Iterator<Item = &'static LuaScript> {
            [$(&$static),*].into_iter().map(|s| LazyLock::force(s))
        }
    };
}

scripts! {
    /// enqueue.lua: creates jobs of one pipeline.
    ENQUEUE = "enqueue";
    /// renew.lua: renews many leases.
    RENEW = "renew";
    /// cancel.lua: cancels a job, or records the request.
    CANCEL = "cancel";
    /// sweep.lua: recovers expired leases.
    SWEEP = "sweep";
    /// retry.lua: an operator's new attempt.
    RETRY = "retry";
    /// resolve.lua: an operator's decision on a STALE job.
    RESOLVE = "resolve";
    /// delete.lua: deletes a terminal job before retention would.
    DELETE = "delete";
    /// run_now.lua: makes a delayed QUEUED job due now.
    RUN_NOW = "run_now";
    /// purge.lua: deletes terminal jobs beyond retention.
    PURGE = "purge";
    /// claim_cleanup.lua: claims cleanup hooks to run.
    CLAIM_CLEANUP = "claim_cleanup";
    /// settle.lua: every holder operation (start, checkpoint, finish, release)
    /// and every lease, one or many per call.
    SETTLE = "settle";
    /// quarantine_repair.lua: re-validates a quarantined job and requeues it.
    QUARANTINE_REPAIR = "quarantine_repair";
    /// quarantine_purge.lua: deletes a quarantined job and its records.
    QUARANTINE_PURGE = "quarantine_purge";
    /// group_create.lua: creates a group of jobs.
    GROUP_CREATE = "group_create";
    /// group_seal.lua: closes a group to new children.
    GROUP_SEAL = "group_seal";
    /// group_cancel.lua: cancels a group, a batch of its children per call.
    GROUP_CANCEL = "group_cancel";
    /// group_retry.lua: retries the failed children of a group, a batch per call.
    GROUP_RETRY = "group_retry";
    /// pause.lua: pauses or resumes a pipeline or a queue.
    PAUSE = "pause";
    /// limit.lua: takes tokens from a named rate limiter inside a step.
    LIMIT = "limit";
    /// process_log.lua: a process step's record (exit, cut-off, progress, log tails).
    PROCESS_LOG = "process_log";
    /// schedule_register.lua: a worker writes a schedule's definition on start.
    SCHEDULE_REGISTER = "schedule_register";
    /// schedule_tick.lua: claims a schedule's due windows and enqueues their jobs.
    SCHEDULE_TICK = "schedule_tick";
    /// schedule_state.lua: pauses or resumes a schedule.
    SCHEDULE_STATE = "schedule_state";
}

/// Every Lua file: the shared ones, then the scripts.
fn sources() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    INCLUDES.iter().chain(SCRIPTS)
}

/// The include directive, as the first characters of a line.
const INCLUDE: &str = "--- @include \"";

/// The text of the include `name` (`gen/moves` is generated).
fn source(name: &str) -> Option<String> {
    if name == "gen/moves" {
        return Some(moves_lua());
    }
    sources()
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

/// The first statement of every script run (`lib/call`): a call whose fixed
/// keys are not the queue's own ends there with `begin_call`'s error reply.
const BEGIN_CALL: &str =
    "do local forged = begin_call(KEYS, ARGV) if forged then return forged end end\n";

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

/// The names of the scripts clients call (each one's file is `core/lua/<name>.lua`).
pub fn script_names() -> impl Iterator<Item = &'static str> {
    SCRIPTS.iter().map(|(name, _)| *name)
}

/// The full text of the script `name` for `EVAL`, includes resolved; `None`
/// for an unknown name. The script's own text runs as a function of its own
/// (as it does in the library): Lua allows a function 200 locals, and the
/// shared files' helpers, which are the main chunk's locals, take most of
/// them, so the script's own locals are counted apart.
pub fn script_source(name: &str) -> Option<String> {
    if !SCRIPTS.iter().any(|(n, _)| *n == name) {
        return None;
    }
    let mut out = String::new();
    let text = script_parts(name, &mut HashSet::new(), &mut out);
    out.push_str("return (function()\n");
    out.push_str(BEGIN_CALL);
    out.push_str(&text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("end)()\n");
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
    for (name, _) in SCRIPTS {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::JobState;

    #[test]
    fn every_include_resolves_and_every_source_is_used() {
        let mut used = HashSet::new();
        for (name, _) in SCRIPTS {
            let text = script_source(name).expect("a known script");
            assert!(
                !text.contains("missing Lua include"),
                "{name}: {}",
                text.lines()
                    .find(|l| l.contains("missing Lua include"))
                    .unwrap_or_default()
            );
            let mut seen = HashSet::from([(*name).to_owned()]);
            script_parts(name, &mut seen, &mut String::new());
            used.extend(seen);
        }
        for (name, _) in sources() {
            assert!(used.contains(*name), "{name}.lua is included by no script");
        }
    }

    #[test]
    fn no_script_lists_accepted_states_by_hand() {
        // the states an operation accepts come from gen/moves; a set
        // literal of states in a Lua file would be a second table
        for (name, text) in sources() {
            for state in JobState::ALL {
                let literal = format!("{} = true", state.as_str());
                assert!(
                    !text.contains(&literal),
                    "{name}.lua lists {literal}: use may/may_move (lib/moves)"
                );
            }
        }
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
        for (name, text) in sources() {
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
        let files = INCLUDES
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
        for (name, _) in SCRIPTS {
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
        for (name, text) in sources() {
            if name.starts_with("lib/") {
                shared.extend(top_level_names(text));
            }
        }
        shared.extend(top_level_names(&moves_lua()));
        for (name, _) in SCRIPTS {
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
