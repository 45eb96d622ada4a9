//! Refusals: the statuses a script answers instead of a move (`NOT_FOUND`,
//! `REFUSED`, `LOST`, `TERMINAL`, `CORRUPT`, `OP_ERROR`, `BAD_ARG`, `BAD_KEY`), decoded
//! into typed errors.

use crate::error::Error;
use crate::state::JobState;
use crate::transitions::Op;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;

/// The error for refusal `status` of `script` (operation `op`, asked to take
/// `job` to `to`), reading the status's values from `reply`.
pub(crate) fn refusal(
    keys: &QueueKeys,
    script: &'static str,
    op: Op,
    job: &str,
    to: Option<JobState>,
    status: &str,
    reply: &mut Reply,
) -> Error {
    let state = |reply: &mut Reply| -> Result<JobState, Error> {
        let text = reply.text()?;
        text.parse().map_err(|_| Error::Corrupt {
            key: keys.job(job),
            field: "state".into(),
            problem: format!("unknown state {text:?}"),
        })
    };
    let decoded = match status {
        "NOT_FOUND" => Ok(Error::NotFound {
            queue: keys.queue().to_owned(),
            job: job.to_owned(),
        }),
        "REFUSED" => state(reply).map(|state| Error::Refused {
            job: job.to_owned(),
            state,
            op,
            to,
        }),
        "LOST" => state(reply).map(|state| Error::LeaseLost {
            job: job.to_owned(),
            state,
            op,
        }),
        "TERMINAL" => state(reply).map(|state| Error::AlreadyTerminal {
            job: job.to_owned(),
            state,
            op,
        }),
        // {'CORRUPT', problem, field}; replies without the field are about the attempt
        "CORRUPT" => reply.text().and_then(|detail| {
            let field = if reply.remaining() > 0 {
                reply.text()?
            } else {
                "attempt".into()
            };
            Ok(Error::Corrupt {
                key: keys.job(job),
                field,
                problem: detail,
            })
        }),
        "OP_ERROR" => reply.text().map(|detail| Error::Corrupt {
            key: keys.job(job),
            field: "(a field the operation reads)".into(),
            problem: format!("{script} failed on this job: {detail}"),
        }),
        // an operation of settle given a key that is not its job's pipeline's
        // or resource's: {'BAD_KEY', 'KEYS[<i>] is <given>, not <expected>'}
        "BAD_KEY" => reply.text().map(|detail| foreign_key(&detail)),
        "BAD_ARG" => reply
            .text()
            .map(|what| Error::InvalidArgument(format!("{script}: bad {what}"))),
        other => Ok(Error::Protocol {
            script,
            detail: format!("unknown status {other:?}"),
        }),
    };
    decoded.unwrap_or_else(|e| e)
}

/// The detail `KEYS[<i>] is <given>, not <expected>` of a `BAD_KEY` refusal
/// (an error reply, or an operation's status) as [`Error::ForeignKey`].
pub(crate) fn foreign_key(detail: &str) -> Error {
    let detail = detail.trim();
    let parsed = detail
        .strip_prefix("KEYS[")
        .and_then(|rest| rest.split_once("] is "))
        .and_then(|(position, rest)| {
            let (key, expected) = rest.rsplit_once(", not ")?;
            Some((position.parse().ok()?, key, expected))
        });
    match parsed {
        Some((position, key, expected)) => Error::ForeignKey {
            position,
            key: key.to_owned(),
            expected: expected.to_owned(),
        },
        None => Error::ForeignKey {
            position: 0,
            key: detail.to_owned(),
            expected: String::new(),
        },
    }
}

/// A state named in a reply, or a protocol error of `script`.
pub(crate) fn reply_state(script: &'static str, reply: &mut Reply) -> Result<JobState, Error> {
    let text = reply.text()?;
    text.parse().map_err(|_| Error::Protocol {
        script,
        detail: format!("unknown state {text:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use deadpool_redis::redis::Value;

    /// A settle operation's `{'BAD_KEY', detail}` (a key that is not its
    /// job's pipeline's or resource's) becomes [`Error::ForeignKey`] naming
    /// the position, the key given and the one expected.
    #[test]
    fn an_operations_bad_key_is_a_foreign_key_error() {
        let keys = QueueKeys::new("lh", "q").unwrap();
        let detail = "KEYS[11] is lh:{q}:ready:p2, not lh:{q}:ready:p";
        let mut reply = Reply::new(
            "settle",
            Value::Array(vec![Value::BulkString(detail.as_bytes().to_vec())]),
        )
        .unwrap();
        match refusal(
            &keys,
            "settle",
            Op::Finish,
            "j1",
            None,
            "BAD_KEY",
            &mut reply,
        ) {
            Error::ForeignKey {
                position,
                key,
                expected,
            } => {
                assert_eq!(position, 11);
                assert_eq!(key, "lh:{q}:ready:p2");
                assert_eq!(expected, "lh:{q}:ready:p");
            }
            other => panic!("{other:?}"),
        }
    }
}
