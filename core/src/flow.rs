//! Flow control a pipeline declares (`#[pipeline(resource_limit = 3,
//! max_running = 2, rate = "10/s", limiter = "shop-api:{shop}")]`), what it
//! makes of a job at enqueue (the job's `flow` field: the gates its lease must
//! pass), and pausing. Enforced by the lease script (`core/lua/lib/flow.lua`);
//! see `docs/design.md`, "Flow control".
//!
//! A pipeline that declares none of it writes no `flow` field and pays nothing.
//!
//! ```
//! use leasehold_core::flow::{FlowSpec, Rate};
//!
//! let rate: Rate = "10/s".parse().unwrap();
//! assert_eq!(rate.period_ms(), 100);
//! let spec = FlowSpec {
//!     resource_limit: Some(3),
//!     max_running: None,
//!     rate: Some("10/s".into()),
//!     limiter_template: None,
//! };
//! let (resource, flow) = spec.gates("loads", Some("warehouse-a"), None).unwrap();
//! // a resource limit above 1 is counted in slots, not taken as the lock
//! assert_eq!(resource, None);
//! assert_eq!(flow.as_deref(), Some("slots:3:warehouse-a rate:100:warehouse-a"));
//! ```

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::name::check_name;

/// The flow-control options of `#[pipeline(...)]` (all off by default),
/// built with the `const` setters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowOptions {
    /// At most this many jobs hold the job's resource at once, across all
    /// replicas (1, or unset: the resource's lock).
    pub resource_limit: Option<u32>,
    /// At most this many jobs of the pipeline leased or running at once.
    pub max_running: Option<u32>,
    /// A start rate, `"<n>/s"`, `"<n>/m"` or `"<n>/h"`: per resource, per named
    /// limiter (`limiter`), or per pipeline when it has neither.
    pub rate: Option<&'static str>,
    /// The template of a named rate limiter shared by pipelines (`"shop-api:{shop}"`).
    pub limiter: Option<&'static str>,
}

impl FlowOptions {
    /// No flow control.
    #[must_use]
    pub const fn new() -> Self {
        FlowOptions {
            resource_limit: None,
            max_running: None,
            rate: None,
            limiter: None,
        }
    }

    /// Sets how many jobs may hold one resource at once.
    #[must_use]
    pub const fn resource_limit(mut self, n: u32) -> Self {
        self.resource_limit = Some(n);
        self
    }

    /// Sets how many jobs of the pipeline may be leased or running at once.
    #[must_use]
    pub const fn max_running(mut self, n: u32) -> Self {
        self.max_running = Some(n);
        self
    }

    /// Sets the start rate (`"<n>/s"`, `"<n>/m"`, `"<n>/h"`).
    #[must_use]
    pub const fn rate(mut self, rate: &'static str) -> Self {
        self.rate = Some(rate);
        self
    }

    /// Sets the template of the named rate limiter.
    #[must_use]
    pub const fn limiter(mut self, template: &'static str) -> Self {
        self.limiter = Some(template);
        self
    }
}

/// The flow control of a pipeline as published in its spec (what the CLI's
/// and the HTTP enqueue apply too).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSpec {
    /// See [`FlowOptions::resource_limit`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_limit: Option<u32>,
    /// See [`FlowOptions::max_running`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running: Option<u32>,
    /// See [`FlowOptions::rate`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    /// See [`FlowOptions::limiter`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limiter_template: Option<String>,
}

impl FlowSpec {
    /// The spec of `options`; `None` when they declare nothing.
    pub fn of(options: &FlowOptions) -> Option<FlowSpec> {
        let spec = FlowSpec {
            resource_limit: options.resource_limit,
            max_running: options.max_running,
            rate: options.rate.map(str::to_owned),
            limiter_template: options.limiter.map(str::to_owned),
        };
        (spec != FlowSpec::default()).then_some(spec)
    }

