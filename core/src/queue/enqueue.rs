//! Creating jobs: one or many, idempotent on their input keys.

use crate::error::{Error, Result};
use crate::group::encode_dependencies;
use crate::id::JobId;
use crate::job_spec::NewJob;
use crate::queue::groups::REFUSED;
use crate::queue::{EnqueueStatus, Enqueued, Queue};
use crate::wire::new_job::push_new_job;
use crate::wire::reply::Reply;
use crate::wire::scripts;

impl Queue {
    /// Enqueues one job. Idempotent on its input key.
    pub async fn enqueue(&self, job: NewJob) -> Result<Enqueued> {
        let mut out = self.enqueue_bulk(vec![job]).await?;
        out.pop().ok_or(Error::Protocol {
            script: "enqueue",
            detail: "empty reply".into(),
        })
    }

    /// Enqueues many jobs, one call per pipeline. Replies in the order given.
    pub async fn enqueue_bulk(&self, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        for job in &jobs {
            job.validate()?;
        }
        let mut by_pipeline: Vec<(String, Vec<(usize, NewJob)>)> = Vec::new();
        for (i, job) in jobs.into_iter().enumerate() {
            // one call per pipeline and set of links (group, parents, policy):
            // a call's links are shared by its jobs
            match by_pipeline
                .iter_mut()
                .find(|(p, g)| *p == job.pipeline && g[0].1.same_links(&job))
            {
                Some((_, group)) => group.push((i, job)),
                None => by_pipeline.push((job.pipeline.clone(), vec![(i, job)])),
            }
        }
        let total: usize = by_pipeline.iter().map(|(_, g)| g.len()).sum();
        let mut results: Vec<Option<Enqueued>> = vec![None; total];
        for (pipeline, group) in by_pipeline {
            for chunk in group.chunks(1000) {
                let mut inv = self.invocation(&scripts::ENQUEUE);
                inv.key(self.keys.ready(&pipeline))
                    .key(self.keys.delayed(&pipeline))
                    .key(self.keys.wake(&pipeline));
                inv.arg(self.name()).arg(&pipeline).arg(chunk.len());
                let ids: Vec<JobId> = chunk
                    .iter()
                    .map(|(_, job)| job.id.clone().unwrap_or_default())
                    .collect();
                for ((_, job), id) in chunk.iter().zip(&ids) {
                    inv.key(self.keys.job(id.as_str()));
                    push_new_job(&mut inv, id, job);
                }
                if let Some((_, first)) = chunk.first() {
                    if first.has_links() {
                        inv.arg(first.group.as_deref().unwrap_or(""))
                            .arg(encode_dependencies(&first.depends_on))
                            .arg(first.on_parent_failure.as_str());
                    }
                }
                let mut reply = Reply::new("enqueue", self.invoke(&inv).await?)?;
                // a refusal starts with a marker no job id can be (ids have no braces)
                if reply.peek_text().as_deref() == Some(REFUSED) {
                    let group = chunk.first().and_then(|(_, j)| j.group.as_deref());
                    return Err(self.links_refusal(&mut reply, group.unwrap_or("")));
                }
                for (index, _) in chunk {
                    let id = JobId::parse(&reply.text()?)?;
                    let status = match reply.text()?.as_str() {
                        "created" => EnqueueStatus::Created,
                        "rerun" => EnqueueStatus::Rerun,
                        "existing" => EnqueueStatus::Existing,
                        "succeeded" => EnqueueStatus::Succeeded,
                        other => {
                            return Err(Error::Protocol {
                                script: "enqueue",
                                detail: format!("unknown status {other:?}"),
                            })
                        }
                    };
                    let previous = reply.opt_text()?.map(|p| JobId::parse(&p)).transpose()?;
                    results[*index] = Some(Enqueued {
                        id,
                        created: matches!(status, EnqueueStatus::Created | EnqueueStatus::Rerun),
                        status,
                        previous,
                    });
                }
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.ok_or(Error::Protocol {
                    script: "enqueue",
                    detail: "a job got no reply".into(),
                })
            })
            .collect()
    }
}
