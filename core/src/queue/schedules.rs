//! Schedules in Redis: a worker's registration of a schedule, the tick claim
//! (`schedule_tick.lua`: due windows claimed on Redis time and their jobs
//! enqueued in one call), pause and resume, and the reads `schedules` shows.

use std::collections::HashMap;

use deadpool_redis::redis::{self, AsyncCommands};
use serde::Serialize;

use crate::contract::{Contract, EnqueueOptions};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job_spec::NewJob;
use crate::queue::Queue;
use crate::schedule::{DueWindows, Schedule, ScheduleDefinition, Window};
use crate::state::JobState;
pub(crate) use crate::wire::ops::schedule_register::Registered;
use crate::wire::ops::schedule_register::ScheduleRegister;
use crate::wire::ops::schedule_state::{ScheduleAction, ScheduleState};
use crate::wire::ops::schedule_tick::ScheduleTick;

pub use crate::answers::{TickReply, TickedWindow};

/// One entry of a schedule's ticks stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TickEntry {
    /// When (ms, from the stream entry id).
    pub at: i64,
    /// The outcome or action (`enqueued`, `caught_up`, `skipped`, `missed`,
    /// `delayed`, `triggered`, `paused`, `resumed`, `registered`, `redefined`, `restarted`,
    /// `failing`, `recovered`).
    pub outcome: String,
    /// The window's start and end (ms), for a tick.
    pub window: Option<(i64, i64)>,
    /// The window's job.
    pub job: Option<String>,
    /// How late the claim was after the window's due time (ms).
    pub lag_ms: Option<i64>,
    /// The worker or operator.
    pub by: String,
    /// Why.
    pub reason: String,
}

/// A schedule as `leasehold schedules` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleInfo {
    /// The schedule's name.
    pub name: String,
    /// The pipeline it enqueues.
    pub pipeline: String,
    /// Its registered definition (`None` when unreadable: see `problem`).
    pub definition: Option<ScheduleDefinition>,
    /// Why the definition could not be read, if it could not.
    pub problem: Option<String>,
    /// The next due time (ms), `None` when it ended.
    pub next_due_ms: Option<i64>,
    /// The end of the last claimed window (ms).
    pub cursor_ms: Option<i64>,
    /// The last enqueued window (start, end ms).
    pub last_window: Option<(i64, i64)>,
    /// The last window's job.
    pub last_job: Option<String>,
    /// That job's state (`None` once retention deleted it).
    pub last_job_state: Option<JobState>,
    /// Whether it is paused.
    pub paused: bool,
    /// Who paused or resumed it last.
    pub paused_by: Option<String>,
    /// Counters: `ticks`, `enqueued`, `caught_up`, `skipped`, `missed`, `delayed`, `triggered`.
    pub counts: std::collections::BTreeMap<String, u64>,
    /// The lag of the last enqueue after its due time (ms).
    pub last_lag_ms: Option<i64>,
    /// The worker that registered it last, and when (ms).
    pub registered_by: Option<String>,
    /// When it was registered last (ms).
    pub registered_at_ms: Option<i64>,
    /// Its ticks failing since the last claimed one, if they are.
    pub failing: Option<ScheduleFailing>,
}

/// A schedule whose ticks fail (a refused input, a template that cannot
/// render): cleared by the next claimed tick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ScheduleFailing {
    /// Failed ticks counted (every replica's tries).
    pub failures: u64,
    /// Since when (ms).
    pub since_ms: Option<i64>,
    /// The last error.
    pub last_error: String,
    /// When it was recorded (ms).
    pub last_error_at_ms: Option<i64>,
}

/// The counters a schedule's hash holds.
pub(crate) const COUNTERS: [&str; 7] = [
    "ticks",
    "enqueued",
    "caught_up",
    "skipped",
    "missed",
    "delayed",
    "triggered",
];

fn protocol(detail: impl Into<String>) -> Error {
    Error::Protocol {
        script: "schedule_tick",
        detail: detail.into(),
    }
}

impl Queue {
    /// Redis TIME in ms.
    pub async fn redis_time_ms(&self) -> Result<i64> {
        let mut conn = self.conn().await?;
        let (s, us): (i64, i64) = self
            .timed(redis::cmd("TIME").query_async(&mut conn))
            .await?;
        Ok(s * 1000 + us / 1000)
    }

    /// Writes `schedule`'s definition for `pipeline` (idempotent: never resets
    /// its cursor, paused flag or counters).
    pub(crate) async fn register_schedule(
        &self,
        pipeline: &str,
        schedule: &Schedule,
        by: &str,
    ) -> Result<Registered> {
        let now = self.redis_time_ms().await?;
        let now_ts = jiff::Timestamp::from_millisecond(now)
            .map_err(|e| protocol(format!("Redis TIME {now}: {e}")))?;
        let cursor = schedule.initial_cursor(now_ts);
        let next_due = schedule.next_after(cursor);
        let definition = schedule.definition();
        let json = serde_json::to_string(&definition)
            .map_err(|e| Error::InvalidArgument(format!("schedule definition: {e}")))?;
        self.run(&ScheduleRegister {
            name: schedule.name(),
            pipeline,
            definition: &json,
            digest: &definition.digest(),
            cursor: cursor.as_millisecond(),
            next_due: next_due.map(|t| t.as_millisecond()),
            by,
            start: schedule.start().map(|t| t.as_millisecond()),
        })
        .await
    }

