//! Why a command failed, and the exit code that says so: the mapping of core
//! errors to failures that the commands and the dashboard share.

use leasehold_core::Error;

/// Why the command failed, with its exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Exit 2: the arguments cannot work.
    Usage(String),
    /// Exit 3: the job does not exist.
    UnknownJob(String),
    /// Exit 4: the state model refuses the move.
    Refused(String),
    /// Exit 5: Redis cannot be reached.
    Unreachable(String),
    /// Exit 6: Redis refused the credentials (wrong password or user, or none given).
    AuthFailed(String),
    /// Exit 1: anything else.
    Other(String),
    /// Exit 0, silently: stdout's reader closed the pipe (`| head`); there is
    /// no one left to tell.
    Closed,
    /// Exit 130 (128 + SIGINT), silently: the operator pressed Ctrl-C to stop
    /// a command that runs until stopped (`events --follow`), as a shell
    /// reports a process that SIGINT ended.
    Interrupted,
}

impl Failure {
    /// The process exit code of this failure.
    pub(crate) fn code(&self) -> u8 {
        match self {
            Failure::Other(_) => 1,
            Failure::Usage(_) => 2,
            Failure::UnknownJob(_) => 3,
            Failure::Refused(_) => 4,
            Failure::Unreachable(_) => 5,
            Failure::AuthFailed(_) => 6,
            Failure::Closed => 0,
            Failure::Interrupted => 130,
        }
    }

    /// The message for the operator.
    pub(crate) fn message(&self) -> &str {
        match self {
            Failure::Usage(m)
            | Failure::UnknownJob(m)
            | Failure::Refused(m)
            | Failure::Unreachable(m)
            | Failure::AuthFailed(m)
            | Failure::Other(m) => m,
            Failure::Closed | Failure::Interrupted => "",
        }
    }

    /// The same failure with `extra` appended to its message.
    pub(crate) fn context(self, extra: &str) -> Failure {
        let add = |m: String| format!("{m} ({extra})");
        match self {
            Failure::Usage(m) => Failure::Usage(add(m)),
            Failure::UnknownJob(m) => Failure::UnknownJob(add(m)),
            Failure::Refused(m) => Failure::Refused(add(m)),
            Failure::Unreachable(m) => Failure::Unreachable(add(m)),
            Failure::AuthFailed(m) => Failure::AuthFailed(add(m)),
            Failure::Other(m) => Failure::Other(add(m)),
            Failure::Closed => Failure::Closed,
            Failure::Interrupted => Failure::Interrupted,
        }
    }
}

/// A command's result.
pub(crate) type Outcome<T = ()> = Result<T, Failure>;

/// Whether `e` is the state model refusing a move (as opposed to Redis or the
/// arguments failing).
pub(crate) fn is_refusal(e: &Error) -> bool {
    matches!(
        e,
        Error::Refused { .. }
            | Error::ActionRefused { .. }
            | Error::AlreadyTerminal { .. }
            | Error::LeaseLost { .. }
            | Error::InputKeyTaken { .. }
            | Error::GroupClosed { .. }
            | Error::ParentEnded { .. }
            | Error::GroupCycle { .. }
            | Error::CannotJoinGroup { .. }
    )
}

/// Whether `e` is Redis refusing the credentials (see [`Error::is_auth_failure`]).
pub(crate) fn is_auth_failure(e: &Error) -> bool {
    e.is_auth_failure()
}

/// Maps a core error to a failure and exit code.
pub(crate) fn classify(shown_url: &str, e: Error) -> Failure {
    if let Some(hint) = e.cluster_hint() {
        // "give a cluster URL" only to who did not: through a cluster URL a
        // MOVED or ASK that outlived the client's retries is a master down
        // or a slot moving
        let moved = matches!(&e, Error::Redis(re) if matches!(re.code(), Some("MOVED" | "ASK")));
        let hint = if moved && leasehold_core::is_cluster_url(shown_url) {
            "a master of the cluster is unreachable or its slots are moving: failover in \
             progress? retry in a few seconds (docs/operations.md, \"Redis Cluster\")"
        } else {
            hint
        };
        let failure = if e.is_transient() {
            Failure::Unreachable(format!("Redis at {shown_url}: {e}"))
        } else {
            Failure::Other(format!("Redis at {shown_url}: {e}"))
        };
        return failure.context(hint);
    }
    if is_auth_failure(&e) {
        return Failure::AuthFailed(format!(
            "authentication failed at {shown_url}: Redis refused the credentials \
             (check the user and password of --redis-url): {e}"
        ));
    }
    let unreachable = match &e {
        Error::Timeout(_) | Error::Pool(_) => true,
        Error::Redis(re) => {
            re.is_io_error()
                || re.is_connection_dropped()
                || re.is_connection_refusal()
                || re.is_timeout()
        }
        _ => false,
    };
    if unreachable {
        return Failure::Unreachable(format!("cannot reach Redis at {shown_url}: {e}"));
    }
    if is_refusal(&e) {
        return Failure::Refused(e.to_string());
    }
    match e {
        Error::NotFound { queue, job } => {
            Failure::UnknownJob(format!("job {job} not found in queue {queue}"))
        }
        e @ (Error::GroupNotFound { .. } | Error::ParentNotFound { .. }) => {
            Failure::UnknownJob(e.to_string())
        }
        Error::InvalidArgument(m) => Failure::Usage(m),
        e @ (Error::InvalidInput { .. }
        | Error::UnregisteredPipeline { .. }
        | Error::UnknownSchedule { .. }
        | Error::Schedule(_)) => Failure::Usage(e.to_string()),
        e @ Error::StartupUnanswered(_) => {
            Failure::Unreachable(format!("Redis at {shown_url}: {e}"))
        }
        other => Failure::Other(other.to_string()),
    }
}
