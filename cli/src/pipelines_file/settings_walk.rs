//! The pipelines file's and the command line's side of the settings walk:
//! every value of `leasehold_syntax::setting::EXAMPLES`, written where it
//! belongs in a pipelines file (and, for the settings that have a flag, on
//! the command line), is accepted or refused with exactly the words the
//! `#[pipeline]` macro uses (its side: `macros/src/settings_walk.rs`).

use std::path::Path;

use clap::Parser;
use leasehold_syntax::setting::{Example, Place, EXAMPLES};

use super::parse;
use crate::grammar::Cli;

/// A pipelines file that carries `e`.
fn file(e: &Example) -> String {
    let mut here: Vec<String> = e.with.iter().map(|w| (*w).to_owned()).collect();
    here.push(format!("{} = {}", e.key, e.value));
    let step = "[[pipeline.step]]\nname = \"s\"\nrun = [\"true\"]\n";
    let head = "[[pipeline]]\nname = \"p\"\n";
    match e.place {
        Place::Pipeline => format!("{head}{}\n{step}", here.join("\n")),
        Place::Retry => format!("{head}retry = {{ {} }}\n{step}", here.join(", ")),
        Place::Flow => format!("{head}flow = {{ {} }}\n{step}", here.join(", ")),
        Place::Step => format!("{head}{step}{}\n", here.join("\n")),
        // every schedule has a cadence: `every = "1h"` unless that is the setting
        Place::Schedule => format!(
            "{head}[[pipeline.schedule]]\nname = \"h\"\n{}{}\n{step}",
            if e.key == "every" {
                ""
            } else {
                "every = \"1h\"\n"
            },
            here.join("\n")
        ),
    }
}

/// What the file's check says of `e`: its messages, in order.
fn said(e: &Example) -> Vec<String> {
    match parse(Path::new("p.toml"), &file(e)) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.0.into_iter().map(|e| e.message).collect(),
    }
}

#[test]
fn settings_walk_the_file_accepts_and_refuses_like_the_macro() {
    assert!(EXAMPLES.len() > 20);
    for e in EXAMPLES {
        let want: Vec<String> = e.refused.map(str::to_owned).into_iter().collect();
        assert_eq!(said(e), want, "{e:?} as:\n{}", file(e));
    }
}

#[test]
fn settings_walk_the_command_line_accepts_and_refuses_like_the_file() {
    let mut walked = 0;
    for e in EXAMPLES.iter().filter(|e| e.key == "lease_ttl") {
        let value = e.value.trim_matches('"');
        let args = [
            "leasehold",
            "worker",
            "--pipelines",
            "p.toml",
            "--lease-ttl",
            value,
        ];
        match (Cli::try_parse_from(args), e.refused) {
            (Ok(_), None) => {}
            (Err(error), Some(words)) => {
                let shown = error.to_string();
                assert!(
                    shown.contains(&format!("'--lease-ttl <LEASE_TTL>': {words}\n")),
                    "--lease-ttl {value}: {shown}"
                );
            }
            (Ok(_), Some(words)) => panic!("--lease-ttl {value} is accepted; want {words:?}"),
            (Err(error), None) => panic!("--lease-ttl {value} is refused: {error}"),
        }
        walked += 1;
    }
    assert!(walked >= 4, "lease_ttl has examples on both sides");
}
