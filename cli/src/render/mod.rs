//! Human output: tables and reports, one module per view. (`--json` prints
//! the core types instead.)

mod events;
mod jobs;
mod process;
mod quarantine;
mod resources;
mod show;
mod status;

pub(crate) use events::{event_line, events};
pub(crate) use jobs::jobs;
pub(crate) use process::{ending as process_ending, process_steps};
pub(crate) use quarantine::{quarantine, quarantine_section, raw_job, unreadable};
pub(crate) use resources::{locks, workers};
pub(crate) use show::show;
pub(crate) use status::status;
