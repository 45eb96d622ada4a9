//! `leasehold worker --pipelines FILE`: pipelines declared in a TOML file,
//! their steps as commands (process steps), read into the same
//! [`DeclaredPipeline`]s (and so the same published spec) a program would
//! build. The whole file is checked before anything runs; every error names
//! its line and column. Each setting is read with its one definition in
//! `leasehold_syntax::setting` (the `#[pipeline]` macro's and `--lease-ttl`'s
//! too), and its words into the core's own types (`StaleLock`, `CatchUp`,
//! `Overlap`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use leasehold_core::notify::{Notify, NotifyEvent};
use leasehold_core::process::{
    arg_fields, render_arg, DeclaredPipeline, ExitCodes, ExitCodesError, ProcessStep,
};
use leasehold_core::{
    CatchUp, FlowOptions, Overlap, PipelineOptions, Rate, RetryPolicy, Schedule, StaleLock,
};
use leasehold_syntax::setting::{self, CountSetting, DurationSetting, SettingError};
use serde::{Deserialize, Deserializer};
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

/// A word setting as written, deserialized into the core's own type (its
/// `FromStr` reads the setting's one definition), or the refusal's words: a
/// wrong word is reported with every other mistake, not alone as a parse
/// failure of the whole file.
#[derive(Debug)]
struct Word<T>(Result<T, SettingError>);

impl<'de, T: std::str::FromStr<Err = SettingError>> Deserialize<'de> for Word<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(Word(text.parse()))
    }
}

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
    stale_lock: Option<Spanned<Word<StaleLock>>>,
    /// `stale_lock`'s old name, read until 0.3.
    on_stale: Option<Spanned<Word<StaleLock>>>,
    retry: Option<Spanned<RetryDoc>>,
    flow: Option<Spanned<FlowDoc>>,
    input_schema: Option<Spanned<toml::Value>>,
    #[serde(default, rename = "schedule")]
    schedules: Vec<Spanned<ScheduleDoc>>,
    #[serde(default, rename = "step")]
    steps: Vec<Spanned<StepDoc>>,
    cleanup: Option<Spanned<StepDoc>>,
    notify: Option<Spanned<NotifyDoc>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotifyDoc {
    run: Option<Spanned<Vec<String>>>,
    webhook: Option<Spanned<String>>,
    attempts: Option<Spanned<u32>>,
    on: Option<Vec<Spanned<String>>>,
    timeout: Option<Spanned<String>>,
    cwd: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryDoc {
    max_attempts: Option<Spanned<u64>>,
    initial_backoff: Option<Spanned<String>>,
    /// `initial_backoff`'s old name, read until 0.3.
    backoff: Option<Spanned<String>>,
    max_backoff: Option<Spanned<String>>,
    multiplier: Option<Spanned<f64>>,
    jitter: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowDoc {
    resource_limit: Option<Spanned<u64>>,
    max_running: Option<Spanned<u64>>,
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
    catch_up: Option<Spanned<Word<CatchUp>>>,
    catch_up_max: Option<Spanned<u64>>,
    overlap: Option<Spanned<Word<Overlap>>>,
    grace: Option<Spanned<String>>,
    input: Option<Spanned<toml::Value>>,
    window_offset: Option<Spanned<String>>,
    run_on_start: Option<bool>,
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

/// The largest pipelines file read: a file of pipelines is a page or two of
/// settings, and a bigger one is refused before it is read whole.
pub(crate) const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Every problem found in a pipelines file, in the order of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileErrors(pub Vec<FileError>);

impl fmt::Display for FileErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        if self.0.len() > 1 {
            write!(f, "\n{} mistakes in all", self.0.len())?;
        }
        Ok(())
    }
}

/// A parser's message in the file's own words: settings, not fields.
fn plain(message: &str) -> String {
    let message = message.trim_end();
    if let Some(rest) = message.strip_prefix("unknown field ") {
        return match rest.split_once(", expected ") {
            Some((name, expected)) => {
                format!("unknown setting {name}; the settings here are {expected}")
            }
            None => format!("unknown setting {rest}"),
        };
    }
    if let Some(name) = message.strip_prefix("missing field ") {
        return format!("{name} is required here");
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            if let Some((found, expected)) = rest.split_once(", expected ") {
                return format!("expected {expected}, found {found}");
            }
        }
    }
    message.to_owned()
}

