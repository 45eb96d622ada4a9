//! Building the pipeline model: name, queue, options, ordered steps with
//! their parameter and output types, and the cleanup hook, read from the
//! parsed attribute and impl block. What each piece must satisfy is checked
//! by `valid`, which reports into the same `Errors`.

use std::collections::HashMap;
use std::time::Duration;

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::{Attribute, Ident, ItemImpl, LitStr, ReturnType, Signature, Type};

use crate::case::{pascal_case, snake_case};
use crate::errors::Errors;
use crate::options::{self, Retry, Setting, RETRY_KEYS};
use crate::parse::{Marked, MarkerKind, Parsed, Settings};
use crate::template::Template;
use crate::valid;
use leasehold_syntax::setting;

/// A pipeline, as far as it could be understood.
pub(crate) struct Model {
    /// The impl block, markers removed.
    pub item: ItemImpl,
    /// `#[cfg]`s of the impl block, repeated on generated items.
    pub cfgs: Vec<Attribute>,
    /// The pipeline type's name (the last segment of the impl's self type).
    pub type_ident: Option<Ident>,
    pub name: String,
    pub queue: String,
    pub lease_ttl: Option<Duration>,
    pub retry: Retry,
    pub release_on_stale: bool,
    /// Publish the input's JSON Schema (the default; `input_schema = false`
    /// publishes none, and enqueues from the CLI and HTTP say so).
    pub input_schema: bool,
    pub resource: Option<Template>,
    pub input_key: Option<Template>,
    /// Flow control: `resource_limit`, `max_running`, `rate`, `limiter`.
    pub flow: Flow,
    /// `schedule(...)`, when declared.
    pub schedule: Option<crate::schedule::ScheduleDecl>,
    /// `notify(...)`, when declared.
    pub notify: Option<crate::notify::NotifyDecl>,
    /// The job input type, from the first step's `&Input` parameter.
    pub input: Option<Type>,
    pub steps: Vec<Step>,
    pub cleanup: Option<Cleanup>,
    /// Set when the impl has a problem rustc reports by itself (two methods of
    /// one name): generate nothing that would repeat it.
    pub degraded: bool,
}

/// The flow control a pipeline declares.
#[derive(Default)]
pub(crate) struct Flow {
    pub resource_limit: Option<u32>,
    pub max_running: Option<u32>,
    /// `"10/s"`, checked.
    pub rate: Option<LitStr>,
    /// The named limiter's key template.
    pub limiter: Option<Template>,
}

/// A step.
pub(crate) struct Step {
    /// The method.
    pub ident: Ident,
    /// Its name, as recorded in Redis.
    pub name: String,
    /// Its variant in the step enum.
    pub variant: Ident,
    pub timeout: Option<Duration>,
    /// Its own retry policy, merged over the pipeline's.
    pub retry: Option<Retry>,
    /// Parameters after the context, in order.
    pub params: Vec<Param>,
    /// `T` of `Result<T, E>`.
    pub output: Type,
    /// `E` of `Result<T, E>`, or the return type when not written.
    pub error_span: Span,
}

/// A step or cleanup parameter after the context.
pub(crate) enum Param {
    /// `&Input`: the job input; the referenced type as written.
    Input(Type),
    /// The previous step's output, by value.
    Previous(Type),
}

/// The cleanup hook.
pub(crate) struct Cleanup {
    pub ident: Ident,
    /// The type its `&Input` parameter refers to, if it takes one.
    pub input: Option<Type>,
}

const PIPELINE_KEYS: &[&str] = &[
    "name",
    "queue",
    "resource",
    "input_key",
    "lease_ttl",
    "max_attempts",
    "initial_backoff",
    "max_backoff",
    "multiplier",
    "jitter",
    "stale_lock",
    "resource_limit",
    "max_running",
    "rate",
    "limiter",
    "schedule",
    "input_schema",
    "notify",
];

const STEP_KEYS: &[&str] = &["timeout", "retry"];