    /// The job of window `w` under `contract` (the pipeline's spec).
    fn window_job(
        contract: &Contract,
        schedule: &Schedule,
        w: &Window,
        rerun: bool,
    ) -> Result<NewJob> {
        let mut o = EnqueueOptions::new();
        o.rerun = rerun;
        if contract.spec().input_key_template.is_none() {
            o.input_key = Some(schedule.input_key_for(w));
        }
        contract.job(&schedule.input_for(w).to_string(), &o)
    }

    /// Claims the due windows of `due` (computed from `cursor`) in one call.
    pub(crate) async fn tick_schedule(
        &self,
        contract: &Contract,
        schedule: &Schedule,
        cursor: i64,
        due: &DueWindows,
        by: &str,
    ) -> Result<TickReply> {
        self.tick_call(contract, schedule, Some(cursor), due, false, by)
            .await
    }

    /// Enqueues window `w` of `schedule` now, whatever its cursor, pause or
    /// overlap policy: idempotent on the window's input key (`rerun`: run a
    /// window whose job SUCCEEDED again). Recorded as `triggered` by `by`.
    pub async fn trigger_schedule(
        &self,
        contract: &Contract,
        schedule: &Schedule,
        w: Window,
        rerun: bool,
        by: &str,
    ) -> Result<TickReply> {
        let due = DueWindows {
            windows: vec![w],
            left_out: 0,
            next_due: None,
        };
        self.tick_call(contract, schedule, None, &due, rerun, by)
            .await
    }

    /// Triggers schedule `name` as registered: the window starting at `start`,
    /// or the latest due one (on Redis time), under its pipeline's published
    /// contract. Returns the window and what was done with it.
    pub async fn trigger_registered(
        &self,
        name: &str,
        start: Option<jiff::Timestamp>,
        rerun: bool,
        by: &str,
    ) -> Result<(Window, TickedWindow)> {
        let info = self
            .schedule_info(name)
            .await?
            .ok_or_else(|| Error::UnknownSchedule {
                queue: self.name().to_owned(),
                schedule: name.to_owned(),
            })?;
        let definition = info.definition.ok_or_else(|| Error::Corrupt {
            key: self.keys.schedule(name),
            field: "definition".into(),
            problem: info.problem.unwrap_or_default(),
        })?;
        let schedule = Schedule::from_definition(&definition)?;
        let spec = self.pipeline_spec(&info.pipeline).await?.ok_or_else(|| {
            Error::UnregisteredPipeline {
                pipeline: info.pipeline.clone(),
                queue: Some(self.name().to_owned()),
            }
        })?;
        let contract = Contract::new(spec)?;
        let now = self.redis_time_ms().await?;
        let now = jiff::Timestamp::from_millisecond(now)
            .map_err(|e| protocol(format!("Redis TIME {now}: {e}")))?;
        let w = schedule.window_at(start, now)?;
        match self
            .trigger_schedule(&contract, &schedule, w, rerun, by)
            .await?
        {
            TickReply::Claimed { mut windows, .. } if !windows.is_empty() => {
                Ok((w, windows.remove(0)))
            }
            TickReply::Unregistered => Err(Error::UnknownSchedule {
                queue: self.name().to_owned(),
                schedule: name.to_owned(),
            }),
            other => Err(protocol(format!("unexpected trigger reply {other:?}"))),
        }
    }

    async fn tick_call(
        &self,
        contract: &Contract,
        schedule: &Schedule,
        cursor: Option<i64>,
        due: &DueWindows,
        rerun: bool,
        by: &str,
    ) -> Result<TickReply> {
        let pipeline = contract.spec().name.clone();
        let mut jobs = Vec::with_capacity(due.windows.len());
        for w in &due.windows {
            let job = Self::window_job(contract, schedule, w, rerun)?;
            job.validate()?;
            jobs.push(job);
        }
        let ids: Vec<JobId> = jobs.iter().map(|_| JobId::default()).collect();
        self.run(&ScheduleTick {
            schedule,
            pipeline: &pipeline,
            cursor,
            due,
            jobs: &jobs,
            ids: &ids,
            by,
        })
        .await
    }

    /// Pauses (`pause`) or resumes schedule `name`; returns whether it was paused.
    pub async fn set_schedule_paused(
        &self,
        name: &str,
        pause: bool,
        by: &str,
        reason: &str,
    ) -> Result<bool> {
        let action = if pause {
            ScheduleAction::Pause
        } else {
            ScheduleAction::Resume
        };
        let was = self
            .run(&ScheduleState {
                name,
                action,
                by,
                reason,
            })
            .await?;
        Ok(was == 1)
    }