/// Reads what the file's text says, collecting every error at its span.
struct Reader<'a> {
    path: &'a Path,
    text: &'a str,
    /// The directory the file is in (relative `cwd`s and the default one).
    dir: PathBuf,
    /// What is wrong so far.
    errors: RefCell<Vec<FileError>>,
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

    /// Records a problem at `span` and goes on reading.
    fn report(&self, span: Range<usize>, message: impl Into<String>) {
        let e = self.error(span, message);
        self.errors.borrow_mut().push(e);
    }

    /// `r`'s value, or `None` with its error recorded.
    fn keep<T>(&self, r: Result<T, FileError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.errors.borrow_mut().push(e);
                None
            }
        }
    }

    fn error_count(&self) -> usize {
        self.errors.borrow().len()
    }

    /// A duration setting, read and bounded by its one definition.
    fn duration(
        &self,
        value: &Spanned<String>,
        def: &DurationSetting,
    ) -> Result<Duration, FileError> {
        def.parse(value.get_ref())
            .map_err(|e| self.error(value.span(), e.message))
    }

    /// A whole-number setting, bounded by its one definition.
    fn count(&self, value: &Spanned<u64>, def: &CountSetting) -> Option<u32> {
        self.keep(
            def.check(*value.get_ref())
                .map_err(|e| self.error(value.span(), e.message)),
        )
    }

    /// The setting written under its current name or its old one (both is
    /// a mistake, reported at the old name).
    fn either<'d, T>(
        &self,
        current: &'d Option<Spanned<T>>,
        old: &'d Option<Spanned<T>>,
        names: (&str, &str),
    ) -> Option<&'d Spanned<T>> {
        match (current, old) {
            (Some(c), Some(o)) => {
                self.report(
                    o.span(),
                    format!(
                        "duplicate setting `{}` (`{}` is its old name)",
                        names.0, names.1
                    ),
                );
                Some(c)
            }
            (c, o) => c.as_ref().or(o.as_ref()),
        }
    }

    /// A word setting's value, or `None` with its refusal recorded.
    fn word<T: Copy>(&self, value: &Spanned<Word<T>>) -> Option<T> {
        match &value.get_ref().0 {
            Ok(v) => Some(*v),
            Err(e) => {
                self.report(value.span(), e.message.clone());
                None
            }
        }
    }

    /// A retry policy: every bad setting is recorded.
    fn retry(&self, doc: &Spanned<RetryDoc>, base: RetryPolicy) -> RetryPolicy {
        let r = doc.get_ref();
        let mut policy = base;
        if let Some(n) = r
            .max_attempts
            .as_ref()
            .and_then(|n| self.count(n, &setting::MAX_ATTEMPTS))
        {
            policy = policy.max_attempts(n);
        }
        let initial_backoff = self.either(
            &r.initial_backoff,
            &r.backoff,
            ("initial_backoff", "backoff"),
        );
        let initial = initial_backoff.and_then(|d| {
            self.keep(self.duration(d, &setting::INITIAL_BACKOFF))
                .map(|v| (d, v))
        });
        let max = r
            .max_backoff
            .as_ref()
            .and_then(|d| self.keep(self.duration(d, &setting::MAX_BACKOFF)));
        if let Some((_, v)) = initial {
            policy = policy.initial_backoff(v);
        }
        if let Some(v) = max {
            policy = policy.max_backoff(v);
        }
        if let (Some((span, i)), Some(m)) = (initial, max) {
            if let Err(e) = setting::check_backoffs(i, m) {
                self.report(span.span(), e.message);
            }
        }
        if let Some(m) = &r.multiplier {
            match setting::MULTIPLIER.check(*m.get_ref()) {
                Ok(v) => policy = policy.multiplier(v),
                Err(e) => self.report(m.span(), e.message),
            }
        }
        if let Some(j) = &r.jitter {
            match setting::JITTER.check(*j.get_ref()) {
                Ok(v) => policy = policy.jitter(v),
                Err(e) => self.report(j.span(), e.message),
            }
        }
        policy
    }

    fn json(
        &self,
        value: &Spanned<toml::Value>,
        what: &str,
    ) -> Result<serde_json::Value, FileError> {
        serde_json::to_value(value.get_ref())
            .map_err(|e| self.error(value.span(), format!("{what}: {e}")))
    }

    /// A step: its retry policy (when it has its own), command and name.
    fn step(&self, doc: &Spanned<StepDoc>) -> Option<(Option<RetryPolicy>, ProcessStep, String)> {
        let s = doc.get_ref();
        let Some(step_name) = &s.name else {
            self.report(doc.span(), "a step needs a name: name = \"fetch\"");
            return None;
        };
        let (retry, command) = self.command(doc, step_name.get_ref())?;
        Some((retry, command, step_name.get_ref().clone()))
    }

    /// A step's (or the cleanup's) command and spec, named `name`: every
    /// problem is recorded, `None` when there was one.
    fn command(
        &self,
        doc: &Spanned<StepDoc>,
        name: &str,
    ) -> Option<(Option<RetryPolicy>, ProcessStep)> {
        let before = self.error_count();
        let s = doc.get_ref();
        let cwd = match &s.cwd {
            Some(c) => {
                let dir = self.dir.join(c.get_ref());
                if !dir.is_dir() {
                    let why = if dir.exists() {
                        "is not a directory"
                    } else {
                        "does not exist"
                    };
                    self.report(c.span(), format!("cwd {}: {why}", dir.display()));
                }
                dir
            }
            None => self.dir.clone(),
        };
        let path_var = s.env.get("PATH").map(std::ffi::OsString::from);
        let mut command = match (&s.run, &s.shell) {
            (Some(run), None) => match run.get_ref().split_first() {
                None => {
                    self.report(
                        run.span(),
                        "run must name a program: run = [\"program\", \"arg\", ...]",
                    );
                    None
                }
                Some((program, _)) if program.is_empty() => {
                    self.report(run.span(), "run's program is empty");
                    None
                }
                Some((program, args)) => {
                    if let Err(why) = programs::resolve(program, &cwd, path_var.as_deref()) {
                        self.report(run.span(), why);
                    }
                    Some(ProcessStep::new(program).args(args))
                }
            },
            (None, Some(shell)) if shell.get_ref().trim().is_empty() => {
                self.report(shell.span(), "shell is empty");
                None
            }
            (None, Some(shell)) => Some(ProcessStep::shell(shell.get_ref())),
            (Some(_), Some(shell)) => {
                self.report(
                    shell.span(),
                    "a step has either run (argv, no shell) or shell, not both",
                );
                None
            }
            (None, None) => {
                self.report(doc.span(), format!(
                    "step {name:?} has no command: give run = [\"program\", \"arg\", ...] (no shell) or shell = \"...\""
                ));
                None
            }
        };
        if let Some(c) = command.take() {
            let mut c = c.current_dir(&cwd);
            for (k, v) in &s.env {
                c = c.env(k, v);
            }
            command = Some(c);
        }
        let timeout = s
            .timeout
            .as_ref()
            .and_then(|t| self.keep(self.duration(t, &setting::TIMEOUT)));
        let grace = s
            .grace
            .as_ref()
            .and_then(|g| self.keep(self.duration(g, &setting::STEP_GRACE)));
        let mut codes = ExitCodes::default();
        if let Some(c) = &s.retryable_exit_codes {
            codes = codes.retryable(c.get_ref().iter().copied());
        }
        if let Some(c) = &s.permanent_exit_codes {
            codes = codes.permanent(c.get_ref().iter().copied());
        }
        for e in codes.check() {
            let list = match e {
                ExitCodesError::OutOfRange {
                    list: "permanent_exit_codes",
                    ..
                } => s.permanent_exit_codes.as_ref(),
                _ => s.retryable_exit_codes.as_ref(),
            };
            self.report(list.map_or(doc.span(), |l| l.span()), e.to_string());
        }
        if let Some(o) = &s.other_exits {
            match o.get_ref().as_str() {
                "retryable" => codes = codes.others_retryable(true),
                "permanent" => codes = codes.others_retryable(false),
                other => self.report(
                    o.span(),
                    format!("other_exits is {other:?}: expected \"permanent\" or \"retryable\""),
                ),
            }
        }
        let retry = s
            .retry
            .as_ref()
            .map(|r| self.retry(r, RetryPolicy::default()));
        if self.error_count() > before {
            return None;
        }
        let mut command = command?.exit_codes(codes);
        if let Some(t) = timeout {
            command = command.timeout(t);
        }
        if let Some(g) = grace {
            command = command.grace(g);
        }
        if let Some(n) = s.tail_bytes {
            command = command.tail_bytes(n);
        }
        Some((retry, command))
    }

    /// The notice hook: its command resolved as a step's, its events and timeout.
    fn notify(&self, doc: &Spanned<NotifyDoc>) -> Option<Notify> {
        let before = self.error_count();
        let n = doc.get_ref();
        let cwd = match &n.cwd {
            Some(c) => {
                let dir = self.dir.join(c.get_ref());
                if !dir.is_dir() {
                    self.report(c.span(), format!("cwd {}: does not exist", dir.display()));
                }
                dir
            }
            None => self.dir.clone(),
        };
        match &n.run {
            Some(run) => match run.get_ref().first() {
                None => self.report(
                    run.span(),
                    "run must name a program: run = [\"program\", \"arg\", ...]",
                ),
                Some(program) => {
                    if let Err(why) = programs::resolve(program, &cwd, None) {
                        self.report(run.span(), why);
                    }
                }
            },
            None if n.webhook.is_none() => self.report(
                doc.span(),
                "notify needs run = [\"program\", ...] or webhook = \"https://...\" (or both)",
            ),
            None => {}
        }
        if let Some(url) = &n.webhook {
            let u = url.get_ref();
            if !(u.starts_with("https://") || u.starts_with("http://"))
                || u.contains(char::is_whitespace)
            {
                self.report(
                    url.span(),
                    format!("webhook {u:?}: expected an http:// or https:// URL"),
                );
            }
        }
        if let Some(a) = &n.attempts {
            if *a.get_ref() == 0 {
                self.report(a.span(), "attempts must be at least 1");
            }
        }
        let mut events = Vec::new();
        for e in n.on.iter().flatten() {
            match e.get_ref().parse::<NotifyEvent>() {
                Ok(event) => events.push(event),
                Err(why) => self.report(e.span(), why),
            }
        }
        let timeout = n
            .timeout
            .as_ref()
            .and_then(|t| self.keep(self.duration(t, &setting::TIMEOUT)));
        if self.error_count() > before {
            return None;
        }
        // it runs from the file's directory (or its cwd), as a step does
        let mut hook = Notify::command(
            n.run
                .as_ref()
                .map(|r| r.get_ref().clone())
                .unwrap_or_default(),
        )
        .current_dir(cwd);
        if let Some(url) = &n.webhook {
            hook = hook.and_webhook(url.get_ref());
        }
        if let Some(a) = &n.attempts {
            hook = hook.attempts(*a.get_ref());
        }
        if n.on.is_some() {
            hook = hook.on(events);
        }
        if let Some(t) = timeout {
            hook = hook.timeout(t);
        }
        Some(hook)
    }

    fn schedule(&self, doc: &Spanned<ScheduleDoc>) -> Option<Schedule> {
        let before = self.error_count();
        let s = doc.get_ref();
        let name = s.name.get_ref();
        let at = |span: Range<usize>| {
            move |e: leasehold_core::ScheduleError| self.error(span.clone(), e.to_string())
        };
        let schedule = match (&s.cron, &s.every) {
            (Some(cron), None) => {
                self.keep(Schedule::cron(name, cron.get_ref()).map_err(at(cron.span())))
            }
            (None, Some(every)) => self.keep(
                self.duration(every, &setting::EVERY)
                    .and_then(|d| Schedule::every(name, d).map_err(at(every.span()))),
            ),
            _ => {
                self.report(
                    doc.span(),
                    format!(
                        "schedule {name:?} needs exactly one of cron = \"...\" or every = \"...\""
                    ),
                );
                None
            }
        };
        // a stand-in, so that the other settings are checked too
        let mut schedule = schedule.unwrap_or_else(|| {
            Schedule::every("unchecked", Duration::from_secs(60)).expect("a valid interval")
        });
        if let Some(z) = &s.zone {
            if let Some(next) =
                self.keep(schedule.clone().in_zone(z.get_ref()).map_err(at(z.span())))
            {
                schedule = next;
            }
        }
        if let Some(t) = &s.start {
            if let Some(next) = self.keep(
                schedule
                    .clone()
                    .starting_at(t.get_ref())
                    .map_err(at(t.span())),
            ) {
                schedule = next;
            }
        }
        if let Some(t) = &s.end {
            if let Some(next) = self.keep(
                schedule
                    .clone()
                    .ending_at(t.get_ref())
                    .map_err(at(t.span())),
            ) {
                schedule = next;
            }
        }
        let catch_up = s.catch_up.as_ref().and_then(|c| self.word(c));
        match (catch_up, &s.catch_up_max) {
            (Some(CatchUp::All { .. }), Some(m)) => {
                if let Some(max) = self.count(m, &setting::CATCH_UP_MAX) {
                    schedule = schedule.catch_up(CatchUp::All { max });
                }
            }
            (Some(c), None) => schedule = schedule.catch_up(c),
            (None, Some(m)) if s.catch_up.is_some() => {
                // the word is refused already; check the bound all the same
                self.count(m, &setting::CATCH_UP_MAX);
            }
            (_, Some(m)) => self.report(m.span(), setting::CATCH_UP_MAX_ALONE),
            (None, None) => {}
        }
        if let Some(o) = s.overlap.as_ref().and_then(|o| self.word(o)) {
            schedule = schedule.overlap(o);
        }
        if let Some(g) = &s.grace {
            if let Some(d) = self.keep(self.duration(g, &setting::SCHEDULE_GRACE)) {
                schedule = schedule.grace(d);
            }
        }
        if let Some(o) = &s.window_offset {
            match leasehold_core::parse_offset_ms(o.get_ref()) {
                Ok(ms) => {
                    if let Some(next) =
                        self.keep(schedule.clone().window_offset_ms(ms).map_err(at(o.span())))
                    {
                        schedule = next;
                    }
                }
                Err(e) => self.report(o.span(), format!("window_offset: {e}")),
            }
        }
        if let Some(run) = s.run_on_start {
            schedule = schedule.run_on_start(run);
        }
        if let Some(input) = &s.input {
            if let Some(v) = self.keep(self.json(input, "input")) {
                if let Some(next) = self.keep(schedule.clone().input(v).map_err(at(input.span()))) {
                    schedule = next;
                }
            }
        }
        (self.error_count() == before).then_some(schedule)
    }

    fn pipeline(&self, doc: &Spanned<PipelineDoc>) -> Option<DeclaredPipeline> {
        let before = self.error_count();
        let p = doc.get_ref();
        let name = p.name.get_ref();
        let invalid = |span: Range<usize>| {
            move |e: leasehold_core::Error| self.error(span.clone(), e.to_string())
        };
        let mut options = PipelineOptions::new();
        if let Some(t) = &p.lease_ttl {
            if let Some(ttl) = self.keep(self.duration(t, &setting::LEASE_TTL)) {
                options = options.lease_ttl(ttl);
            }
        }
        if let Some(s) = self
            .either(&p.stale_lock, &p.on_stale, ("stale_lock", "on_stale"))
            .and_then(|s| self.word(s))
        {
            options = options.stale_lock(s);
        }
        if let Some(r) = &p.retry {
            options = options.retry(self.retry(r, RetryPolicy::default()));
        }
        let mut flow = FlowOptions::new();
        if let Some(f) = &p.flow {
            let doc = f.get_ref();
            if let Some(n) = doc
                .resource_limit
                .as_ref()
                .and_then(|n| self.count(n, &setting::RESOURCE_LIMIT))
            {
                flow = flow.resource_limit(n);
            }
            if let Some(n) = doc
                .max_running
                .as_ref()
                .and_then(|n| self.count(n, &setting::MAX_RUNNING))
            {
                flow = flow.max_running(n);
            }
        }
        // the queue, the rate and the limiter are given to the pipeline, which
        // keeps each for the life of the process once
        let mut pipeline = DeclaredPipeline::new(name).options(options.flow(flow));
        if let Some(q) = &p.queue {
            pipeline = pipeline.queue(q.get_ref());
        }
        let mut templates: Vec<(&Spanned<String>, &str)> = Vec::new();
        if let Some(f) = &p.flow {
            let doc = f.get_ref();
            if let Some(rate) = &doc.rate {
                match rate.get_ref().parse::<Rate>() {
                    Ok(r) => pipeline = pipeline.rate(r),
                    Err(e) => self.report(rate.span(), format!("rate: {e}")),
                }
            }
            if let Some(l) = &doc.limiter {
                match leasehold_core::KeyTemplate::parse(l.get_ref()) {
                    Ok(t) => {
                        templates.push((l, "limiter"));
                        pipeline = pipeline.limiter(&t);
                    }
                    Err(e) => self.report(l.span(), format!("limiter template: {e}")),
                }
            }
        }
        if let Some(t) = &p.resource {
            if let Some(next) = self.keep(
                pipeline
                    .clone()
                    .resource_template(t.get_ref())
                    .map_err(invalid(t.span())),
            ) {
                pipeline = next;
                templates.push((t, "resource"));
            }
        }
        if let Some(t) = &p.input_key {
            if let Some(next) = self.keep(
                pipeline
                    .clone()
                    .input_key_template(t.get_ref())
                    .map_err(invalid(t.span())),
            ) {
                pipeline = next;
                templates.push((t, "input_key"));
            }
        }
        let mut schema = None;
        if let Some(s) = &p.input_schema {
            if let Some(v) = self.keep(self.json(s, "input_schema")) {
                if let Some(next) = self.keep(
                    pipeline
                        .clone()
                        .input_schema(v.clone())
                        .map_err(invalid(s.span())),
                ) {
                    pipeline = next;
                    schema = Some(v);
                }
            }
        }
        // the steps' (and the cleanup's) argv, for their placeholders
        let argvs: Vec<&Spanned<Vec<String>>> = p
            .steps
            .iter()
            .chain(&p.cleanup)
            .filter_map(|s| s.get_ref().run.as_ref())
            .collect();
        if let Some(schema) = &schema {
            for run in &argvs {
                let fields = run.get_ref().iter().skip(1).flat_map(|a| arg_fields(a));
                if let Some(why) = dry_run::fields_against_schema(fields, schema) {
                    self.report(run.span(), format!("run's arguments: {why}"));
                }
            }
            for (t, what) in &templates {
                if let Some(why) = dry_run::template_against_schema(t.get_ref(), schema) {
                    self.report(
                        t.span(),
                        format!("{what} template {:?}: {why}", t.get_ref()),
                    );
                }
            }
        }
        if p.steps.is_empty() {
            self.report(
                doc.span(),
                format!("pipeline {name:?} has no steps: add [[pipeline.step]] tables"),
            );
        }
        let mut seen: Vec<String> = Vec::new();
        for step in &p.steps {
            if let Some(n) = &step.get_ref().name {
                if seen.contains(n.get_ref()) {
                    self.report(
                        n.span(),
                        format!(
                            "step {:?} is declared twice in pipeline {name:?}",
                            n.get_ref()
                        ),
                    );
                    continue;
                }
                seen.push(n.get_ref().clone());
            }
            pipeline = match self.step(step) {
                Some((Some(retry), command, name)) => pipeline.step_retrying(&name, retry, command),
                Some((None, command, name)) => pipeline.step(&name, command),
                None => pipeline,
            };
        }
        if let Some(c) = &p.cleanup {
            if let Some(n) = &c.get_ref().name {
                self.report(n.span(), "the cleanup command has no name");
            }
            if let Some(r) = &c.get_ref().retry {
                self.report(r.span(), "the cleanup command is not retried");
            }
            if let Some((_, command)) = self.command(c, "cleanup") {
                pipeline = pipeline.cleanup(command);
            }
        }
        if let Some(n) = &p.notify {
            if let Some(hook) = self.notify(n) {
                pipeline = pipeline.notify(hook);
            }
        }
        let mut names: Vec<String> = Vec::new();
        let mut schedules = Vec::new();
        for s in &p.schedules {
            let sname = s.get_ref().name.get_ref();
            if names.contains(sname) {
                self.report(
                    s.get_ref().name.span(),
                    format!("schedule {sname:?} is declared twice in pipeline {name:?}"),
                );
                continue;
            }
            names.push(sname.clone());
            if let Some(schedule) = self.schedule(s) {
                pipeline = pipeline.schedule(schedule.clone());
                schedules.push((s, schedule));
            }
        }
        if self.error_count() > before {
            return None;
        }
        if let Err(e) = pipeline.check() {
            self.report(p.name.span(), e.to_string());
            return None;
        }
        // a dry run of each schedule's first tick: its input through the
        // pipeline's contract (schema and templates), as an enqueue would
        for (doc, schedule) in &schedules {
            let Some(input) = dry_run::first_tick_input(schedule) else {
                continue;
            };
            if let Err(why) = dry_run::enqueue_dry(&pipeline, schedule, &input) {
                let at = doc
                    .get_ref()
                    .input
                    .as_ref()
                    .map_or(doc.span(), |i| i.span());
                self.report(at, why);
                continue;
            }
            for run in &argvs {
                for arg in run.get_ref().iter().skip(1) {
                    if let Err(why) = render_arg(arg, &input) {
                        self.report(
                            run.span(),
                            format!(
                                "the first tick of schedule {:?} cannot fill argument {arg:?}: {why}",
                                schedule.name()
                            ),
                        );
                    }
                }
            }
        }
        (self.error_count() == before).then_some(pipeline)
    }
}

