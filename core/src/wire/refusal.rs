//! Refusals: the statuses a script answers instead of a move (`NOT_FOUND`,
//! `REFUSED`, `LOST`, `TERMINAL`, `CORRUPT`, `OP_ERROR`, `BAD_ARG`), decoded
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

/// A state named in a reply, or a protocol error of `script`.
pub(crate) fn reply_state(script: &'static str, reply: &mut Reply) -> Result<JobState, Error> {
    let text = reply.text()?;
    text.parse().map_err(|_| Error::Protocol {
        script,
        detail: format!("unknown state {text:?}"),
    })
}
