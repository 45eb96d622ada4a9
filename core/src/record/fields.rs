//! The one reader of a job hash's fields: typed getters over either a whole
//! hash (`HGETALL`) or the reply of an `HMGET` of some of its fields, with
//! errors ([`Error::Corrupt`]) that name the key and the field.

use std::collections::HashMap;
use std::str::FromStr;

use crate::error::Error;
use crate::record::{Millis, StaleLock, StepDone};
use crate::state::JobState;

/// Where a hash's field values come from, looked up by field name.
pub(crate) trait FieldValues {
    /// The raw value of `field`; `None` when the hash has no such field.
    fn value(&self, field: &str) -> Option<&[u8]>;
}

/// A whole hash, as `HGETALL` returns it.
impl FieldValues for HashMap<String, Vec<u8>> {
    fn value(&self, field: &str) -> Option<&[u8]> {
        self.get(field).map(Vec::as_slice)
    }
}

/// The reply of one `HMGET`: `values[i]` is the value of field `names[i]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Selected<'a> {
    /// The fields asked for, in order.
    pub names: &'a [&'a str],
    /// Their values, in the same order (`None` for a missing field).
    pub values: &'a [Option<String>],
}

impl FieldValues for Selected<'_> {
    fn value(&self, field: &str) -> Option<&[u8]> {
        let i = self.names.iter().position(|name| *name == field)?;
        self.values.get(i)?.as_deref().map(str::as_bytes)
    }
}

/// Reads the fields of the hash at `key` with errors that name the key and field.
pub(crate) struct Fields<'a, V> {
    key: &'a str,
    values: V,
}

impl<'a, V: FieldValues> Fields<'a, V> {
    /// A reader of `values`, the fields of the hash at `key`.
    pub(crate) fn new(key: &'a str, values: V) -> Self {
        Fields { key, values }
    }

    /// The values read.
    pub(crate) fn values(&self) -> &V {
        &self.values
    }

    /// An [`Error::Corrupt`] naming this hash's key and `field`.
    pub(crate) fn corrupt(&self, field: &str, problem: impl Into<String>) -> Error {
        Error::Corrupt {
            key: self.key.to_owned(),
            field: field.to_owned(),
            problem: problem.into(),
        }
    }

    /// The text of `field`; `None` when missing, an error when not UTF-8.
    pub(crate) fn text(&self, field: &str) -> Result<Option<&str>, Error> {
        match self.values.value(field) {
            None => Ok(None),
            Some(bytes) => std::str::from_utf8(bytes)
                .map(Some)
                .map_err(|_| self.corrupt(field, "not UTF-8")),
        }
    }

    /// The text of `field`, which must be present.
    pub(crate) fn required(&self, field: &str) -> Result<&str, Error> {
        self.text(field)?
            .ok_or_else(|| self.corrupt(field, "missing"))
    }

    /// The text of `field`; `None` when missing or empty.
    pub(crate) fn non_empty(&self, field: &str) -> Result<Option<String>, Error> {
        Ok(self
            .text(field)?
            .filter(|s| !s.is_empty())
            .map(str::to_owned))
    }

