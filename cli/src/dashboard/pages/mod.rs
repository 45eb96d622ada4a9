//! The HTML pages, one module per page. Parts marked `data-live` are
//! refreshed in place by `/static/app.js` every 2 s.

mod events;
mod job;
mod jobs;
mod locks;
mod queues;
mod schedules;
mod workers;

use leasehold_core::Millis;
use maud::Markup;

use super::data::Res;
use super::error::PageError;
use super::html::{layout, Nav};
use super::App;

pub(super) use events::events;
pub(super) use job::{find, job};
pub(super) use jobs::{jobs, jobs_table};
pub(super) use locks::locks;
pub(super) use queues::overview;
pub(super) use schedules::{schedules, schedules_api};
pub(super) use workers::workers;

/// A page handler's answer: the page, or an error page.
type Page = Result<Markup, PageError>;

impl App {
    /// The footer line: Redis, key prefix, version.
    fn footer(&self) -> String {
        format!(
            "Redis {} · key prefix {} · leasehold {}",
            self.shown_url,
            self.config.prefix,
            env!("CARGO_PKG_VERSION")
        )
    }

    /// The whole page around `body`, with the action mode shown.
    pub(super) fn page(&self, title: &str, nav: Nav, body: Markup) -> Markup {
        layout(title, nav, Some(self.token.is_some()), &self.footer(), body)
    }

    /// Redis `TIME` (ms).
    pub(super) async fn now(&self) -> Res<Millis> {
        leasehold_core::Inspector::new(self.base.clone())
            .now()
            .await
            .map_err(|e| self.fail(e))
    }
}
