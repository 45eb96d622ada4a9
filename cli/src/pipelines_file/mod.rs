//! `leasehold worker --pipelines FILE`: pipelines declared in a TOML file,
//! their steps as commands (process steps), read into the same
//! [`DeclaredPipeline`]s (and so the same published spec) a program would
//! build. The whole file is checked before anything runs; every error names
//! its line and column.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use leasehold_core::process::{DeclaredPipeline, ExitCodes, ExitCodesError, ProcessStep};
use leasehold_core::{
    parse_duration, CatchUp, FlowOptions, Overlap, PipelineOptions, Rate, RetryPolicy, Schedule,
    StaleLock, StepSpec,
};
use serde::Deserialize;
use toml::Spanned;

/// A problem in a pipelines file, at a line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileError {
    /// The file.
    pub path: PathBuf,
    /// Line, from 1.
    pub line: usize,
    /// Column (characters), from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.path.display(),
            self.line,
            self.column,
            self.message
        )
    }
}

/// The line and column (from 1) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

// ---- the file as written --------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default, rename = "pipeline")]
    pipelines: Vec<Spanned<PipelineDoc>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PipelineDoc {
    name: Spanned<String>,
    queue: Option<Spanned<String>>,
    resource: Option<Spanned<String>>,
    input_key: Option<Spanned<String>>,
    lease_ttl: Option<Spanned<String>>,
    stale_lock: Option<Spanned<String>>,
    retry: Option<Spanned<RetryDoc>>,
    flow: Option<Spanned<FlowDoc>>,
    input_schema: Option<Spanned<toml::Value>>,
    #[serde(default, rename = "schedule")]
    schedules: Vec<Spanned<ScheduleDoc>>,
    #[serde(default, rename = "step")]
    steps: Vec<Spanned<StepDoc>>,
    cleanup: Option<Spanned<StepDoc>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryDoc {
    max_attempts: Option<Spanned<u32>>,
    initial_backoff: Option<Spanned<String>>,
    max_backoff: Option<Spanned<String>>,
    multiplier: Option<Spanned<f64>>,
    jitter: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowDoc {
    resource_limit: Option<u32>,
    max_running: Option<u32>,
    rate: Option<Spanned<String>>,
    limiter: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleDoc {
    name: Spanned<String>,
    cron: Option<Spanned<String>>,
    every: Option<Spanned<String>>,
    zone: Option<Spanned<String>>,
    start: Option<Spanned<String>>,
    end: Option<Spanned<String>>,
    catch_up: Option<Spanned<String>>,
    catch_up_max: Option<Spanned<u32>>,
    overlap: Option<Spanned<String>>,
    grace: Option<Spanned<String>>,
    input: Option<Spanned<toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepDoc {
    name: Option<Spanned<String>>,
    run: Option<Spanned<Vec<String>>>,
    shell: Option<Spanned<String>>,
    cwd: Option<Spanned<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    timeout: Option<Spanned<String>>,
    grace: Option<Spanned<String>>,
    retryable_exit_codes: Option<Spanned<Vec<i32>>>,
    permanent_exit_codes: Option<Spanned<Vec<i32>>>,
    other_exits: Option<Spanned<String>>,
    tail_bytes: Option<usize>,
    retry: Option<Spanned<RetryDoc>>,
}

// ---- reading it -----------------------------------------------------------------

/// Reads what the file's text says, reporting errors at their spans.
struct Reader<'a> {
    path: &'a Path,
    text: &'a str,
    /// The directory the file is in (relative `cwd`s and the default one).
    dir: PathBuf,
}

impl Reader<'_> {
    fn error(&self, span: Range<usize>, message: impl Into<String>) -> FileError {
        let (line, column) = line_column(self.text, span.start);
        FileError {
            path: self.path.to_owned(),
            line,
            column,
            message: message.into(),
        }
    }

    fn duration(&self, value: &Spanned<String>, what: &str) -> Result<Duration, FileError> {
        parse_duration(value.get_ref())
            .map_err(|e| self.error(value.span(), format!("{what}: {e}")))
    }

    fn retry(&self, doc: &Spanned<RetryDoc>, base: RetryPolicy) -> Result<RetryPolicy, FileError> {
        let r = doc.get_ref();
        let mut policy = base;
        if let Some(n) = &r.max_attempts {
            if *n.get_ref() == 0 {
                return Err(self.error(n.span(), "max_attempts must be at least 1"));
            }
            policy = policy.max_attempts(*n.get_ref());
        }
        if let Some(d) = &r.initial_backoff {
            policy = policy.initial_backoff(self.duration(d, "initial_backoff")?);
        }
        if let Some(d) = &r.max_backoff {
            policy = policy.max_backoff(self.duration(d, "max_backoff")?);
        }
        if let Some(m) = &r.multiplier {
            if !(m.get_ref().is_finite() && *m.get_ref() >= 1.0) {
                return Err(self.error(m.span(), "multiplier must be a number of at least 1"));
            }
            policy = policy.multiplier(*m.get_ref());
        }
        if let Some(j) = &r.jitter {
            if !(0.0..=1.0).contains(j.get_ref()) {
                return Err(self.error(j.span(), "jitter must be between 0 and 1"));
            }
            policy = policy.jitter(*j.get_ref());
        }
        Ok(policy)
    }

    fn json(
        &self,
        value: &Spanned<toml::Value>,
        what: &str,
    ) -> Result<serde_json::Value, FileError> {
        serde_json::to_value(value.get_ref())
            .map_err(|e| self.error(value.span(), format!("{what}: {e}")))
    }

    fn step(&self, doc: &Spanned<StepDoc>) -> Result<(StepSpec, ProcessStep, String), FileError> {
        let s = doc.get_ref();
        let Some(step_name) = &s.name else {
            return Err(self.error(doc.span(), "a step needs a name: name = \"fetch\""));
        };
        let (spec, command) = self.command(doc, step_name.get_ref())?;
        Ok((spec, command, step_name.get_ref().clone()))
    }

    /// A step's (or the cleanup's) command and spec, named `name`.
    fn command(
        &self,
        doc: &Spanned<StepDoc>,
        name: &str,
    ) -> Result<(StepSpec, ProcessStep), FileError> {
        let s = doc.get_ref();
        let mut command = match (&s.run, &s.shell) {
            (Some(run), None) => {
                let Some((program, args)) = run.get_ref().split_first() else {
                    return Err(self.error(run.span(), "run must name a program: run = [\"program\", \"arg\", ...]"));
                };
                if program.is_empty() {
                    return Err(self.error(run.span(), "run's program is empty"));
                }
                ProcessStep::new(program).args(args)
            }
            (None, Some(shell)) => {
                if shell.get_ref().trim().is_empty() {
                    return Err(self.error(shell.span(), "shell is empty"));
                }
                ProcessStep::shell(shell.get_ref())
            }
            (Some(_), Some(shell)) => {
                return Err(self.error(shell.span(), "a step has either run (argv, no shell) or shell, not both"))
            }
            (None, None) => {
                return Err(self.error(doc.span(), format!(
                    "step {name:?} has no command: give run = [\"program\", \"arg\", ...] (no shell) or shell = \"...\""
                )))
            }
        };
        let cwd = match &s.cwd {
            Some(c) => self.dir.join(c.get_ref()),
            None => self.dir.clone(),
        };
        command = command.current_dir(cwd);
        for (name, value) in &s.env {
            command = command.env(name, value);
        }
        if let Some(t) = &s.timeout {
            command = command.timeout(self.duration(t, "timeout")?);
        }
        if let Some(g) = &s.grace {
            command = command.grace(self.duration(g, "grace")?);
        }
        let mut codes = ExitCodes::default();
        if let Some(c) = &s.retryable_exit_codes {
            codes = codes.retryable(c.get_ref().iter().copied());
        }
        if let Some(c) = &s.permanent_exit_codes {
            codes = codes.permanent(c.get_ref().iter().copied());
        }
        if let Some(e) = codes.check().first() {
            let list = match e {
                ExitCodesError::OutOfRange {
                    list: "permanent_exit_codes",
                    ..
                } => s.permanent_exit_codes.as_ref(),
                _ => s.retryable_exit_codes.as_ref(),
            };
            let span = list.map_or(doc.span(), |l| l.span());
            return Err(self.error(span, e.to_string()));
        }
        if let Some(o) = &s.other_exits {
            codes = codes.others_retryable(match o.get_ref().as_str() {
                "retryable" => true,
                "permanent" => false,
                other => {
                    return Err(self.error(
                        o.span(),
                        format!(
                            "other_exits is {other:?}: expected \"permanent\" or \"retryable\""
                        ),
                    ))
                }
            });
        }
        command = command.exit_codes(codes);
        if let Some(n) = s.tail_bytes {
            command = command.tail_bytes(n);
        }
        let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
        let mut spec = StepSpec::new(leaked);
        if let Some(r) = &s.retry {
            spec = spec.retry(self.retry(r, RetryPolicy::default())?);
        }
        Ok((spec, command))
    }

    fn schedule(&self, doc: &Spanned<ScheduleDoc>) -> Result<Schedule, FileError> {
        let s = doc.get_ref();
        let name = s.name.get_ref();
        let at = |span: Range<usize>| {
            move |e: leasehold_core::ScheduleError| self.error(span.clone(), e.to_string())
        };
        let mut schedule = match (&s.cron, &s.every) {
            (Some(cron), None) => Schedule::cron(name, cron.get_ref()).map_err(at(cron.span()))?,
            (None, Some(every)) => {
                Schedule::every(name, self.duration(every, "every")?).map_err(at(every.span()))?
            }
            _ => {
                return Err(self.error(
                    doc.span(),
                    format!(
                        "schedule {name:?} needs exactly one of cron = \"...\" or every = \"...\""
                    ),
                ))
            }
        };
        if let Some(z) = &s.zone {
            schedule = schedule.in_zone(z.get_ref()).map_err(at(z.span()))?;
        }
        if let Some(t) = &s.start {
            schedule = schedule.starting_at(t.get_ref()).map_err(at(t.span()))?;
        }
        if let Some(t) = &s.end {
            schedule = schedule.ending_at(t.get_ref()).map_err(at(t.span()))?;
        }
        if let Some(c) = &s.catch_up {
            let max = s.catch_up_max.as_ref().map_or(24, |m| *m.get_ref());
            schedule = schedule.catch_up(match c.get_ref().as_str() {
                "all" => CatchUp::All { max },
                "latest" => CatchUp::Latest,
                "none" => CatchUp::None,
                other => {
                    return Err(self.error(
                        c.span(),
                        format!("catch_up is {other:?}: expected \"all\", \"latest\" or \"none\""),
                    ))
                }
            });
        } else if let Some(m) = &s.catch_up_max {
            return Err(self.error(m.span(), "catch_up_max goes with catch_up = \"all\""));
        }
        if let Some(o) = &s.overlap {
            schedule = schedule.overlap(match o.get_ref().as_str() {
                "allow" => Overlap::Allow,
                "skip" => Overlap::Skip,
                "wait" => Overlap::Wait,
                other => {
                    return Err(self.error(
                        o.span(),
                        format!("overlap is {other:?}: expected \"allow\", \"skip\" or \"wait\""),
                    ))
                }
            });
        }
        if let Some(g) = &s.grace {
            schedule = schedule.grace(self.duration(g, "grace")?);
        }
        if let Some(input) = &s.input {
            schedule = schedule
                .input(self.json(input, "input")?)
                .map_err(at(input.span()))?;
        }
        Ok(schedule)
    }

    fn pipeline(&self, doc: &Spanned<PipelineDoc>) -> Result<DeclaredPipeline, FileError> {
        let p = doc.get_ref();
        let name = p.name.get_ref();
        let invalid = |span: Range<usize>| {
            move |e: leasehold_core::Error| self.error(span.clone(), e.to_string())
        };
        let mut pipeline = DeclaredPipeline::new(name);
        if let Some(q) = &p.queue {
            pipeline = pipeline.queue(q.get_ref());
        }
        let mut options = PipelineOptions::new();
        if let Some(q) = &p.queue {
            options = options.queue(Box::leak(q.get_ref().clone().into_boxed_str()));
        }
        if let Some(t) = &p.lease_ttl {
            let ttl = self.duration(t, "lease_ttl")?;
            if ttl < Duration::from_secs(1) {
                return Err(self.error(t.span(), "lease_ttl must be at least 1s"));
            }
            options = options.lease_ttl(ttl);
        }
        if let Some(s) = &p.stale_lock {
            options = options.stale_lock(match s.get_ref().as_str() {
                "hold" => StaleLock::Hold,
                "release" => StaleLock::Release,
                other => {
                    return Err(self.error(
                        s.span(),
                        format!("stale_lock is {other:?}: expected \"hold\" or \"release\""),
                    ))
                }
            });
        }
        if let Some(r) = &p.retry {
            options = options.retry(self.retry(r, RetryPolicy::default())?);
        }
        if let Some(f) = &p.flow {
            let doc = f.get_ref();
            let mut flow = FlowOptions::new();
            if let Some(n) = doc.resource_limit {
                flow = flow.resource_limit(n);
            }
            if let Some(n) = doc.max_running {
                flow = flow.max_running(n);
            }
            if let Some(rate) = &doc.rate {
                rate.get_ref()
                    .parse::<Rate>()
                    .map_err(|e| self.error(rate.span(), format!("rate: {e}")))?;
                flow = flow.rate(Box::leak(rate.get_ref().clone().into_boxed_str()));
            }
            if let Some(l) = &doc.limiter {
                leasehold_core::KeyTemplate::parse(l.get_ref())
                    .map_err(|e| self.error(l.span(), format!("limiter template: {e}")))?;
                flow = flow.limiter(Box::leak(l.get_ref().clone().into_boxed_str()));
            }
            options = options.flow(flow);
        }
        pipeline = pipeline.options(options);
        if let Some(t) = &p.resource {
            pipeline = pipeline
                .resource_template(t.get_ref())
                .map_err(invalid(t.span()))?;
        }
        if let Some(t) = &p.input_key {
            pipeline = pipeline
                .input_key_template(t.get_ref())
                .map_err(invalid(t.span()))?;
        }
        if let Some(s) = &p.input_schema {
            pipeline = pipeline
                .input_schema(self.json(s, "input_schema")?)
                .map_err(invalid(s.span()))?;
        }
        if p.steps.is_empty() {
            return Err(self.error(
                doc.span(),
                format!("pipeline {name:?} has no steps: add [[pipeline.step]] tables"),
            ));
        }
        let mut seen: Vec<String> = Vec::new();
        for step in &p.steps {
            let (spec, command, step_name) = self.step(step)?;
            if seen.contains(&step_name) {
                let at = step
                    .get_ref()
                    .name
                    .as_ref()
                    .map_or(step.span(), |n| n.span());
                return Err(self.error(
                    at,
                    format!("step {step_name:?} is declared twice in pipeline {name:?}"),
                ));
            }
            seen.push(step_name);
            pipeline = pipeline.step_with(spec, command);
        }
        if let Some(c) = &p.cleanup {
            if let Some(n) = &c.get_ref().name {
                return Err(self.error(n.span(), "the cleanup command has no name"));
            }
            if let Some(r) = &c.get_ref().retry {
                return Err(self.error(r.span(), "the cleanup command is not retried"));
            }
            pipeline = pipeline.cleanup(self.command(c, "cleanup")?.1);
        }
        let mut schedules: Vec<String> = Vec::new();
        for s in &p.schedules {
            if schedules.contains(s.get_ref().name.get_ref()) {
                return Err(self.error(
                    s.get_ref().name.span(),
                    format!(
                        "schedule {:?} is declared twice in pipeline {name:?}",
                        s.get_ref().name.get_ref()
                    ),
                ));
            }
            schedules.push(s.get_ref().name.get_ref().clone());
            pipeline = pipeline.schedule(self.schedule(s)?);
        }
        pipeline.check().map_err(invalid(p.name.span()))?;
        Ok(pipeline)
    }
}

/// Parses and checks pipelines file `path` whose text is `text`.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Vec<DeclaredPipeline>, FileError> {
    let dir = path
        .parent()
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        })
        .unwrap_or(Path::new("."))
        .to_owned();
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let reader = Reader { path, text, dir };
    let doc: FileDoc = toml::from_str(text)
        .map_err(|e| reader.error(e.span().unwrap_or(0..0), e.message().trim_end().to_owned()))?;
    if doc.pipelines.is_empty() {
        return Err(reader.error(0..0, "no pipeline declared: add [[pipeline]] tables"));
    }
    let mut out: Vec<DeclaredPipeline> = Vec::new();
    for p in &doc.pipelines {
        let pipeline = reader.pipeline(p)?;
        if out.iter().any(|o| o.name() == pipeline.name()) {
            return Err(reader.error(
                p.get_ref().name.span(),
                format!("pipeline {:?} is declared twice", pipeline.name()),
            ));
        }
        out.push(pipeline);
    }
    Ok(out)
}

/// Reads, parses and checks pipelines file `path`.
pub(crate) fn load(path: &Path) -> Result<Vec<DeclaredPipeline>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read pipelines file {}: {e}", path.display()))?;
    parse(path, &text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