    /// `field` parsed as a `T`; `None` when missing or empty.
    pub(crate) fn parsed<T: FromStr>(&self, field: &str) -> Result<Option<T>, Error>
    where
        T::Err: std::fmt::Display,
    {
        match self.text(field)? {
            None | Some("") => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|e| self.corrupt(field, format!("{s:?}: {e}"))),
        }
    }

    /// `field` parsed as a `T`, which must be present and non-empty.
    pub(crate) fn parsed_required<T: FromStr>(&self, field: &str) -> Result<T, Error>
    where
        T::Err: std::fmt::Display,
    {
        self.parsed(field)?
            .ok_or_else(|| self.corrupt(field, "missing"))
    }

    /// `field` as a [`JobState`], which must be present.
    pub(crate) fn state(&self, field: &str) -> Result<JobState, Error> {
        self.required(field)?
            .parse()
            .map_err(|e| self.corrupt(field, format!("{e}")))
    }

    /// `field` as a [`StaleLock`] policy; missing or empty means [`StaleLock::Hold`].
    pub(crate) fn stale_lock(&self, field: &str) -> Result<StaleLock, Error> {
        match self.text(field)? {
            None | Some("") | Some("hold") => Ok(StaleLock::Hold),
            Some("release") => Ok(StaleLock::Release),
            Some(other) => Err(self.corrupt(field, format!("unknown policy {other:?}"))),
        }
    }

    /// The `step@ms` entries of `field`; `step@+ms` counts from `started_at`.
    pub(crate) fn steps(
        &self,
        field: &str,
        started_at: Option<Millis>,
    ) -> Result<Vec<StepDone>, Error> {
        let Some(text) = self.text(field)? else {
            return Ok(Vec::new());
        };
        let bad =
            |entry: &str| self.corrupt(field, format!("{entry:?} is not step@ms or step@+ms"));
        text.split(',')
            .filter(|s| !s.is_empty())
            .map(|entry| {
                let (step, at) = entry.rsplit_once('@').ok_or_else(|| bad(entry))?;
                let at = match at.strip_prefix('+') {
                    Some(after) => {
                        let base = started_at.ok_or_else(|| {
                            self.corrupt(
                                field,
                                format!("{entry:?} counts from started_at, which is missing"),
                            )
                        })?;
                        let after: Millis = after.parse().map_err(|_| bad(entry))?;
                        base.checked_add(after).ok_or_else(|| bad(entry))?
                    }
                    None => at.parse().map_err(|_| bad(entry))?,
                };
                Ok(StepDone {
                    step: step.to_owned(),
                    at,
                })
            })
            .collect()
    }
}

/// The step of the last entry of a `steps` field (`step@ms` or `step@+ms`,
/// comma-separated): the last step of a plain success, which keeps no
/// `last_step` of its own. `None` for an empty field.
pub(crate) fn last_entry_step(steps: &str) -> Option<&str> {
    let entry = steps.rsplit(',').find(|e| !e.is_empty())?;
    let (step, _) = entry.rsplit_once('@')?;
    (!step.is_empty()).then_some(step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_entry_names_the_last_step() {
        assert_eq!(last_entry_step("fetch@+3,load@+9"), Some("load"));
        assert_eq!(last_entry_step("noop@1700000000000"), Some("noop"));
        assert_eq!(last_entry_step(""), None);
        assert_eq!(last_entry_step("garbage"), None);
    }

    #[test]
    fn a_selection_reads_the_same_as_the_whole_hash() {
        let names = ["state", "fence", "step"];
        let values = [Some("RUNNING".to_owned()), Some("7".to_owned()), None];
        let selected = Fields::new(
            "k",
            Selected {
                names: &names,
                values: &values,
            },
        );
        let map: HashMap<String, Vec<u8>> = [("state", "RUNNING"), ("fence", "7")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect();
        let whole = Fields::new("k", map);
        for f in [&selected as &dyn Probe, &whole] {
            assert_eq!(f.probe(), (JobState::Running, Some(7), None));
        }
        match selected.parsed_required::<u64>("step") {
            Err(Error::Corrupt { key, field, .. }) => {
                assert_eq!((key, field), ("k".into(), "step".into()))
            }
            other => panic!("{other:?}"),
        }
        // a field not asked for reads as missing
        assert_eq!(selected.text("other").ok(), Some(None));
    }

    trait Probe {
        fn probe(&self) -> (JobState, Option<u64>, Option<String>);
    }

    impl<V: FieldValues> Probe for Fields<'_, V> {
        fn probe(&self) -> (JobState, Option<u64>, Option<String>) {
            (
                self.state("state").expect("state"),
                self.parsed("fence").expect("fence"),
                self.non_empty("step").expect("step"),
            )
        }
    }

    #[test]
    fn stale_lock_policies_and_unknown_ones() {
        let names = ["stale_lock"];
        for (text, want) in [
            (None, Some(StaleLock::Hold)),
            (Some(""), Some(StaleLock::Hold)),
            (Some("release"), Some(StaleLock::Release)),
            (Some("drop"), None),
        ] {
            let values = [text.map(str::to_owned)];
            let f = Fields::new(
                "k",
                Selected {
                    names: &names,
                    values: &values,
                },
            );
            assert_eq!(f.stale_lock("stale_lock").ok(), want, "{text:?}");
        }
    }
}
