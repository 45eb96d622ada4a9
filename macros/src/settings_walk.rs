//! The macro's side of the settings walk: every value of
//! `leasehold_syntax::setting::EXAMPLES`, written where it belongs in a
//! `#[pipeline]` attribute, is accepted or refused by the macro's own
//! reading (parse → model) with exactly the words the pipelines file and the
//! command line use (their side: `cli/src/pipelines_file/tests.rs`,
//! `settings_walk_*`).

use leasehold_syntax::setting::{Example, Place, EXAMPLES};
use proc_macro2::TokenStream;

use crate::errors::Errors;
use crate::{model, parse};

/// The attribute's arguments and the impl block that carry `e`.
fn written(e: &Example) -> (String, String) {
    let mut here: Vec<String> = e.with.iter().map(|w| (*w).to_owned()).collect();
    here.push(format!("{} = {}", e.key, e.value));
    let here = here.join(", ");
    let (args, step) = match e.place {
        Place::Pipeline | Place::Retry | Place::Flow => (here, String::new()),
        Place::Step => (String::new(), format!("({here})")),
        // every schedule has a cadence: `every = "1h"` unless that is the setting
        Place::Schedule if e.key == "every" => (format!("schedule({here})"), String::new()),
        Place::Schedule => (format!("schedule(every = \"1h\", {here})"), String::new()),
    };
    let item = format!(
        "impl P {{ #[step{step}] async fn s(&self, ctx: &StepContext, input: &u32) \
         -> Result<u32, StepError> {{ Ok(*input) }} }}"
    );
    (args, item)
}

/// What the macro says of `e`: its error messages, in order.
fn said(e: &Example) -> Vec<String> {
    let (args, item) = written(e);
    let tokens = |s: &str| {
        s.parse::<TokenStream>()
            .expect("the test writes valid tokens")
    };
    let mut errors = Errors::default();
    let settings = parse::settings(tokens(&args), &mut errors);
    let item = parse::item(tokens(&item)).expect("an impl block");
    let parsed = parse::strip_markers(item, &mut errors);
    let _model = model::build(settings, parsed, &mut errors);
    errors.messages()
}

#[test]
fn settings_walk_the_macro_accepts_and_refuses_like_the_file() {
    assert!(EXAMPLES.len() > 20);
    for e in EXAMPLES {
        let want: Vec<String> = e.refused.map(str::to_owned).into_iter().collect();
        assert_eq!(said(e), want, "{e:?} as {:?}", written(e));
    }
}

#[test]
fn an_old_name_and_its_new_one_are_one_setting() {
    let e = Example {
        key: "stale_lock",
        place: Place::Pipeline,
        with: &["on_stale = \"hold\""],
        value: "\"hold\"",
        refused: None,
    };
    assert_eq!(
        said(&e),
        ["duplicate option `stale_lock`"],
        "both names given"
    );
}