    /// Records that a tick of schedule `name` failed with `error` (by worker
    /// `by`); returns the failures counted since its last claimed tick (the
    /// first marks it failing in its ticks stream).
    pub async fn record_schedule_failure(&self, name: &str, by: &str, error: &str) -> Result<u64> {
        self.run(&ScheduleState {
            name,
            action: ScheduleAction::Failing,
            by,
            reason: error,
        })
        .await
    }

    /// The names of the queue's schedules, by next due time.
    pub async fn schedule_names(&self) -> Result<Vec<String>> {
        let mut conn = self.conn().await?;
        self.timed(conn.zrange(self.keys.schedules(), 0, -1)).await
    }

    /// Schedule `name` as registered (`None` when Redis has none by that name).
    pub async fn schedule_info(&self, name: &str) -> Result<Option<ScheduleInfo>> {
        let key = self.keys.schedule(name);
        let mut conn = self.conn().await?;
        let h: HashMap<String, String> = self.timed(conn.hgetall(&key)).await?;
        if h.is_empty() {
            return Ok(None);
        }
        let int = |field: &str| -> Option<i64> { h.get(field).and_then(|v| v.parse().ok()) };
        let (definition, problem) = match h.get("definition") {
            None => (None, Some("no definition".to_owned())),
            Some(json) => match serde_json::from_str::<ScheduleDefinition>(json) {
                Ok(d) => (Some(d), None),
                Err(e) => (None, Some(format!("the definition is not readable: {e}"))),
            },
        };
        let last_window = h.get("last_window").and_then(|w| {
            let (s, e) = w.split_once(':')?;
            Some((s.parse().ok()?, e.parse().ok()?))
        });
        let last_job = h.get("last_job").filter(|j| !j.is_empty()).cloned();
        let last_job_state = match &last_job {
            Some(id) => {
                let state: Option<String> =
                    self.timed(conn.hget(self.keys.job(id), "state")).await?;
                state.and_then(|s| s.parse().ok())
            }
            None => None,
        };
        let counts = COUNTERS
            .iter()
            .map(|c| ((*c).to_owned(), int(c).unwrap_or(0).max(0) as u64))
            .collect();
        Ok(Some(ScheduleInfo {
            name: name.to_owned(),
            pipeline: h.get("pipeline").cloned().unwrap_or_default(),
            definition,
            problem,
            next_due_ms: int("next_due"),
            cursor_ms: int("cursor"),
            last_window,
            last_job,
            last_job_state,
            paused: h.get("paused").map(|p| p == "1").unwrap_or(false),
            paused_by: h.get("paused_by").filter(|p| !p.is_empty()).cloned(),
            counts,
            last_lag_ms: int("last_lag_ms"),
            registered_by: h.get("registered_by").cloned(),
            registered_at_ms: int("registered_at"),
            failing: int("failures").filter(|n| *n > 0).map(|n| ScheduleFailing {
                failures: n as u64,
                since_ms: int("failing_since"),
                last_error: h.get("last_error").cloned().unwrap_or_default(),
                last_error_at_ms: int("last_error_at"),
            }),
        }))
    }

    /// Every schedule of the queue, by next due time.
    pub async fn schedule_infos(&self) -> Result<Vec<ScheduleInfo>> {
        let mut out = Vec::new();
        for name in self.schedule_names().await? {
            if let Some(info) = self.schedule_info(&name).await? {
                out.push(info);
            }
        }
        Ok(out)
    }

    /// The latest `count` entries of schedule `name`'s ticks stream, newest first.
    pub async fn schedule_ticks(&self, name: &str, count: usize) -> Result<Vec<TickEntry>> {
        let mut conn = self.conn().await?;
        let raw: Vec<(String, Vec<(String, String)>)> = self
            .timed(
                redis::cmd("XREVRANGE")
                    .arg(self.keys.schedule_ticks(name))
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(count)
                    .query_async(&mut conn),
            )
            .await?;
        Ok(raw
            .into_iter()
            .map(|(id, fields)| {
                let f: HashMap<String, String> = fields.into_iter().collect();
                let int = |k: &str| f.get(k).and_then(|v| v.parse::<i64>().ok());
                TickEntry {
                    at: id
                        .split_once('-')
                        .and_then(|(ms, _)| ms.parse().ok())
                        .unwrap_or(0),
                    outcome: f.get("outcome").cloned().unwrap_or_default(),
                    window: int("start").zip(int("end")),
                    job: f.get("job").filter(|j| !j.is_empty()).cloned(),
                    lag_ms: int("lag_ms"),
                    by: f.get("by").cloned().unwrap_or_default(),
                    reason: f.get("reason").cloned().unwrap_or_default(),
                }
            })
            .collect())
    }
}
