//! [`TcpProxy`]: a loopback TCP proxy in front of a server that can cut every
//! client behind it off from Redis (and let them back), or stall its traffic
//! (and resume it), on plain threads.

use std::collections::BTreeMap;
use std::io::{self, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::server::CONNECT_TIMEOUT;

/// A loopback TCP proxy in front of a server (usually a
/// [`RedisServer::start_tcp`](crate::RedisServer::start_tcp) one), for simulating a network cut-off between
/// one client process and Redis while others keep talking to Redis directly.
///
/// It runs on plain threads (one accept thread, two copy threads per
/// connection). [`block`](TcpProxy::block) shuts down every live connection
/// and makes the proxy close every new one as soon as it is accepted (clients
/// see the connection reset, as when a firewall rejects them);
/// [`unblock`](TcpProxy::unblock) lets new connections through again.
///
/// [`stall`](TcpProxy::stall) is the other kind of partition: every
/// connection stays open and keeps accepting bytes, but nothing is forwarded
/// either way (clients see their calls hang, not fail); new connections are
/// accepted and hang too. [`resume`](TcpProxy::resume) forwards what was held
/// and lets traffic flow again, as when a partition heals and TCP retransmits.
/// Dropping the proxy closes everything and joins its accept thread.
///
/// ```no_run
/// use leasehold_testkit::{RedisServer, TcpProxy};
///
/// let srv = RedisServer::start_tcp();
/// let proxy = TcpProxy::start(format!("127.0.0.1:{}", srv.port().unwrap()).parse().unwrap());
/// let url = proxy.url(); // give this to the process to cut off
/// proxy.block();
/// // ... the process behind the proxy cannot reach Redis ...
/// proxy.unblock();
/// proxy.stall();
/// // ... the process's calls hang: bytes go in, nothing comes back ...
/// proxy.resume();
/// ```
#[derive(Debug)]
pub struct TcpProxy {
    addr: std::net::SocketAddr,
    state: std::sync::Arc<ProxyState>,
    accept: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct ProxyState {
    blocked: std::sync::atomic::AtomicBool,
    stopping: std::sync::atomic::AtomicBool,
    next_id: std::sync::atomic::AtomicU64,
    /// Live connections: id → (client side, upstream side).
    live: Mutex<BTreeMap<u64, (std::net::TcpStream, std::net::TcpStream)>>,
    /// Whether traffic is stalled; copy threads wait on `resumed` while it is.
    stalled: Mutex<bool>,
    /// Notified when the stall ends, the proxy blocks or it stops.
    resumed: Condvar,
    /// Copies of the bytes clients sent that the current stall holds (see
    /// [`TcpProxy::held_requests`]).
    held: Mutex<Vec<u8>>,
}

impl ProxyState {
    /// Waits while traffic is stalled (and the proxy neither blocks nor stops).
    fn wait_while_stalled(&self) {
        use std::sync::atomic::Ordering;
        let mut stalled = self.stalled.lock().unwrap_or_else(|p| p.into_inner());
        while *stalled
            && !self.blocked.load(Ordering::SeqCst)
            && !self.stopping.load(Ordering::SeqCst)
        {
            stalled = self
                .resumed
                .wait(stalled)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Wakes every copy thread waiting out a stall.
    fn wake_stalled(&self) {
        let _guard = self.stalled.lock().unwrap_or_else(|p| p.into_inner());
        self.resumed.notify_all();
    }

    fn shutdown_all(&self) {
        let live = std::mem::take(&mut *self.live.lock().unwrap_or_else(|p| p.into_inner()));
        for (client, upstream) in live.into_values() {
            let _ = client.shutdown(std::net::Shutdown::Both);
            let _ = upstream.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl TcpProxy {
    /// Starts a proxy on a free port of `127.0.0.1` forwarding to `target`.
    ///
    /// # Panics
    ///
    /// If it cannot bind a port or start its thread.
    #[track_caller]
    pub fn start(target: std::net::SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("TcpProxy: cannot bind 127.0.0.1:0: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("TcpProxy: no local address: {e}"));
        let state = std::sync::Arc::new(ProxyState::default());
        let accept_state = state.clone();
        let accept = std::thread::Builder::new()
            .name("leasehold-testkit-proxy".into())
            .spawn(move || proxy_accept_loop(listener, target, accept_state))
            .unwrap_or_else(|e| panic!("TcpProxy: cannot start the accept thread: {e}"));
        TcpProxy {
            addr,
            state,
            accept: Some(accept),
        }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:PORT` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Cuts every live connection and closes new ones as soon as they are accepted.
    pub fn block(&self) {
        self.state
            .blocked
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.state.shutdown_all();
        self.state.wake_stalled();
    }

    /// Stalls all traffic: connections stay open and bytes are accepted (and
    /// held), but nothing is forwarded either way until [`resume`](TcpProxy::resume).
    pub fn stall(&self) {
        self.state
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        *self.state.stalled.lock().unwrap_or_else(|p| p.into_inner()) = true;
    }

    /// What clients sent toward the server since the last
    /// [`stall`](TcpProxy::stall) that the stall is holding (or held): a test
    /// waits on it to know a call is on its way before it acts (for example,
    /// freezes the client process while its call is in flight).
    pub fn held_requests(&self) -> Vec<u8> {
        self.state
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Ends a stall: the bytes held are forwarded and traffic flows again.
    pub fn resume(&self) {
        *self.state.stalled.lock().unwrap_or_else(|p| p.into_inner()) = false;
        self.state.resumed.notify_all();
    }

    /// Whether the proxy is stalling traffic.
    pub fn is_stalled(&self) -> bool {
        *self.state.stalled.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets new connections through again (connections cut by
    /// [`block`](TcpProxy::block) stay cut: clients reconnect).
    pub fn unblock(&self) {
        self.state
            .blocked
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the proxy is blocking.
    pub fn is_blocked(&self) -> bool {
        self.state.blocked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many proxied connections are open now.
    pub fn live_connections(&self) -> usize {
        self.state
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

impl Drop for TcpProxy {
    /// Closes every connection, stops accepting and joins the accept thread.
    fn drop(&mut self) {
        self.state
            .stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.state.shutdown_all();
        self.state.wake_stalled();
        // wake the blocking accept()
        let _ = std::net::TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

fn proxy_accept_loop(
    listener: TcpListener,
    target: std::net::SocketAddr,
    state: std::sync::Arc<ProxyState>,
) {
    use std::sync::atomic::Ordering;
    for incoming in listener.incoming() {
        if state.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = incoming else {
            continue;
        };
        if state.blocked.load(Ordering::SeqCst) {
            let _ = client.shutdown(std::net::Shutdown::Both);
            continue;
        }
        let Ok(upstream) = std::net::TcpStream::connect_timeout(&target, CONNECT_TIMEOUT) else {
            let _ = client.shutdown(std::net::Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let handles = (
            client.try_clone(),
            upstream.try_clone(),
            upstream.try_clone(),
            client.try_clone(),
        );
        let (Ok(c_read), Ok(u_write), Ok(u_read), Ok(c_write)) = handles else {
            continue;
        };
        let id = state.next_id.fetch_add(1, Ordering::SeqCst);
        {
            let mut live = state.live.lock().unwrap_or_else(|p| p.into_inner());
            // A block() may have run since the check above: do not let this one through.
            if state.blocked.load(Ordering::SeqCst) || state.stopping.load(Ordering::SeqCst) {
                let _ = client.shutdown(std::net::Shutdown::Both);
                let _ = upstream.shutdown(std::net::Shutdown::Both);
                continue;
            }
            live.insert(id, (client, upstream));
        }
        let ends = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(0));
        for (mut from, mut to, toward_server) in [(c_read, u_write, true), (u_read, c_write, false)]
        {
            let st = state.clone();
            let ends = ends.clone();
            let spawned = std::thread::Builder::new()
                .name("leasehold-testkit-proxy-copy".into())
                .spawn(move || {
                    let _ = forward(&mut from, &mut to, &st, toward_server);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                    if ends.fetch_add(1, Ordering::SeqCst) == 1 {
                        let removed = st
                            .live
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .remove(&id);
                        if let Some((client, upstream)) = removed {
                            let _ = client.shutdown(std::net::Shutdown::Both);
                            let _ = upstream.shutdown(std::net::Shutdown::Both);
                        }
                    }
                });
            if spawned.is_err() {
                state.shutdown_all();
            }
        }
    }
}

/// Copies `from` to `to` until either ends, holding each chunk read while
/// traffic is stalled (and, `toward_server`, keeping a copy of it for
/// [`TcpProxy::held_requests`]).
fn forward(
    from: &mut std::net::TcpStream,
    to: &mut std::net::TcpStream,
    state: &ProxyState,
    toward_server: bool,
) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        if toward_server && *state.stalled.lock().unwrap_or_else(|p| p.into_inner()) {
            state
                .held
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(&buf[..n]);
        }
        state.wait_while_stalled();
        to.write_all(&buf[..n])?;
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::time::Duration;

    use super::TcpProxy;
    use crate::RedisServer;

    /// Reads a reply of up to 64 bytes, or `None` if nothing came within `wait`.
    fn read_reply(conn: &mut std::net::TcpStream, wait: Duration) -> Option<String> {
        conn.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 64];
        match conn.read(&mut buf) {
            Ok(n) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(e) => panic!("read: {e}"),
        }
    }

    #[test]
    fn a_stall_holds_the_bytes_sent_and_resume_delivers_them() {
        let srv = RedisServer::start_tcp();
        let proxy = TcpProxy::start(
            format!("127.0.0.1:{}", srv.port().unwrap())
                .parse()
                .unwrap(),
        );
        let mut conn = std::net::TcpStream::connect(proxy.addr()).unwrap();
        conn.write_all(b"PING\r\n").unwrap();
        assert_eq!(
            read_reply(&mut conn, Duration::from_secs(10)).as_deref(),
            Some("+PONG\r\n")
        );

        proxy.stall();
        assert!(proxy.is_stalled());
        // the bytes are accepted (the write succeeds, the connection stays open)...
        conn.write_all(b"SET k v\r\n").unwrap();
        // ...but neither they nor a reply get through
        assert_eq!(read_reply(&mut conn, Duration::from_millis(300)), None);
        assert_eq!(
            srv.cmd(&["EXISTS", "k"]),
            deadpool_redis::redis::Value::Int(0),
            "the SET was held by the stall"
        );
        assert_eq!(proxy.live_connections(), 1);

        proxy.resume();
        assert_eq!(
            read_reply(&mut conn, Duration::from_secs(10)).as_deref(),
            Some("+OK\r\n")
        );
        conn.write_all(b"GET k\r\n").unwrap();
        assert_eq!(
            read_reply(&mut conn, Duration::from_secs(10)).as_deref(),
            Some("$1\r\nv\r\n")
        );
    }
}
