//! The context the commands and the dashboard share: the Redis connection and
//! queue settings, finding queues and jobs under the prefix, listing jobs
//! across queues, and the Redis URL as messages show it.

use leasehold_core::inspect::JobSearch;
use leasehold_core::{
    discover_queues, discover_reachable_queues, Error, Inspector, JobFilter, JobId, JobPage, Page,
    Queue, QueueConfig, QueueStatus,
};
use serde::Serialize;

use crate::failure::{classify, Failure, Outcome};

/// A cluster master, or a queue on one, that could not be read: what
/// `status` and the dashboard (its queues page and `/api/queues`) say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreachable {
    /// The queue not read; `None` for a master whose queues could not be
    /// listed (no replica of it answered either).
    pub queue: Option<String>,
    /// The master (`host:port`), when a node that answers says which it is.
    pub master: Option<String>,
    /// The line naming it ("queue q: master 127.0.0.1:6712 unreachable:
    /// failover in progress? (...)").
    pub line: String,
}

/// One entry of `status --json` and `/api/queues`: a queue read (its status,
/// `"reachable": true`), or a queue (or a cluster master whose queues could
/// not be listed: `"queue": null`) that could not be read, with the line
/// `status` and the queues page show for it.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum QueueEntry<'a> {
    /// A queue read.
    Read {
        /// Always true.
        reachable: bool,
        /// Its status.
        #[serde(flatten)]
        status: &'a QueueStatus,
    },
    /// A queue or master that did not answer.
    Lost {
        /// The queue; `None` for a master whose queues are not listed.
        queue: Option<&'a str>,
        /// Always false.
        reachable: bool,
        /// The master (`host:port`), when known.
        master: Option<&'a str>,
        /// The line naming it ([`Unreachable::line`]).
        error: &'a str,
    },
}

/// The entries of `status --json` and `/api/queues`: each queue `read`
/// (`"reachable": true`), then each queue or master `lost` (`"reachable":
/// false`).
pub(crate) fn queue_entries<'a>(
    read: &'a [QueueStatus],
    lost: &'a [Unreachable],
) -> Vec<QueueEntry<'a>> {
    read.iter()
        .map(|status| QueueEntry::Read {
            reachable: true,
            status,
        })
        .chain(lost.iter().map(|lost| QueueEntry::Lost {
            queue: lost.queue.as_deref(),
            reachable: false,
            master: lost.master.as_deref(),
            error: &lost.line,
        }))
        .collect()
}

/// Every queue found under the prefix on the masters that answer; with, for
/// a cluster, one entry per master that did not (its queues are not listed).
/// Shared by `status` and the dashboard.
pub(crate) async fn reachable_queues(
    base: &Queue,
    config: &QueueConfig,
) -> Result<(Vec<String>, Vec<Unreachable>), Error> {
    let found = discover_reachable_queues(base.pool(), config).await?;
    // a master whose replica listed its queues is named with each of them
    let lost = found
        .unreachable
        .iter()
        .filter(|lost| lost.listed_from.is_none())
        .map(|lost| {
            let master = format!("{}:{}", lost.master.host, lost.master.port);
            Unreachable {
                queue: None,
                line: format!(
                    "master {master} unreachable: failover in progress? its queues are not listed ({})",
                    lost.error
                ),
                master: Some(master),
            }
        })
        .collect();
    Ok((found.queues, lost))
}

/// Whether `e`, met reading queue data on a Redis Cluster, means the
/// queue's master does not answer (killed or cut off, its replica not
/// promoted yet) rather than a defect: the other queues can still be read.
pub(crate) fn is_master_unreachable(base: &Queue, e: &Error) -> bool {
    if !base.pool().is_cluster() || e.is_auth_failure() {
        return false;
    }
    match e {
        Error::Timeout(_) | Error::Pool(_) => true,
        Error::Redis(re) => {
            e.is_transient()
                || re.kind() == leasehold_core::redis::ErrorKind::ClusterConnectionNotFound
                || matches!(re.code(), Some("MOVED" | "ASK"))
        }
        _ => false,
    }
}

