//! Finding jobs by what they processed: input key, resource and input window,
//! through the queue's search index (`<base>:search`, a sorted set read by
//! lexicographic range, written by `enqueue` and cleaned by retention; see
//! `core/lua/lib/search.lua` and `docs/redis-keys.md`), and by id prefix.
//!
//! Each index criterion is one `ZRANGEBYLEX` (a free-text term is three: it may
//! be a prefix of any of the fields), at most [`SEARCH_CAP`] entries each; the
//! jobs that match every criterion are then read with one `HMGET` each, so the
//! cost is proportional to the matches, not to the jobs kept. An id prefix is
//! not indexed (it would cost every job memory): it is a `SCAN` of the queue's
//! job keys (`MATCH <base>:job:<prefix>*`), whose cost is proportional to the
//! keys in the database (about a second per million keys); a free-text term
//! that looks like the start of an id (6 or more hex digits and dashes) is
//! looked up that way too.

use std::collections::HashSet;
use std::ops::ControlFlow;

use deadpool_redis::redis;
use serde::{Deserialize, Serialize};

use super::{Inspector, JobPage, JobSummary, Page};
use crate::error::{Error, Result};
use crate::pool::{RedisConn, Target};
use crate::round_trip::{escape_glob, scan_pages};
use crate::state::JobState;

/// Most index entries one criterion of a search reads; a criterion that
/// reaches it makes the answer [`JobPage::truncated`].
pub const SEARCH_CAP: usize = 10_000;

/// What [`Inspector::search_jobs`] looks for: every criterion given must match
/// (at least one of the first six must be given).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSearch {
    /// Input keys starting with this.
    pub input_key: Option<String>,
    /// Exactly this resource.
    pub resource: Option<String>,
    /// Input windows (`<start>/<end>`) starting with this, e.g. `2026-05-06`.
    pub window: Option<String>,
    /// Input windows whose start is at or after this (RFC 3339 text, compared as text)…
    pub window_from: Option<String>,
    /// …and before this.
    pub window_to: Option<String>,
    /// Ids starting with this.
    pub id_prefix: Option<String>,
    /// Free-text terms: each must be a prefix of the job's id, input key,
    /// resource or input window.
    #[serde(default)]
    pub terms: Vec<String>,
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs of this pipeline.
    pub pipeline: Option<String>,
}

impl JobSearch {
    /// Whether an index criterion is given (state and pipeline alone are not one).
    pub fn is_empty(&self) -> bool {
        self.input_key.is_none()
            && self.resource.is_none()
            && self.window.is_none()
            && self.window_from.is_none()
            && self.window_to.is_none()
            && self.id_prefix.is_none()
            && self.terms.is_empty()
    }
}

/// A `ZRANGEBYLEX` range: min and max, with their `[`/`(` marks.
type LexRange = (Vec<u8>, Vec<u8>);

/// The members `<tag>\0<prefix>…`.
fn prefix_range(tag: u8, prefix: &str) -> LexRange {
    let mut min = vec![b'[', tag, 0];
    min.extend_from_slice(prefix.as_bytes());
    let mut max = min.clone();
    // 0xFF never occurs in UTF-8: every member with the prefix sorts below it
    max.push(0xFF);
    (min, max)
}

/// The members `<tag>\0<value>\0<id>` (the value exactly).
fn exact_range(tag: u8, value: &str) -> LexRange {
    let mut with_sep = value.to_owned();
    with_sep.push('\0');
    prefix_range(tag, &with_sep)
}

/// The members `<tag>\0<v>…` with `from <= v < to` (either bound open when `None`).
fn between(tag: u8, from: Option<&str>, to: Option<&str>) -> LexRange {
    let mut min = vec![b'[', tag, 0];
    min.extend_from_slice(from.unwrap_or("").as_bytes());
    let max = match to {
        Some(t) => {
            let mut m = vec![b'(', tag, 0];
            m.extend_from_slice(t.as_bytes());
            m
        }
        None => vec![b'[', tag, 0, 0xFF],
    };
    (min, max)
}

