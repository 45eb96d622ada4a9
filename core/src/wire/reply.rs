//! Reading script replies without trusting their shape.

use deadpool_redis::redis::Value;

use crate::error::Error;

/// A script's reply, read item by item.
pub(crate) struct Reply {
    script: &'static str,
    items: std::vec::IntoIter<Value>,
    position: usize,
}

impl Reply {
    /// Expects an array reply.
    pub(crate) fn new(script: &'static str, value: Value) -> Result<Self, Error> {
        match value {
            Value::Array(items) => Ok(Reply {
                script,
                items: items.into_iter(),
                position: 0,
            }),
            other => Err(Error::Protocol {
                script,
                detail: format!("expected an array, got {other:?}"),
            }),
        }
    }

    fn protocol(&self, detail: String) -> Error {
        Error::Protocol {
            script: self.script,
            detail,
        }
    }

    /// Items not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.items.len()
    }

    /// The next item as text (bulk string, simple string, or integer).
    pub(crate) fn text(&mut self) -> Result<String, Error> {
        self.position += 1;
        match self.items.next() {
            Some(Value::BulkString(bytes)) => String::from_utf8(bytes)
                .map_err(|_| self.protocol(format!("item {} is not UTF-8", self.position))),
            Some(Value::SimpleString(s)) => Ok(s),
            Some(Value::Int(i)) => Ok(i.to_string()),
            Some(Value::Okay) => Ok("OK".to_owned()),
            Some(other) => Err(self.protocol(format!("item {} is {other:?}", self.position))),
            None => Err(self.protocol(format!("missing item {}", self.position))),
        }
    }

    /// The next item as a number.
    pub(crate) fn int<T: std::str::FromStr>(&mut self) -> Result<T, Error> {
        let text = self.text()?;
        text.parse()
            .map_err(|_| self.protocol(format!("item {} is not a number: {text:?}", self.position)))
    }

    /// The next `n` items (fewer at the end) as a reply of their own.
    pub(crate) fn take(&mut self, n: usize) -> Reply {
        let items: Vec<Value> = self.items.by_ref().take(n).collect();
        self.position += items.len();
        Reply {
            script: self.script,
            items: items.into_iter(),
            position: 0,
        }
    }

    /// The next item as text, without consuming it (`None` if it is not text).
    pub(crate) fn peek_text(&self) -> Option<String> {
        match self.items.as_slice().first() {
            Some(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
            Some(Value::SimpleString(s)) => Some(s.clone()),
            Some(Value::Int(i)) => Some(i.to_string()),
            _ => None,
        }
    }

    /// The next item as text; `None` when empty.
    pub(crate) fn opt_text(&mut self) -> Result<Option<String>, Error> {
        let text = self.text()?;
        Ok(if text.is_empty() { None } else { Some(text) })
    }
}