/// Queue `name` as unreachable, with its master when a reachable node says
/// which it is.
pub(crate) async fn unreachable_queue(
    base: &Queue,
    config: &QueueConfig,
    name: &str,
    e: &Error,
) -> Unreachable {
    let key_base = format!("{}:{{{name}}}", config.prefix);
    let master = match base.pool().master_of(&key_base).await {
        Ok(Some(m)) => Some(format!("{}:{}", m.host, m.port)),
        _ => None,
    };
    let line = match &master {
        Some(m) => format!("queue {name}: master {m} unreachable: failover in progress? ({e})"),
        None => format!("queue {name}: its master is unreachable: failover in progress? ({e})"),
    };
    Unreachable {
        queue: Some(name.to_owned()),
        master,
        line,
    }
}
use crate::names;

/// Connection and settings shared by the commands.
pub(crate) struct Ctx {
    /// The URL as given (with credentials), for dedicated connections.
    pub url: String,
    /// The URL for messages (password redacted).
    pub shown_url: String,
    /// A client whose pool every queue client shares.
    pub base: Queue,
    /// Queue settings (prefix, retention, timeouts).
    pub config: QueueConfig,
    /// Print JSON.
    pub json: bool,
    /// Who acts.
    pub by: String,
}

impl Ctx {
    /// `e` as a failure, naming the (redacted) Redis URL.
    pub(crate) fn fail(&self, e: Error) -> Failure {
        classify(&self.shown_url, e)
    }

    /// The client of queue `name` (sharing the pool).
    pub(crate) fn queue(&self, name: &str) -> Outcome<Queue> {
        self.base.sibling(name).map_err(|e| self.fail(e))
    }

    /// The inspector of queue `name`.
    pub(crate) fn inspector(&self, name: &str) -> Outcome<Inspector> {
        Ok(Inspector::new(self.queue(name)?))
    }

