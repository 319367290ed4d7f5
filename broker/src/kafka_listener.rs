//! The Kafka listeners' sockets: the addresses every shard binds, and how each binds them.
//!
//! Every shard binds the same address with SO_REUSEPORT, so the kernel spreads new connections
//! over the shards (ARCHITECTURE.md, "A request's path", step 1). The socket also sets
//! SO_REUSEADDR, as Kafka's acceptor does: connections that this port served (the broker's, or
//! anything's that closed them first) linger in TIME_WAIT for a minute after their process is
//! gone, and without SO_REUSEADDR they refuse the bind of a broker restarting on its port.

use std::net::{SocketAddr, TcpListener as StdTcpListener, ToSocketAddrs};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::config::{BrokerConfig, Listener};

/// A client listener: its index in `listeners` (and in `listener_security`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerId(pub usize);

/// The name of client listener `id` (as in `listeners`).
pub fn name_of(config: &BrokerConfig, id: ListenerId) -> &str {
    &config.listeners[id.0].name
}

/// The listener brokers reach each other on (`inter.broker.listener.name`): every broker of a
/// cluster has it, so brokers are counted there.
pub fn inter_broker_name(config: &BrokerConfig) -> &str {
    config
        .cluster
        .as_ref()
        .map_or("PLAINTEXT", |c| c.replication.inter_broker_listener_name.as_str())
}

/// How long start-up waits for a busy Kafka port to be released.
const PORT_RELEASE_WAIT: Duration = Duration::from_secs(30);
/// Connections the kernel queues per shard before the shard accepts them (capped by
/// `net.core.somaxconn`).
const ACCEPT_BACKLOG: i32 = 1024;

/// Every client listener's address, in the order of `listeners`. Port 0 picks a free port
/// once, so every shard binds the same.
pub fn resolve_addrs(config: &BrokerConfig) -> anyhow::Result<Vec<SocketAddr>> {
    anyhow::ensure!(!config.listeners.is_empty(), "listeners is empty");
    config.listeners.iter().map(resolve_addr).collect()
}

fn resolve_addr(listener: &Listener) -> anyhow::Result<SocketAddr> {
    let mut addr = (listener.host.as_str(), listener.port)
        .to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("listeners: cannot resolve {}: {e}", listener.host))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("listeners: {} resolves to nothing", listener.host))?;
    if addr.port() == 0 {
        let probe = StdTcpListener::bind(addr)?;
        addr.set_port(probe.local_addr()?.port());
        return Ok(addr);
    }
    refuse_a_port_in_use(addr)?;
    Ok(addr)
}

/// One shard's listener on `addr` (see the module comment for its options).
pub fn bind(addr: SocketAddr) -> std::io::Result<glommio::net::TcpListener> {
    Ok(laminar_sys::glommio::tcp_listener(listening_socket(addr)?))
}

fn listening_socket(addr: SocketAddr) -> std::io::Result<StdTcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(ACCEPT_BACKLOG)?;
    Ok(socket.into())
}

/// The shards bind with SO_REUSEPORT, which would silently share a port that another process
/// listens on. A plain bind tells a free port; when it fails, the port may still be free to us:
/// a killed broker's listeners live on until the kernel has torn down its io_uring rings. So a
/// port counts as taken only while something accepts connections on it, and that is given a
/// while to go away before start-up gives up.
fn refuse_a_port_in_use(addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + PORT_RELEASE_WAIT;
    loop {
        match StdTcpListener::bind(addr) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() != std::io::ErrorKind::AddrInUse => {
                anyhow::bail!("listeners: cannot listen on {addr}: {e}")
            }
            Err(e) => {
                let listened =
                    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok();
                if !listened {
                    return Ok(());
                }
                if std::time::Instant::now() >= deadline {
                    anyhow::bail!("listeners: cannot listen on {addr}: {e} (another process accepts on it)");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// A port whose server side closed a connection first, leaving it in TIME_WAIT, as the
    /// admin port of a broker that answered `/metrics` does after the broker is gone.
    fn port_with_a_connection_in_time_wait() -> SocketAddr {
        let served = StdTcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = served.local_addr().expect("local addr");
        let mut client = std::net::TcpStream::connect(addr).expect("connect");
        let (server_side, _) = served.accept().expect("accept");
        drop(server_side);
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).expect("read to the server's FIN");
        drop(client);
        addr
    }

    #[test]
    fn a_port_with_connections_in_time_wait_is_bound_by_every_shard() {
        let addr = port_with_a_connection_in_time_wait();
        // What glommio's own bind does (SO_REUSEPORT alone) is refused there: the precondition
        // that makes this test prove something.
        let reuse_port_only = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
        reuse_port_only.set_reuse_port(true).unwrap();
        let refused = reuse_port_only
            .bind(&addr.into())
            .expect_err("TIME_WAIT blocks the bind");
        assert_eq!(refused.kind(), std::io::ErrorKind::AddrInUse);

        refuse_a_port_in_use(addr).expect("nothing accepts on the port");
        let first_shard = listening_socket(addr).expect("the first shard binds");
        let second_shard = listening_socket(addr).expect("the second shard binds beside it");
        assert_eq!(first_shard.local_addr().unwrap(), addr);
        assert_eq!(second_shard.local_addr().unwrap(), addr);
    }

    #[test]
    fn a_port_another_process_listens_on_exclusively_is_not_shared() {
        let taken = StdTcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = taken.local_addr().expect("local addr");
        let refused = listening_socket(addr).expect_err("an exclusive listener is not shared");
        assert_eq!(refused.kind(), std::io::ErrorKind::AddrInUse);
    }
}
