//! The dashboard session: an operator logs in once with the dashboard token and
//! a name (`/login`, see `login`), and gets a cookie naming a random session
//! id (32 random bytes, hex) that this process keeps in memory with the
//! operator's name, a CSRF value and an expiry (`--session-hours`, 8 by
//! default). The cookie is `HttpOnly`, `SameSite=Strict`, `Path=/`, with
//! `Max-Age`, and `Secure` as `--cookie-secure` says (`auto`: when the request
//! came through an https proxy, `X-Forwarded-Proto: https`, or the dashboard
//! is bound to a non-loopback address). Restarting the dashboard forgets
//! every session (operators log in again); several dashboard processes
//! behind one name need sticky sessions.
//!
//! Also the [`Token`] the dashboard was started with. The request's session
//! is handed to the handlers and the page layout as a task-local
//! [`current`] (set by `auth`'s layer): who is logged in, the CSRF value the
//! forms render, and whether this request's CSRF value was checked.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, HeaderValue};
use subtle::ConstantTimeEq;

use super::error::DashError;
use crate::grammar::CookieSecure;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "leasehold_session";
/// Most sessions kept; the oldest goes when a login would exceed it.
const MAX_SESSIONS: usize = 10_000;

/// One logged-in operator.
#[derive(Debug, Clone)]
pub(super) struct Session {
    /// The name given at login.
    pub operator: String,
    /// The session's CSRF value.
    pub csrf: String,
    expires: Instant,
}

/// The sessions of this dashboard process.
#[derive(Debug)]
pub(crate) struct Sessions {
    ttl: Duration,
    secure: CookieSecure,
    non_loopback: bool,
    map: Mutex<HashMap<String, Session>>,
}

/// What a request knows of its session (see [`current`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Current {
    /// The operator logged in, if any.
    pub operator: Option<String>,
    /// The session's CSRF value, which forms render.
    pub csrf: Option<String>,
    /// This request carried the right CSRF value with its session: it may act.
    pub checked: bool,
}

tokio::task_local! {
    /// The session of the request being handled.
    pub(super) static CURRENT: Current;
}

/// The session of the request being handled (none outside a request).
pub(crate) fn current() -> Current {
    CURRENT.try_with(Current::clone).unwrap_or_default()
}

/// The secret that enables actions.
pub(crate) struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(****)")
    }
}

impl Token {
    /// Checks a configured token: not empty, no spaces or control characters.
    pub(crate) fn new(token: &str) -> Result<Token, String> {
        if token.is_empty() {
            return Err("the dashboard token must not be empty".into());
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("the dashboard token must not contain spaces or control characters".into());
        }
        Ok(Token(token.as_bytes().to_vec()))
    }

    /// Whether `given` is the token, in time independent of where they differ.
    /// (The length may leak; the content does not.)
    pub(crate) fn matches(&self, given: &str) -> bool {
        bool::from(self.0.as_slice().ct_eq(given.as_bytes()))
    }
}

/// `n` random bytes as hex.
fn random_hex(n: usize) -> Result<String, DashError> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf)
        .map_err(|e| DashError::Internal(format!("no randomness for a session id: {e}")))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sessions {
    /// Sessions lasting `ttl`, cookies marked as `secure` says.
    pub(crate) fn new(ttl: Duration, secure: CookieSecure, non_loopback: bool) -> Sessions {
        Sessions {
            ttl,
            secure,
            non_loopback,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// How long a session lasts.
    pub(super) fn ttl(&self) -> Duration {
        self.ttl
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // a panic while holding the map cannot leave it inconsistent (single inserts/removes)
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new session of `operator`: its id.
    pub(super) fn create(&self, operator: &str) -> Result<String, DashError> {
        let id = random_hex(32)?;
        let session = Session {
            operator: operator.to_owned(),
            csrf: random_hex(32)?,
            expires: Instant::now() + self.ttl,
        };
        let mut map = self.lock();
        let now = Instant::now();
        map.retain(|_, s| s.expires > now);
        if map.len() >= MAX_SESSIONS {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(id.clone(), session);
        Ok(id)
    }

    /// The live session `id`.
    pub(super) fn get(&self, id: &str) -> Option<Session> {
        let mut map = self.lock();
        match map.get(id) {
            Some(s) if s.expires > Instant::now() => Some(s.clone()),
            Some(_) => {
                map.remove(id);
                None
            }
            None => None,
        }
    }

    pub(super) fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Whether the cookie of a response to a request with `headers` is `Secure`.
    fn secure(&self, headers: &HeaderMap) -> bool {
        match self.secure {
            CookieSecure::Always => true,
            CookieSecure::Never => false,
            CookieSecure::Auto => {
                self.non_loopback
                    || headers
                        .get("x-forwarded-proto")
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
            }
        }
    }

    /// The `Set-Cookie` value for session `id` (`None`: clear the cookie).
    pub(super) fn cookie(&self, headers: &HeaderMap, id: Option<&str>) -> HeaderValue {
        let secure = if self.secure(headers) { "; Secure" } else { "" };
        let text = match id {
            Some(id) => format!(
                "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
                self.ttl.as_secs()
            ),
            None => format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
        };
        // hex ids and fixed text only: always a valid header value
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(super) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_owned())
}

/// The session id in the request's `Cookie` headers.
pub(super) fn cookie_id(headers: &HeaderMap) -> Option<String> {
    cookie(headers, COOKIE).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        let t = Token::new("s3cret-token").unwrap();
        assert!(t.matches("s3cret-token"));
        assert!(!t.matches("s3cret-tokeN"));
        assert!(!t.matches("s3cret-toke"));
        assert!(!t.matches("s3cret-token2"));
        assert!(!t.matches(""));
        assert!(Token::new("").is_err());
        assert!(Token::new("a b").is_err());
        assert_eq!(format!("{t:?}"), "Token(****)");
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; leasehold_session=abc ; b=2"),
        );
        assert_eq!(cookie_id(&h), Some("abc".into()));
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("leasehold_session="),
        );
        assert_eq!(cookie_id(&h), None);
    }

    #[test]
    fn sessions_expire_and_cookies_say_so() {
        let s = Sessions::new(Duration::from_secs(3600), CookieSecure::Auto, false);
        let id = s.create("alice").unwrap();
        assert_eq!(id.len(), 64);
        assert_eq!(s.get(&id).unwrap().operator, "alice");
        let h = HeaderMap::new();
        let c = s.cookie(&h, Some(&id));
        let c = c.to_str().unwrap();
        assert!(
            c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Max-Age=3600")
        );
        assert!(!c.contains("Secure"));
        let mut https = HeaderMap::new();
        https.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert!(s
            .cookie(&https, Some(&id))
            .to_str()
            .unwrap()
            .ends_with("; Secure"));
        s.remove(&id);
        assert!(s.get(&id).is_none());
        let short = Sessions::new(Duration::ZERO, CookieSecure::Always, false);
        let id = short.create("bob").unwrap();
        assert!(short.get(&id).is_none(), "expired at once");
        assert!(short
            .cookie(&h, None)
            .to_str()
            .unwrap()
            .contains("Max-Age=0; Secure"));
    }
}
