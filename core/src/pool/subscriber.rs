//! A pub/sub subscription of its own to a few channels, on one server or on a
//! Redis Cluster: the connection the worker's cancel listener reads.
//!
//! One server: a RESP2 pub/sub connection (`SUBSCRIBE`), opened from the URL.
//! A cluster: a cluster client of its own speaking RESP3, its pushes sent to
//! a channel; a node's disconnection ends the subscription, to be opened
//! afresh (redis-rs would subscribe again only once it reconnects). A
//! message published on any node of a cluster (`PUBLISH`) reaches every node,
//! so one subscription per worker hears every queue. A subscription that ends
//! (the server went away) is opened again by its owner.

use std::time::Duration;

use deadpool_redis::redis::cluster::ClusterClientBuilder;
use deadpool_redis::redis::cluster_async::ClusterConnection;
use deadpool_redis::redis::{self, aio::PubSubStream, PushInfo, PushKind, Value};
use futures_util::StreamExt;
use tokio::sync::mpsc::UnboundedReceiver;

use super::url::cluster_seed_urls;
use crate::error::{Error, Result};

/// How long opening a subscription may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);

/// One message: the channel it came on and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    /// The channel.
    pub(crate) channel: String,
    /// The payload, as text.
    pub(crate) payload: String,
}

/// An open subscription; [`Subscriber::next`] gives its messages.
pub(crate) enum Subscriber {
    /// To one server.
    Server(PubSubStream),
    /// To a cluster.
    Cluster {
        /// The connection, only held: dropping it ends the subscription.
        _conn: ClusterConnection,
        /// Its pushes.
        pushes: UnboundedReceiver<PushInfo>,
    },
}

impl Subscriber {
    /// Subscribes to `channels` on the Redis at `url` (one server or a
    /// cluster URL).
    pub(crate) async fn open(url: &str, channels: &[String]) -> Result<Self> {
        match tokio::time::timeout(OPEN_TIMEOUT, Self::open_now(url, channels)).await {
            Ok(opened) => opened,
            Err(_) => Err(Error::Timeout(OPEN_TIMEOUT)),
        }
    }

    async fn open_now(url: &str, channels: &[String]) -> Result<Self> {
        if let Some(seeds) = cluster_seed_urls(url) {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let client = ClusterClientBuilder::new(seeds?)
                .connection_timeout(OPEN_TIMEOUT)
                .response_timeout(OPEN_TIMEOUT)
                .use_protocol(redis::ProtocolVersion::RESP3)
                .push_sender(tx)
                .build()?;
            let mut conn = client.get_async_connection().await?;
            conn.subscribe(channels).await?;
            return Ok(Subscriber::Cluster {
                _conn: conn,
                pushes: rx,
            });
        }
        let client = redis::Client::open(url)?;
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channels).await?;
        Ok(Subscriber::Server(pubsub.into_on_message()))
    }

    /// The next message; `None` once the subscription ended (its server went
    /// away): open it again.
    pub(crate) async fn next(&mut self) -> Option<Message> {
        match self {
            Subscriber::Server(stream) => loop {
                let msg = stream.next().await?;
                let Ok(payload) = msg.get_payload::<String>() else {
                    continue;
                };
                return Some(Message {
                    channel: msg.get_channel_name().to_owned(),
                    payload,
                });
            },
            // a node's connection dropped: the client would subscribe again
            // only once it reconnects, which an idle connection may not do soon;
            // a subscription opened afresh is subscribed at once
            Subscriber::Cluster { pushes, .. } => loop {
                let push = pushes.recv().await?;
                if push.kind == PushKind::Disconnection {
                    return None;
                }
                if let Some(message) = message_of(push) {
                    return Some(message);
                }
            },
        }
    }
}

/// The message a push carries, if it is one (not a subscription's
/// confirmation or a disconnection).
fn message_of(push: PushInfo) -> Option<Message> {
    if push.kind != PushKind::Message {
        return None;
    }
    let mut data = push.data.into_iter();
    let channel = text(data.next()?)?;
    let payload = text(data.next()?)?;
    Some(Message { channel, payload })
}

/// A bulk or simple string as text.
fn text(value: Value) -> Option<String> {
    redis::from_redis_value::<String>(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_message_pushes_are_messages() {
        let push = |kind, data: Vec<&str>| PushInfo {
            kind,
            data: data
                .into_iter()
                .map(|s| Value::BulkString(s.as_bytes().to_vec()))
                .collect(),
        };
        assert_eq!(
            message_of(push(PushKind::Message, vec!["c", "job"])),
            Some(Message {
                channel: "c".into(),
                payload: "job".into()
            })
        );
        assert_eq!(message_of(push(PushKind::Subscribe, vec!["c", "1"])), None);
        assert_eq!(message_of(push(PushKind::Disconnection, vec![])), None);
        assert_eq!(message_of(push(PushKind::Message, vec!["c"])), None);
    }
}
