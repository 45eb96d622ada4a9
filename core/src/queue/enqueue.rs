//! Creating jobs: one or many, idempotent on their input keys.

use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job_spec::NewJob;
use crate::queue::{Enqueued, Queue};
use crate::wire::ops::enqueue::Enqueue;

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
                let jobs: Vec<&NewJob> = chunk.iter().map(|(_, job)| job).collect();
                let ids: Vec<JobId> = chunk
                    .iter()
                    .map(|(_, job)| job.id.clone().unwrap_or_default())
                    .collect();
                let replies = self
                    .run(&Enqueue {
                        pipeline: &pipeline,
                        jobs: &jobs,
                        ids: &ids,
                    })
                    .await?;
                for ((index, _), enqueued) in chunk.iter().zip(replies) {
                    results[*index] = Some(enqueued);
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
