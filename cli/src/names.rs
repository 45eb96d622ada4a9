//! Names an operator types (queues, pipelines, groups, schedules), checked
//! against the ones that exist: an unknown name is an error that lists the
//! known ones and, when one is close, asks "did you mean".

/// The known name closest to `name`, if one is close enough to be a typo: an
/// edit distance (insertions, deletions, substitutions, swaps) of at most a
/// third of its length (at least 1), or the same name in another case.
pub(crate) fn closest<'a>(name: &str, known: &'a [String]) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    known
        .iter()
        .map(|k| {
            let d = if k.eq_ignore_ascii_case(name) {
                0
            } else {
                strsim::damerau_levenshtein(name, k)
            };
            (d, k)
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

/// `no KIND "NAME" WHERE; did you mean "X"? known KINDs: a, b` (or `there
/// are none`), for a `kind` (`queue`, `pipeline`, ...) that does not exist.
pub(crate) fn unknown(kind: &str, name: &str, place: &str, known: &[String]) -> String {
    let mut out = format!("no {kind} {name:?} {place}");
    // "...; did you mean "y"? known ...", else "...; known ..."
    match closest(name, known) {
        Some(c) => out.push_str(&format!("; did you mean {c:?}? ")),
        None => out.push_str("; "),
    }
    if known.is_empty() {
        out.push_str(&format!("there are no {kind}s"));
    } else {
        out.push_str(&format!("known {kind}s: {}", known.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_typo_finds_its_name_and_a_stranger_finds_none() {
        let known = names(&["orders", "reports", "tenant_report"]);
        assert_eq!(closest("ordres", &known), Some("orders"));
        assert_eq!(closest("tenant_reprot", &known), Some("tenant_report"));
        assert_eq!(closest("Orders", &known), Some("orders"));
        assert_eq!(closest("nosuchqueue", &known), None);
        assert_eq!(closest("x", &known), None);
        assert_eq!(
            unknown("queue", "ordrs", "under prefix \"lh\"", &known),
            "no queue \"ordrs\" under prefix \"lh\"; did you mean \"orders\"? known queues: orders, reports, tenant_report"
        );
        assert_eq!(
            unknown("group", "g", "in queue q", &[]),
            "no group \"g\" in queue q; there are no groups"
        );
    }
}
