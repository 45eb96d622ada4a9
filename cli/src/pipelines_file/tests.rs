//! Unit tests of the pipelines file: what it accepts and what it refuses, with the line.

use std::path::Path;

use super::{line_column, parse};

fn error(text: &str) -> String {
    parse(Path::new("p.toml"), text).unwrap_err().to_string()
}

#[test]
fn columns_count_characters_from_one() {
    assert_eq!(line_column("ab\ncdé f", 0), (1, 1));
    assert_eq!(line_column("ab\ncdé f", 3), (2, 1));
    assert_eq!(line_column("ab\ncdé f", 7), (2, 4));
}

#[test]
fn a_good_file_gives_the_spec_a_rust_pipeline_would() {
    let text = r#"
[[pipeline]]
name = "sales"
queue = "etl"
resource = "source:{source}"
input_key = "{source}:{window.start}"
lease_ttl = "30s"
retry = { max_attempts = 4, initial_backoff = "2s" }
flow = { resource_limit = 1, rate = "10/s" }
input_schema = { type = "object", required = ["source"] }

[[pipeline.schedule]]
name = "hourly"
cron = "0 * * * *"
catch_up = "all"
catch_up_max = 48
input = { source = "shop-a" }

[[pipeline.step]]
name = "fetch"
run = ["python3", "fetch.py", "--since", "$(never expanded)"]
timeout = "10m"

[[pipeline.step]]
name = "load"
shell = "./load.sh | tee load.log"
retryable_exit_codes = [75, 1]
"#;
    let pipelines = parse(Path::new("p.toml"), text).unwrap();
    let spec = pipelines[0].spec();
    assert_eq!(spec.name, "sales");
    assert_eq!(spec.queue.as_deref(), Some("etl"));
    assert_eq!(spec.steps, ["fetch", "load"]);
    assert_eq!(spec.max_attempts, 4);
    assert_eq!(spec.resource_template.as_deref(), Some("source:{source}"));
    assert_eq!(
        spec.input_key_template.as_deref(),
        Some("{source}:{window.start}")
    );
    assert!(spec.input_schema.is_some());
    assert_eq!(spec.flow.unwrap().rate.as_deref(), Some("10/s"));
}

#[test]
fn every_error_names_its_line_and_column() {
    let syntax = error("[[pipeline]\nname = ");
    assert!(
        syntax.starts_with("p.toml:1:12: unclosed array table"),
        "{syntax}"
    );
    let missing =
        error("[[pipeline]]\nname = \"a\"\n[[pipeline.step]]\nname = \"s\"\nrun = \"true\"\n");
    assert!(missing.starts_with("p.toml:5:7: "), "{missing}");
    let unknown = error("[[pipeline]]\nname = \"a\"\ncolour = \"red\"\n");
    assert!(unknown.starts_with("p.toml:3:1: "), "{unknown}");
    assert!(unknown.contains("colour"), "{unknown}");
    let no_steps = error("[[pipeline]]\nname = \"a\"\n");
    assert!(
        no_steps.starts_with("p.toml:1:1: ") && no_steps.contains("no steps"),
        "{no_steps}"
    );
    let bad_duration = error("[[pipeline]]\nname = \"a\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\ntimeout = \"ten\"\n");
    assert!(
        bad_duration.starts_with("p.toml:6:11: timeout"),
        "{bad_duration}"
    );
    let both = error("[[pipeline]]\nname = \"a\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\nshell = \"true\"\n");
    assert!(both.starts_with("p.toml:6:9: "), "{both}");
    let template = error("[[pipeline]]\nname = \"a\"\nresource = \"x:{oops\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n");
    assert!(template.starts_with("p.toml:3:12: "), "{template}");
    let cron = error("[[pipeline]]\nname = \"a\"\n[[pipeline.schedule]]\nname = \"h\"\ncron = \"61 * * * *\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n");
    assert!(cron.starts_with("p.toml:5:8: "), "{cron}");
    let named_cleanup = error("[[pipeline]]\nname = \"a\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n[pipeline.cleanup]\nname = \"c\"\nrun = [\"true\"]\n");
    assert!(
        named_cleanup.starts_with("p.toml:7:8: the cleanup command has no name"),
        "{named_cleanup}"
    );
    let twice = error("[[pipeline]]\nname = \"a\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n");
    assert!(twice.starts_with("p.toml:7:8: "), "{twice}");
}

#[test]
fn exit_code_lists_that_contradict_or_overflow_are_refused() {
    let head = "[[pipeline]]\nname = \"a\"\n[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n";
    let in_both = error(&format!(
        "{head}retryable_exit_codes = [65]\npermanent_exit_codes = [65]\n"
    ));
    assert!(
        in_both.starts_with("p.toml:6:24: exit code 65 is in both"),
        "{in_both}"
    );
    let zero = error(&format!("{head}permanent_exit_codes = [0]\n"));
    assert!(
        zero.starts_with("p.toml:6:24: permanent_exit_codes holds 0: "),
        "{zero}"
    );
    let big = error(&format!("{head}retryable_exit_codes = [300]\n"));
    assert!(
        big.starts_with("p.toml:6:24: retryable_exit_codes holds 300: "),
        "{big}"
    );
    // the sysexits and exit 1 may be listed either way
    assert!(parse(
        Path::new("p.toml"),
        &format!("{head}retryable_exit_codes = [65, 1]\npermanent_exit_codes = [2]\n")
    )
    .is_ok());
}