    /// Checks that queue `name` exists: an unknown one is an error (exit 3)
    /// naming the known queues ([`unknown_queue`]).
    pub(crate) async fn known_queue(&self, name: &str) -> Outcome<()> {
        match unknown_queue(&self.base, &self.config, name).await {
            Ok(None) => Ok(()),
            Ok(Some(message)) => Err(Failure::UnknownJob(message)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Checks that pipeline `name` exists in one of the queues of
    /// `inspectors`, once a filter on it matched nothing: an unknown one is an
    /// error (exit 3) naming the known pipelines ([`unknown_pipeline`]).
    pub(crate) async fn known_pipeline(&self, inspectors: &[Inspector], name: &str) -> Outcome<()> {
        match unknown_pipeline(inspectors, name).await {
            Ok(None) => Ok(()),
            Ok(Some(message)) => Err(Failure::UnknownJob(message)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The queues named, or every queue found under the prefix. A queue
    /// named that does not exist is an error ([`Ctx::known_queue`]).
    pub(crate) async fn queues(&self, given: &[String]) -> Outcome<Vec<String>> {
        if !given.is_empty() {
            for q in given {
                self.queue(q)?;
                self.known_queue(q).await?;
            }
            return Ok(given.to_vec());
        }
        discover_queues(self.base.pool(), &self.config)
            .await
            .map_err(|e| self.fail(e))
    }

    /// The queues named, or every queue found under the prefix on the
    /// masters that answer; with, for a cluster, one entry per master that
    /// did not (its queues are not listed).
    pub(crate) async fn reachable_queues(
        &self,
        given: &[String],
    ) -> Outcome<(Vec<String>, Vec<Unreachable>)> {
        if !given.is_empty() {
            return Ok((self.queues(given).await?, Vec::new()));
        }
        reachable_queues(&self.base, &self.config)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Whether `e`, met reading queue data on a Redis Cluster, means the
    /// queue's master does not answer (see [`is_master_unreachable`]).
    pub(crate) fn is_master_unreachable(&self, e: &Error) -> bool {
        is_master_unreachable(&self.base, e)
    }

    /// Queue `name` as unreachable (see [`unreachable_queue`]).
    pub(crate) async fn unreachable_queue(&self, name: &str, e: &Error) -> Unreachable {
        unreachable_queue(&self.base, &self.config, name, e).await
    }

    /// The queue of `job`: the one given, or the only known queue holding it.
    pub(crate) async fn locate(&self, job: &JobId, given: Option<&str>) -> Outcome<Queue> {
        if let Some(q) = given {
            let queue = self.queue(q)?;
            self.known_queue(q).await?;
            return match self.holds(&queue, job).await? {
                true => Ok(queue),
                false => Err(Failure::UnknownJob(format!(
                    "job {job} not found in queue {q}"
                ))),
            };
        }
        let queues = self.queues(&[]).await?;
        let mut found = Vec::new();
        for q in &queues {
            let queue = self.queue(q)?;
            if self.holds(&queue, job).await? {
                found.push(queue);
            }
        }
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(Failure::UnknownJob(format!(
                "job {job} not found in any queue under prefix {:?} (looked in: {}); it may have been purged by retention, or give --queue",
                self.config.prefix,
                if queues.is_empty() { "no queues found".to_owned() } else { queues.join(", ") }
            ))),
            _ => Err(Failure::Usage(format!(
                "job {job} exists in several queues ({}): give --queue",
                found.iter().map(Queue::name).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

impl Ctx {
    /// Whether `queue` holds `job`: its record exists, or it is quarantined
    /// (its record may then be unreadable: that is not an error here).
    async fn holds(&self, queue: &Queue, job: &JobId) -> Outcome<bool> {
        let quarantined = queue
            .quarantine_entry(job.as_str())
            .await
            .map_err(|e| self.fail(e))?
            .is_some();
        match queue.job(job).await {
            Ok(found) => Ok(found.is_some() || quarantined),
            Err(_) if quarantined => Ok(true),
            // the key is there but cannot be read as a job: `show` says why
            Err(Error::Corrupt { .. }) => Ok(true),
            Err(e) => Err(self.fail(e)),
        }
    }
}

/// Why queue `name` is unknown (`no queue "X" under key prefix "P"; did you
/// mean "Y"? known queues: ...`), or `None` when it exists: a job, a worker or
/// a published pipeline made it ([`Inspector::exists`]; the known ones are
/// found by `SCAN` only when it does not).
pub(crate) async fn unknown_queue(
    base: &Queue,
    config: &QueueConfig,
    name: &str,
) -> Result<Option<String>, Error> {
    match Inspector::new(base.sibling(name)?).exists().await {
        Ok(true) => return Ok(None),
        Ok(false) => {}
        // its master cannot be asked (down, a failover): whether the name is
        // known cannot be told, and the command itself reports what is unreachable
        Err(_) => return Ok(None),
    }
    let known = discover_queues(base.pool(), config).await?;
    if known.iter().any(|k| k == name) {
        return Ok(None);
    }
    Ok(Some(names::unknown(
        "queue",
        name,
        &format!("under key prefix {:?}", config.prefix),
        &known,
    )))
}

/// Why pipeline `name` is unknown in the queues of `inspectors`, or `None`
/// when it exists there: a worker published it, or a job of it waits or is
/// kept. Asked when a filter on it matched nothing, so that a typo is an
/// error rather than an empty answer.
pub(crate) async fn unknown_pipeline(
    inspectors: &[Inspector],
    name: &str,
) -> Result<Option<String>, Error> {
    let mut known = std::collections::BTreeSet::new();
    for inspector in inspectors {
        known.extend(inspector.known_pipelines().await?);
    }
    if known.contains(name) {
        return Ok(None);
    }
    let any = JobFilter {
        pipeline: Some(name.to_owned()),
        ..Default::default()
    };
    let one = Page {
        offset: 0,
        limit: 1,
    };
    for inspector in inspectors {
        if !inspector.list_jobs(&any, one).await?.jobs.is_empty() {
            return Ok(None);
        }
    }
    let queues: Vec<&str> = inspectors.iter().map(|i| i.queue().name()).collect();
    let known: Vec<String> = known.into_iter().collect();
    Ok(Some(names::unknown(
        "pipeline",
        name,
        &format!(
            "in queue{} {}",
            if queues.len() == 1 { "" } else { "s" },
            queues.join(", ")
        ),
        &known,
    )))
}

/// One page of the jobs matching `filter` in the queues of `inspectors`, newest
/// change first. With several queues, each queue's first `offset + limit`
/// matches are read and merged.
pub(crate) async fn list_jobs_across(
    inspectors: &[Inspector],
    filter: &JobFilter,
    page: Page,
) -> Result<JobPage, Error> {
    if let [only] = inspectors {
        return only.list_jobs(filter, page).await;
    }
    let need = widened(page);
    let mut pages = Vec::with_capacity(inspectors.len());
    for inspector in inspectors {
        pages.push(inspector.list_jobs(filter, need).await?);
    }
    Ok(merge_pages(pages, page))
}

/// [`Inspector::search_jobs`] over several queues, merged as [`list_jobs_across`] does.
pub(crate) async fn search_jobs_across(
    inspectors: &[Inspector],
    search: &JobSearch,
    page: Page,
) -> Result<JobPage, Error> {
    if let [only] = inspectors {
        return only.search_jobs(search, page).await;
    }
    let need = widened(page);
    let mut pages = Vec::with_capacity(inspectors.len());
    for inspector in inspectors {
        pages.push(inspector.search_jobs(search, need).await?);
    }
    Ok(merge_pages(pages, page))
}

/// The first `offset + limit` matches of each queue: enough to cut `page` from the merge.
fn widened(page: Page) -> Page {
    Page {
        offset: 0,
        limit: page.offset.saturating_add(page.limit),
    }
}

/// Pages of several queues (each read with [`widened`]) as one `page`, newest change first.
fn merge_pages(pages: Vec<JobPage>, page: Page) -> JobPage {
    let need = widened(page);
    let mut merged = JobPage {
        jobs: Vec::new(),
        examined: 0,
        has_more: false,
        truncated: false,
        unreadable: Vec::new(),
        quarantined: 0,
    };
    for p in pages {
        merged.jobs.extend(p.jobs);
        merged.examined += p.examined;
        merged.has_more |= p.has_more;
        merged.truncated |= p.truncated;
        merged.unreadable.extend(p.unreadable);
        merged.quarantined += p.quarantined;
    }
    merged.jobs.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| b.id.cmp(&a.id))
    });
    merged.has_more |= merged.jobs.len() > need.limit;
    merged.jobs = merged
        .jobs
        .into_iter()
        .skip(page.offset)
        .take(page.limit)
        .collect();
    merged
}

/// `url` with any password replaced by `****`, for messages.
pub(crate) fn redact(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                let pw_start = rest_start + colon + 1;
                out.replace_range(pw_start..rest_start + at, "****");
            }
        }
    }
    // redis+unix:///path?pass=secret
    for key in ["pass=", "password="] {
        if let Some(i) = out.find(key) {
            let start = i + key.len();
            let end = out[start..]
                .find(['&', '#'])
                .map_or(out.len(), |j| start + j);
            out.replace_range(start..end, "****");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("rediss://alice:s3cret@db:6380/0"),
            "rediss://alice:****@db:6380/0"
        );
        assert_eq!(redact("redis://:pw@h"), "redis://:****@h");
        assert_eq!(redact("redis://h:6379"), "redis://h:6379");
        assert_eq!(
            redact("redis+cluster://app:pw@h1:7000,h2:7000/"),
            "redis+cluster://app:****@h1:7000,h2:7000/"
        );
        assert_eq!(
            redact("redis+unix:///tmp/r.sock?db=1&pass=x"),
            "redis+unix:///tmp/r.sock?db=1&pass=****"
        );
    }
}