    /// The job's resource field and flow field for a job of `pipeline` with
    /// `resource` and the rendered limiter key `limiter`: a resource under a
    /// limit above 1 is counted in its slots (the field is then empty, so the
    /// lock is not taken); `None` for the flow field when no gate applies.
    pub fn gates(
        &self,
        pipeline: &str,
        resource: Option<&str>,
        limiter: Option<&str>,
    ) -> Result<(Option<String>, Option<String>), Error> {
        let mut gates = Vec::new();
        let mut resource_field = resource.map(str::to_owned);
        if let (Some(n), Some(res)) = (self.resource_limit, resource) {
            if n == 0 {
                return Err(Error::InvalidArgument(
                    "resource_limit must be at least 1".into(),
                ));
            }
            if n > 1 {
                gates.push(format!("slots:{n}:{res}"));
                resource_field = None;
            }
        }
        if let Some(m) = self.max_running {
            if m == 0 {
                return Err(Error::InvalidArgument(
                    "max_running must be at least 1".into(),
                ));
            }
            gates.push(format!("running:{m}:{pipeline}"));
        }
        if let Some(rate) = &self.rate {
            let rate: Rate = rate
                .parse()
                .map_err(|e: RateError| Error::InvalidArgument(e.to_string()))?;
            let name = limiter.or(resource).unwrap_or(pipeline);
            check_name("rate limiter", name)?;
            gates.push(format!("rate:{}:{name}", rate.period_ms()));
        }
        let flow = (!gates.is_empty()).then(|| gates.join(" "));
        Ok((resource_field, flow))
    }
}

/// A start rate, `"10/s"`: parsed by `leasehold_syntax::rate`, the grammar
/// the `#[pipeline]` macro checks at compile time.
pub use leasehold_syntax::rate::{Rate, RateError};

/// What a pause applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "scope", content = "name")]
pub enum PauseScope {
    /// One pipeline of the queue.
    Pipeline(String),
    /// Every pipeline of the queue.
    Queue,
}

/// A pause in force, as recorded in the queue's `paused` hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// What is paused.
    pub scope: PauseScope,
    /// Since when (ms, Redis time).
    pub since: i64,
    /// Who paused it.
    pub by: String,
    /// Why.
    pub reason: String,
}

/// Why a QUEUED job of a flow-controlled pipeline is waiting, in words, from
/// the job's `waiting` field as the lease recorded it (`<gate kind> <name>
/// <details>`: `slots warehouse-a 3/3`, `running loads 2/2`, `rate
/// shop-api:acme until <ms>`); `now` (ms) turns a time into "in N ms".
pub fn describe_wait(waiting: &str, now: Option<i64>) -> String {
    let mut words = waiting.splitn(3, ' ');
    let (kind, name, rest) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    match kind {
        "slots" => format!("resource {name} at its limit ({rest} held)"),
        "running" => format!("pipeline {name} at max_running ({rest} running)"),
        "rate" => {
            let at = rest
                .strip_prefix("until ")
                .and_then(|ms| ms.parse::<i64>().ok());
            match (at, now) {
                (Some(at), Some(now)) if at > now => {
                    format!("rate limited by {name} until {at} (in {} ms)", at - now)
                }
                (Some(at), _) => format!("rate limited by {name} until {at} (due)"),
                _ => format!("rate limited by {name} {rest}"),
            }
        }
        _ => waiting.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_encode_what_applies() {
        let plain = FlowSpec::default();
        assert_eq!(
            plain.gates("p", Some("r"), None).unwrap(),
            (Some("r".into()), None)
        );
        let one = FlowSpec {
            resource_limit: Some(1),
            ..FlowSpec::default()
        };
        assert_eq!(
            one.gates("p", Some("r"), None).unwrap(),
            (Some("r".into()), None),
            "a limit of 1 is the lock"
        );
        let all = FlowSpec {
            resource_limit: Some(3),
            max_running: Some(2),
            rate: Some("10/s".into()),
            limiter_template: Some("api:{shop}".into()),
        };
        assert_eq!(
            all.gates("p", Some("r"), Some("api:acme")).unwrap(),
            (None, Some("slots:3:r running:2:p rate:100:api:acme".into()))
        );
    }
}