/// Parses and checks pipelines file `path` whose text is `text`: every
/// mistake found, in the order of the file.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Vec<DeclaredPipeline>, FileErrors> {
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
    let reader = Reader {
        path,
        text,
        dir,
        errors: RefCell::new(Vec::new()),
    };
    let doc: FileDoc = toml::from_str(text).map_err(|e| {
        FileErrors(vec![
            reader.error(e.span().unwrap_or(0..0), plain(e.message()))
        ])
    })?;
    if doc.pipelines.is_empty() {
        return Err(FileErrors(vec![
            reader.error(0..0, "no pipeline declared: add [[pipeline]] tables")
        ]));
    }
    let mut out: Vec<DeclaredPipeline> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for p in &doc.pipelines {
        let name = p.get_ref().name.get_ref();
        if names.contains(&name.as_str()) {
            reader.report(
                p.get_ref().name.span(),
                format!("pipeline {name:?} is declared twice"),
            );
            continue;
        }
        names.push(name);
        if let Some(pipeline) = reader.pipeline(p) {
            out.push(pipeline);
        }
    }
    let mut errors = reader.errors.into_inner();
    if errors.is_empty() {
        return Ok(out);
    }
    errors.sort_by_key(|e| (e.line, e.column));
    errors.dedup();
    Err(FileErrors(errors))
}

/// Reads, parses and checks pipelines file `path` (at most
/// [`MAX_FILE_BYTES`], UTF-8): every mistake found, one a line.
pub(crate) fn load(path: &Path) -> Result<Vec<DeclaredPipeline>, String> {
    use std::io::Read;
    let cannot = |e: std::io::Error| format!("cannot read pipelines file {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "{}: the pipelines file is larger than {} KiB, the most it may be",
            path.display(),
            MAX_FILE_BYTES / 1024
        ));
    }
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let bytes = e.as_bytes();
            let prefix = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
            let (line, column) = line_column(prefix, valid);
            return Err(format!(
                "{}:{line}:{column}: the file is not valid UTF-8 (byte 0x{:02x})",
                path.display(),
                bytes.get(valid).copied().unwrap_or(0)
            ));
        }
    };
    parse(path, &text).map_err(|e| e.to_string())
}

mod dry_run;
mod programs;

#[cfg(test)]
mod settings_walk;
#[cfg(test)]
mod tests;
