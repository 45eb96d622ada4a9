//! The examples every command's `--help` ends with, by command path
//! (`"group show"`), and the command definition with them attached: the one
//! that parses the command line and that completions and man pages are
//! generated from. A unit test checks that every command has one.

use clap::CommandFactory as _;

/// `(command path, example lines)`.
const EXAMPLES: &[(&str, &str)] = &[
    ("", "leasehold status\n  leasehold --redis-url redis://redis.internal:6379 jobs --state FAILED\n  leasehold show 01J0Z3... --json | jq .job.state"),
    ("status", "leasehold status\n  leasehold status --queue orders --json"),
    ("jobs", "leasehold jobs --state FAILED --pipeline orders_sync\n  leasehold jobs --resource shop:a --limit 20 --offset 20"),
    ("show", "leasehold show 01J0Z3KQ9W4XH8Y5T2M6N7P8R0\n  leasehold show 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 --queue orders --json"),
    ("cancel", "leasehold cancel 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 --reason \"wrong window\""),
    ("pause", "leasehold pause orders --reason \"shop API maintenance\"\n  leasehold pause orders --pipeline orders_sync --reason \"bad deploy\""),
    ("resume", "leasehold resume orders\n  leasehold resume orders --pipeline orders_sync --reason \"fixed\""),
    ("retry", "leasehold retry 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 --reason \"sink back\"\n  leasehold retry 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 --from-start"),
    ("resolve", "leasehold resolve 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 --as failed --reason \"partial write checked, rerun\""),
    ("delete", "leasehold delete 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 --reason \"test job, not real data\""),
    ("run-now", "leasehold run-now 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 --reason \"the source is ready early\""),
    ("enqueue", "leasehold enqueue orders_sync --input '{\"shop\":\"a\",\"day\":\"2026-05-06\"}'\n  leasehold enqueue orders_sync --input-template '{\"shop\":\"a\",\"from\":\"{from}\",\"to\":\"{to}\"}' \\\n      --from 2026-05-01 --to 2026-06-01 --step 1d --group may-backfill"),
    ("backfill", "leasehold backfill hourly_fetch --from 2026-05-01 --to 2026-05-08\n  leasehold backfill hourly_fetch --schedule load --from 2026-05-06T00:00:00Z --to 2026-05-06T12:00:00Z --rerun"),
    ("locks", "leasehold locks\n  leasehold locks --queue orders --json"),
    ("workers", "leasehold workers --queue orders"),
    ("events", "leasehold events --queue orders --limit 20\n  leasehold events --job 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 --follow"),
    ("sweep", "leasehold sweep --dry-run\n  leasehold sweep --queue orders"),
    ("dashboard", "leasehold dashboard --bind 127.0.0.1:8080\n  LEASEHOLD_DASHBOARD_TOKEN=$(cat token) leasehold dashboard --bind 0.0.0.0:8080"),
    ("worker", "leasehold worker --pipelines pipelines.toml --check\n  RUST_LOG=info leasehold worker --pipelines pipelines.toml --concurrency 4"),
    ("quarantine", "leasehold quarantine list\n  leasehold quarantine repair 01J0Z3KQ9W4XH8Y5T2M6N7P8R0"),
    ("quarantine list", "leasehold quarantine list --queue orders"),
    ("quarantine repair", "leasehold quarantine repair 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 --queue orders"),
    ("quarantine purge", "leasehold quarantine purge 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 --queue orders"),
    ("groups", "leasehold groups --queue orders"),
    ("group", "leasehold group show may-backfill --watch\n  leasehold group retry may-backfill"),
    ("group show", "leasehold group show may-backfill\n  leasehold group show may-backfill --watch"),
    ("group create", "leasehold group create nightly --queue orders --completion report --completion-input '{\"day\":\"2026-05-06\"}'"),
    ("group seal", "leasehold group seal nightly"),
    ("group cancel", "leasehold group cancel nightly --reason \"superseded\""),
    ("group retry", "leasehold group retry nightly --reason \"sink back\""),
    ("schedules", "leasehold schedules\n  leasehold schedules ticks hourly-sales --limit 10"),
    ("schedules list", "leasehold schedules list --queue orders"),
    ("schedules ticks", "leasehold schedules ticks hourly-sales --limit 10"),
    ("schedules pause", "leasehold schedules pause hourly-sales --reason \"source down\""),
    ("schedules resume", "leasehold schedules resume hourly-sales"),
    ("schedules trigger", "leasehold schedules trigger hourly-sales\n  leasehold schedules trigger hourly-sales --window 2026-05-06T13:00:00Z --rerun"),
    ("bulk", "leasehold bulk retry --queue orders --pipeline orders_sync --dry-run\n  leasehold bulk cancel --queue orders --pipeline orders_sync --reason \"superseded\""),
    ("bulk retry", "leasehold bulk retry --queue orders --pipeline orders_sync --error-kind timeout --dry-run\n  leasehold bulk retry --queue orders --since 2026-05-06T00:00:00Z --reason \"sink back\""),
    ("bulk cancel", "leasehold bulk cancel --queue orders --from 2026-05-01 --to 2026-05-08 --reason \"wrong range\" --dry-run\n  leasehold bulk cancel --queue orders --pipeline orders_sync --reason \"superseded\""),
    ("bulk resolve", "leasehold bulk resolve --queue orders --as failed --reason \"partial writes checked\" --dry-run\n  leasehold bulk resolve 01J0Z3KQ9W4XH8Y5T2M6N7P8R0 01J0Z3KQ9W4XH8Y5T2M6N7P8R1 --queue orders --as succeeded --reason \"loaded, verified\""),
    ("bulk delete", "leasehold bulk delete --queue orders --state cancelled --until 2026-05-01 --dry-run\n  leasehold bulk delete --queue orders --state failed --pipeline orders_sync --reason \"test runs\""),
    ("purge", "leasehold purge --keep-count 100000 --keep-age 30d\n  leasehold purge --queue orders --batch 50000"),
    ("completions", "leasehold completions bash > ~/.local/share/bash-completion/completions/leasehold\n  leasehold completions zsh > ~/.zfunc/_leasehold\n  leasehold completions fish > ~/.config/fish/completions/leasehold.fish"),
    ("man", "leasehold man > leasehold.1 && man ./leasehold.1\n  leasehold man --dir /usr/local/share/man/man1"),
];