/// Validates the parsed pipeline, reporting every problem into `errors`.
pub(crate) fn build(settings: Settings, parsed: Parsed, errors: &mut Errors) -> Model {
    let Parsed { item, marked } = parsed;
    let cfgs = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .cloned()
        .collect();
    let type_ident = valid::check_impl(&item, errors);

    let mut model = Model {
        cfgs,
        name: type_ident
            .as_ref()
            .map(|i| snake_case(&i.unraw().to_string()))
            .unwrap_or_default(),
        queue: String::new(),
        type_ident,
        lease_ttl: None,
        retry: Retry::default(),
        release_on_stale: false,
        input_schema: true,
        resource: None,
        input_key: None,
        flow: Flow::default(),
        schedule: None,
        notify: None,
        input: None,
        steps: Vec::new(),
        cleanup: None,
        degraded: false,
        item,
    };
    read_pipeline_settings(&mut model, settings, errors);

    let mut first_cleanup: Option<Ident> = None;
    let mut names: HashMap<String, Ident> = HashMap::new();
    for marked in marked {
        match marked.kind {
            MarkerKind::Step => {
                let ident = marked.sig.ident.clone();
                let name = ident.unraw().to_string();
                match valid::check_step_name(&ident, &name, &names, errors) {
                    valid::StepName::Fresh => {}
                    valid::StepName::Repeated => {
                        // Two methods of one name: rustc says so itself.
                        model.degraded = true;
                        continue;
                    }
                    valid::StepName::Clash => continue,
                }
                names.insert(name.to_lowercase(), ident.clone());
                let index = model.steps.len();
                let step = build_step(marked, index, &mut model, errors);
                model.steps.push(step);
            }
            MarkerKind::Cleanup => {
                if let Some(first) = &first_cleanup {
                    errors.spanned(
                        &marked.attr,
                        format!("a pipeline has at most one #[cleanup] hook, and `{first}` is one"),
                    );
                    continue;
                }
                first_cleanup = Some(marked.sig.ident.clone());
                model.cleanup = build_cleanup(&marked.sig, errors);
            }
        }
    }
    if model.steps.is_empty() {
        errors.spanned(
            &model.item.self_ty,
            "a pipeline needs at least one #[step]: mark its async methods with #[step], \
             in the order they run",
        );
    }
    model
}

fn read_pipeline_settings(model: &mut Model, settings: Settings, errors: &mut Errors) {
    let mut queue = None;
    let mut resource_limit_at = None;
    let mut limiter_at = None;
    let mut rate_seen = false;
    for setting in options::known(settings, PIPELINE_KEYS, "option", errors) {
        if model.retry.read(&setting, errors) {
            continue;
        }
        match options::current_name(&setting.key.to_string()) {
            "name" => {
                if let Some(lit) = errors.ok(setting.string("\"orders_sync\"")) {
                    if let Some(name) = errors.ok(valid::check_name("pipeline name", &lit)) {
                        model.name = name;
                    }
                }
            }
            "queue" => {
                if let Some(lit) = errors.ok(setting.string("\"orders\"")) {
                    queue = errors.ok(valid::check_name("queue name", &lit));
                }
            }
            "resource" => model.resource = read_template(&setting, true, errors),
            "resource_limit" => {
                model.flow.resource_limit =
                    errors.ok(setting.count_of(&setting::RESOURCE_LIMIT, "3"));
                resource_limit_at = Some(setting.key.span());
            }
            "max_running" => {
                model.flow.max_running = errors.ok(setting.count_of(&setting::MAX_RUNNING, "2"))
            }
            "rate" => {
                rate_seen = true;
                if let Some(lit) = errors.ok(setting.string("\"10/s\"")) {
                    if errors.ok(valid::check_rate(&lit)).is_some() {
                        model.flow.rate = Some(lit);
                    }
                }
            }
            "limiter" => {
                model.flow.limiter = read_template(&setting, true, errors);
                limiter_at = Some(setting.key.span());
            }
            "input_key" => model.input_key = read_template(&setting, false, errors),
            "schedule" => model.schedule = crate::schedule::read(&setting, errors),
            "notify" => model.notify = crate::notify::read(&setting, errors),
            "input_schema" => {
                if let Some(publish) = errors.ok(setting.boolean("false")) {
                    model.input_schema = publish;
                }
            }
            "lease_ttl" => {
                if let Some(ttl) = errors.ok(setting.duration_of(&setting::LEASE_TTL)) {
                    model.lease_ttl = Some(ttl);
                }
            }
            "stale_lock" => {
                if let Some(word) = errors.ok(setting.word_of(&setting::STALE_LOCK)) {
                    model.release_on_stale = word == "release";
                }
            }
            _ => unreachable!("every known option is handled"),
        }
    }
    model.retry.check(errors);
    model.queue = queue.unwrap_or_else(|| model.name.clone());
    valid::check_flow_needs(
        resource_limit_at.filter(|_| model.resource.is_none()),
        limiter_at.filter(|_| !rate_seen),
        errors,
    );
}

fn read_template(setting: &Setting, resource: bool, errors: &mut Errors) -> Option<Template> {
    let lit = errors.ok(setting.string("\"shop:{shop_id}\""))?;
    let template = errors.ok(Template::parse(lit))?;
    if resource {
        errors.ok(valid::check_resource_template(&template))?;
    }
    Some(template)
}

