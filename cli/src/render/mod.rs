//! Human output: tables and reports, one module per view. (`--json` prints
//! the core types instead.)

mod events;
mod jobs;
mod resources;
mod show;
mod status;

pub use events::{event_line, events};
pub use jobs::jobs;
pub use resources::{locks, workers};
pub use show::show;
pub use status::status;
