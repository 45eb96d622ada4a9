//! `completions` and `man`: generated from the command line's definition
//! (`crate::examples::command`, the one that parses), so they list every
//! command and option as they are. Neither reads Redis.

use std::path::Path;

use crate::failure::{Failure, Outcome};

/// `completions <shell>`: the completion script on stdout.
pub(crate) fn completions(shell: clap_complete::Shell) -> Outcome {
    let mut cmd = crate::examples::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "leasehold", &mut script);
    super::out(&String::from_utf8_lossy(&script))
}

/// `man`: the page of `leasehold` on stdout, or (with `dir`) one page per
/// command written into `dir`.
pub(crate) fn man(dir: Option<&Path>) -> Outcome {
    let cmd = crate::examples::command();
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)
            .and_then(|()| clap_mangen::generate_to(cmd, dir))
            .map_err(|e| {
                Failure::Other(format!(
                    "cannot write man pages into {}: {e}",
                    dir.display()
                ))
            })?;
        eprintln!("man pages written into {}", dir.display());
        return Ok(());
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut page)
        .map_err(|e| Failure::Other(format!("cannot render the man page: {e}")))?;
    super::out(&String::from_utf8_lossy(&page))
}