fn build_step(marked: Marked, index: usize, model: &mut Model, errors: &mut Errors) -> Step {
    let Marked { settings, sig, .. } = marked;
    let mut timeout = None;
    let mut retry = None;
    for setting in options::known(settings, STEP_KEYS, "step option", errors) {
        match setting.key.to_string().as_str() {
            "timeout" => {
                timeout = errors.ok(setting.duration_of(&setting::TIMEOUT));
            }
            "retry" => {
                let Some(nested) = errors.ok(setting.nested("max_attempts = 5, backoff = \"2s\""))
                else {
                    continue;
                };
                let mut policy = Retry::default();
                for setting in options::known(nested, RETRY_KEYS, "retry setting", errors) {
                    policy.read(&setting, errors);
                }
                policy.check(errors);
                retry = Some(policy);
            }
            _ => unreachable!("every known step option is handled"),
        }
    }

    valid::check_method(&sig, "steps", errors);
    let params = valid::check_context(&sig, "StepContext", "a step", errors);
    // Whether the parameters after the context could be read (so a missing
    // input is worth reporting).
    let mut params_ok = params.is_some();
    let mut input_param: Option<&Type> = None;
    let mut previous_param: Option<&Type> = None;
    let mut params_out = Vec::new();
    for arg in params.unwrap_or_default() {
        let ty = &*arg.ty;
        match valid::ungroup(ty) {
            Type::Reference(r) if r.mutability.is_some() => {
                errors.spanned(
                    ty,
                    "step parameters cannot be `&mut`: take the input as `&Input`",
                );
                params_ok = false;
            }
            Type::Reference(r) => {
                if input_param.is_some() {
                    errors.spanned(
                        ty,
                        "a step takes the job input (`&Input`) at most once; other parameters \
                         are taken by value",
                    );
                    continue;
                }
                input_param = Some(ty);
                if index == 0 {
                    model.input = Some((*r.elem).clone());
                }
                params_out.push(Param::Input((*r.elem).clone()));
            }
            _ if index == 0 => {
                errors.spanned(
                    ty,
                    format!(
                        "the first step has no previous output to take by value; it takes the job \
                         input by reference: `&{}`",
                        quote::ToTokens::to_token_stream(ty)
                    ),
                );
                params_ok = false;
            }
            _ => {
                if previous_param.is_some() {
                    errors.spanned(
                        ty,
                        "a step takes at most one parameter by value: the previous step's output",
                    );
                    continue;
                }
                previous_param = Some(ty);
                params_out.push(Param::Previous(ty.clone()));
            }
        }
    }
    if index == 0 && input_param.is_none() && params_ok {
        errors.at(
            sig.ident.span(),
            "the first step must take the job input by reference, after the context: \
             `input: &MyInput` (its type is the pipeline's input)",
        );
    }

    let output = match valid::result_types(&sig.output) {
        Ok(types) => Some(types),
        Err(span) => {
            errors.at(
                span,
                "a step must return `Result<T, E>`: `T` is its output (Serialize + Deserialize) \
                 and `E` converts into `StepError`",
            );
            None
        }
    };
    // A step with a broken signature still gets its variant; errors make the
    // expansion a fallback that never calls it.
    let (output, error_span) = output.unwrap_or_else(|| (syn::parse_quote!(()), Span::call_site()));
    let name = sig.ident.unraw().to_string();
    Step {
        variant: Ident::new(&pascal_case(&name), sig.ident.span()),
        ident: sig.ident,
        name,
        timeout,
        retry,
        params: params_out,
        output,
        error_span,
    }
}

fn build_cleanup(sig: &Signature, errors: &mut Errors) -> Option<Cleanup> {
    let mut ok = valid::check_method(sig, "cleanup hooks", errors);
    let params = valid::check_context(sig, "CleanupContext", "a cleanup hook", errors);
    ok &= params.is_some();
    let mut input = None;
    for (i, arg) in params.unwrap_or_default().into_iter().enumerate() {
        match &*arg.ty {
            Type::Reference(r) if i == 0 && r.mutability.is_none() => {
                input = Some((*r.elem).clone())
            }
            other => {
                errors.spanned(
                    other,
                    "a cleanup hook takes `ctx: &CleanupContext` and, optionally, the job input \
                     as `&Input`; nothing else",
                );
                ok = false;
            }
        }
    }
    match &sig.output {
        ReturnType::Default => {}
        ReturnType::Type(_, ty) if matches!(valid::ungroup(ty), Type::Tuple(t) if t.elems.is_empty()) =>
            {}
        ReturnType::Type(_, ty) => {
            errors.spanned(
                ty,
                "a cleanup hook returns nothing: handle its errors inside",
            );
            ok = false;
        }
    }
    ok.then(|| Cleanup {
        ident: sig.ident.clone(),
        input,
    })
}
