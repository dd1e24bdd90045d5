//! Where a server listens and a client connects, written `HOST:PORT`, `tcp://HOST:PORT`,
//! `unix://PATH` or `shm://PATH`.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Where a server listens and a client connects: a TCP address, a Unix-domain socket's path,
/// or a shared-memory region's path (the kernel-bypass stand-in, see [`crate::shm`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(SocketAddr),
    Unix(PathBuf),
    Shm(PathBuf),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(a) => write!(f, "tcp://{a}"),
            Endpoint::Unix(p) => write!(f, "unix://{}", p.display()),
            Endpoint::Shm(p) => write!(f, "shm://{}", p.display()),
        }
    }
}

impl std::str::FromStr for Endpoint {
    type Err = String;

    /// `unix://PATH`, `shm://PATH`, `tcp://HOST:PORT` or `HOST:PORT`.
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(path) = s.strip_prefix("shm://") {
            if path.is_empty() {
                return Err("shm:// needs the shared-memory region's path".to_string());
            }
            return Ok(Endpoint::Shm(PathBuf::from(path)));
        }
        if let Some(path) = s.strip_prefix("unix://") {
            if path.is_empty() {
                return Err("unix:// needs a socket path".to_string());
            }
            return Ok(Endpoint::Unix(PathBuf::from(path)));
        }
        let addr = s.strip_prefix("tcp://").unwrap_or(s);
        use std::net::ToSocketAddrs;
        addr.to_socket_addrs()
            .map_err(|e| {
                format!("{s:?} is not an address (HOST:PORT, unix://PATH or shm://PATH): {e}")
            })?
            .next()
            .map(Endpoint::Tcp)
            .ok_or_else(|| format!("{s:?} resolves to no address"))
    }
}