/// The example lines of the command at `path` (`""` for `leasehold` itself).
pub(crate) fn example(path: &str) -> Option<&'static str> {
    EXAMPLES.iter().find(|(p, _)| *p == path).map(|(_, e)| *e)
}

/// The command line's definition, every command with its examples.
pub(crate) fn command() -> clap::Command {
    with_examples(crate::grammar::Cli::command(), "")
}

fn with_examples(cmd: clap::Command, path: &str) -> clap::Command {
    let cmd = match example(path) {
        Some(lines) => cmd.after_help(format!("Examples:\n  {lines}")),
        None => cmd,
    };
    cmd.mut_subcommands(|sub| {
        let sub_path = if path.is_empty() {
            sub.get_name().to_owned()
        } else {
            format!("{path} {}", sub.get_name())
        };
        with_examples(sub, &sub_path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command path below `cmd` (`help` is clap's own).
    fn paths(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        out.push(path.to_owned());
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let p = if path.is_empty() {
                sub.get_name().to_owned()
            } else {
                format!("{path} {}", sub.get_name())
            };
            paths(sub, &p, out);
        }
    }

    #[test]
    fn every_command_has_an_example_and_every_example_a_command() {
        let cmd = command();
        let mut all = Vec::new();
        paths(&cmd, "", &mut all);
        let missing: Vec<&String> = all.iter().filter(|p| example(p).is_none()).collect();
        assert!(
            missing.is_empty(),
            "commands without an example: {missing:?}"
        );
        let stale: Vec<&str> = EXAMPLES
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| !all.iter().any(|a| a == p))
            .collect();
        assert!(stale.is_empty(), "examples of no command: {stale:?}");
    }

    /// The words of one example command as a shell reads them (quotes
    /// removed), from `leasehold` to the first redirection, pipe or `&&`.
    fn words(line: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word = String::new();
        let mut quote = None;
        let mut started = false;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    started = true;
                }
                (None, ' ') => {
                    if started || !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                    started = false;
                }
                (None, c) => word.push(c),
            }
        }
        if started || !word.is_empty() {
            words.push(word);
        }
        let from = words.iter().position(|w| w == "leasehold").unwrap_or(0);
        words
            .into_iter()
            .skip(from)
            .take_while(|w| !matches!(w.as_str(), ">" | "|" | "&&"))
            .collect()
    }

    #[test]
    fn every_example_parses() {
        for (path, lines) in EXAMPLES {
            let joined = lines.replace("\\\n", " ");
            for line in joined.lines() {
                let argv = words(line.trim());
                assert_eq!(
                    argv.first().map(String::as_str),
                    Some("leasehold"),
                    "{path}: {line}"
                );
                if let Err(e) = command().try_get_matches_from(&argv) {
                    panic!("example of `{path}` does not parse: {line}\n{e}");
                }
            }
        }
    }
}