/// Whether a free-text term may be the start of a (generated) job id.
fn looks_like_id_start(t: &str) -> bool {
    t.len() >= 6 && t.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// The job id of an index member: the text after its last NUL.
fn member_id(member: &[u8]) -> Option<String> {
    let at = member.iter().rposition(|b| *b == 0)?;
    String::from_utf8(member[at + 1..].to_vec()).ok()
}

impl Inspector {
    /// Ids of the queue's jobs starting with `prefix` (a `SCAN` of the job
    /// keys), at most [`SEARCH_CAP`]: ids, keys read, and whether it stopped at the cap.
    async fn ids_starting(
        &self,
        conn: &mut RedisConn,
        prefix: &str,
    ) -> Result<(Vec<String>, usize, bool)> {
        let head = format!("{}:job:", self.keys().base());
        let pattern = format!("{}{}*", escape_glob(&head), escape_glob(prefix));
        let mut ids = Vec::new();
        let mut read = 0usize;
        let mut truncated = false;
        // On a cluster the master of the queue's slot holds its job keys.
        let target = Target::SlotOf(self.keys().base());
        scan_pages(conn, self.config(), target, &pattern, |keys| {
            read += keys.len();
            ids.extend(keys.iter().filter_map(|k| {
                k.strip_prefix(head.as_bytes())
                    .and_then(|id| String::from_utf8(id.to_vec()).ok())
            }));
            if ids.len() >= SEARCH_CAP {
                ids.truncate(SEARCH_CAP);
                truncated = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        })
        .await?;
        Ok((ids, read, truncated))
    }

    /// The jobs matching `search`, newest change first, paged (see the module
    /// documentation for the cost). `truncated` says a criterion matched more
    /// than [`SEARCH_CAP`] index entries (narrow it); `examined` counts the
    /// entries read.
    pub async fn search_jobs(&self, search: &JobSearch, page: Page) -> Result<JobPage> {
        if search.is_empty() {
            return Err(Error::InvalidArgument(
                "a search needs an input key, resource, window, id prefix or term".into(),
            ));
        }
        // each criterion: index ranges whose members match, and an id prefix
        // looked up by SCAN; a job matches it when any of them finds it
        let mut criteria: Vec<(Vec<LexRange>, Option<&str>)> = Vec::new();
        if let Some(p) = &search.id_prefix {
            criteria.push((Vec::new(), Some(p.as_str())));
        }
        if let Some(k) = &search.input_key {
            criteria.push((vec![prefix_range(b'k', k)], None));
        }
        if let Some(r) = &search.resource {
            criteria.push((vec![exact_range(b'r', r)], None));
        }
        if let Some(w) = &search.window {
            criteria.push((vec![prefix_range(b'w', w)], None));
        }
        if search.window_from.is_some() || search.window_to.is_some() {
            let range = between(
                b'w',
                search.window_from.as_deref(),
                search.window_to.as_deref(),
            );
            criteria.push((vec![range], None));
        }
        for t in &search.terms {
            let ranges = [b'k', b'r', b'w']
                .into_iter()
                .map(|tag| prefix_range(tag, t))
                .collect();
            criteria.push((ranges, looks_like_id_start(t).then_some(t.as_str())));
        }
        let key = self.keys().search();
        let mut conn = self.conn().await?;
        let mut truncated = false;
        let mut examined = 0usize;
        let mut found: Option<HashSet<String>> = None;
        for (ranges, scan) in &criteria {
            let mut ids = HashSet::new();
            if let Some(prefix) = scan {
                let (by_id, read, capped) = self.ids_starting(&mut conn, prefix).await?;
                examined += read;
                truncated |= capped;
                ids.extend(by_id);
            }
            for (min, max) in ranges {
                let members: Vec<Vec<u8>> = self
                    .timed(
                        redis::cmd("ZRANGEBYLEX")
                            .arg(&key)
                            .arg(min.as_slice())
                            .arg(max.as_slice())
                            .arg("LIMIT")
                            .arg(0)
                            .arg(SEARCH_CAP)
                            .query_async(&mut conn),
                    )
                    .await?;
                examined += members.len();
                truncated |= members.len() >= SEARCH_CAP;
                ids.extend(members.iter().filter_map(|m| member_id(m)));
            }
            found = Some(match found {
                None => ids,
                Some(prev) => prev.intersection(&ids).cloned().collect(),
            });
            if found.as_ref().is_some_and(HashSet::is_empty) {
                break;
            }
        }
        let mut ids: Vec<String> = found.unwrap_or_default().into_iter().collect();
        ids.sort();
        let mut bad = Vec::new();
        let mut jobs: Vec<JobSummary> = self
            .summaries(&mut conn, &ids, &mut bad)
            .await?
            .into_iter()
            .filter(|s| search.state.is_none_or(|st| st == s.state))
            .filter(|s| search.pipeline.as_ref().is_none_or(|p| *p == s.pipeline))
            .collect();
        jobs.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| b.id.cmp(&a.id))
        });
        let total = jobs.len();
        let jobs = jobs
            .into_iter()
            .skip(page.offset)
            .take(page.limit)
            .collect();
        Ok(JobPage {
            jobs,
            examined,
            has_more: total > page.offset.saturating_add(page.limit),
            truncated,
            unreadable: bad,
            quarantined: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_bracket_the_members_they_mean() {
        let (min, max) = prefix_range(b'k', "shop:a");
        let m = b"k\0shop:a:2026\0id1".to_vec();
        assert!(min[1..] <= m[..] && m[..] < max[1..]);
        let (min, max) = exact_range(b'r', "shop:a");
        assert!(min[1..] <= b"r\0shop:a\0id"[..] && b"r\0shop:a\0id"[..] < max[1..]);
        assert!(!(b"r\0shop:ab\0id"[..] < max[1..] && min[1..] <= b"r\0shop:ab\0id"[..]));
        assert_eq!(
            member_id(b"w\x002026-05-06T00:00:00Z/\x00abc"),
            Some("abc".into())
        );
        assert!(looks_like_id_start("01a22c15-bb8a") && !looks_like_id_start("shop:a"));
        assert!(!looks_like_id_start("01a2"));
        assert_eq!(escape_glob("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
        let (min, max) = between(b'w', Some("2026-05-06"), Some("2026-05-07"));
        assert_eq!(min[0], b'[');
        assert_eq!(max[0], b'(');
        assert!(JobSearch::default().is_empty());
    }
}
