//! [`TcpProxy`]: a loopback TCP proxy in front of a server that can cut every
//! client behind it off from Redis (and let them back), on plain threads.

use std::collections::BTreeMap;
use std::io;
use std::net::TcpListener;
use std::sync::Mutex;
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
}

impl ProxyState {
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
        for (mut from, mut to) in [(c_read, u_write), (u_read, c_write)] {
            let st = state.clone();
            let ends = ends.clone();
            let spawned = std::thread::Builder::new()
                .name("leasehold-testkit-proxy-copy".into())
                .spawn(move || {
                    let _ = io::copy(&mut from, &mut to);
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
