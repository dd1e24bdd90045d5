//! The processes on this machine that serve an endpoint, so that a run against a server here
//! counts the server's CPU time as its own, not as other work's ([`crate::machine_cpu`]).
//!
//! ```text
//!   tcp://HOST:PORT   /proc/net/tcp, tcp6: the socket listening on PORT at HOST (or at any
//!                     address, where HOST is a loopback one) ─► its inode
//!   unix://PATH       /proc/net/unix: the socket listening at PATH ─► its inode
//!   inode             /proc/<pid>/fd/*: the processes that hold socket:[inode]
//!   shm://PATH        /proc/<pid>/maps and fd/*: the processes other than this one that map
//!                     or hold the region's file
//! ```
//!
//! A server elsewhere is found nowhere here, and a run then gives no share (it cannot tell the
//! server's work from others'). The server's descendants (its procedure processes) are counted
//! with it by the sample.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use protocol::Endpoint;

/// A watch of others' share of the CPUs ([`crate::machine_cpu::Watch`]) that counts the
/// server at `endpoint` as this run's own work; `None` where no server here is found (a run
/// against it then gives no share).
pub fn watch(endpoint: &Endpoint) -> Option<crate::machine_cpu::Watch> {
    let pids = pids(endpoint);
    (!pids.is_empty()).then(|| crate::machine_cpu::Watch::start_with(pids))
}

/// The processes on this machine serving `endpoint` (none where no server here is found, or
/// `/proc` cannot say), this process never among them.
pub fn pids(endpoint: &Endpoint) -> Vec<u32> {
    serving(endpoint, Some(std::process::id()))
}

/// The processes serving `endpoint`, but `leave_out`.
fn serving(endpoint: &Endpoint, leave_out: Option<u32>) -> Vec<u32> {
    let mut pids = match endpoint {
        Endpoint::Tcp(addr) => {
            let inodes: Vec<u64> = ["/proc/net/tcp", "/proc/net/tcp6"]
                .iter()
                .filter_map(|f| std::fs::read_to_string(f).ok())
                .flat_map(|text| listening_tcp(&text, *addr))
                .collect();
            holding_sockets(&inodes)
        }
        Endpoint::Unix(path) => {
            let inodes = std::fs::read_to_string("/proc/net/unix")
                .map(|text| listening_unix(&text, path))
                .unwrap_or_default();
            holding_sockets(&inodes)
        }
        Endpoint::Shm(path) => {
            let region = canonical(path);
            let mut pids = holding(|link| Path::new(link) == region);
            pids.extend(mapping(&region));
            pids
        }
    };
    pids.retain(|&p| Some(p) != leave_out);
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// `path` with its links and dots resolved, where it exists.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The inodes of the sockets that `text` (of `/proc/net/tcp` or `tcp6`) lists listening
/// where a connection to `addr` on this machine would arrive.
fn listening_tcp(text: &str, addr: SocketAddr) -> Vec<u64> {
    const LISTEN: &str = "0A";
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            let (ip, port) = local.split_once(':')?;
            let (ip, port) = (kernel_ip(ip)?, u16::from_str_radix(port, 16).ok()?);
            let here = ip == addr.ip()
                || (ip.is_unspecified() && (addr.ip().is_loopback() || addr.ip().is_unspecified()));
            (*state == LISTEN && port == addr.port() && here).then(|| inode.parse().ok())?
        })
        .collect()
}

/// An address as `/proc/net/tcp*` prints it: the bytes in memory order, each 32-bit word
/// printed as a number of this machine's byte order (8 hex digits for IPv4, 32 for IPv6).
fn kernel_ip(hex: &str) -> Option<IpAddr> {
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(hex.get(8 * i..8 * i + 8)?, 16).ok()?;
        Some(w.to_ne_bytes())
    };
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(0)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[4 * i..4 * i + 4].copy_from_slice(&word(i)?);
            }
            let v6 = Ipv6Addr::from(bytes);
            // A socket bound to ::ffff:a.b.c.d listens on that IPv4 address.
            Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
        }
        _ => None,
    }
}

/// The inodes of the sockets that `text` (of `/proc/net/unix`) lists listening at `path`.
fn listening_unix(text: &str, path: &Path) -> Vec<u64> {
    // The kernel's __SO_ACCEPTCON: the socket listens.
    const ACCEPTING: u32 = 0x0001_0000;
    let wanted = canonical(path);
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (flags, inode, bound) = (fields.get(3)?, fields.get(6)?, fields.get(7)?);
            let listening = u32::from_str_radix(flags, 16).ok()? & ACCEPTING != 0;
            // Resolved only where the names match: a machine has many sockets.
            let bound = Path::new(bound);
            let at = bound == path
                || (bound.file_name() == path.file_name() && canonical(bound) == wanted);
            (listening && at).then(|| inode.parse().ok())?
        })
        .collect()
}

/// The processes holding one of the sockets `inodes`.
fn holding_sockets(inodes: &[u64]) -> Vec<u32> {
    if inodes.is_empty() {
        return Vec::new();
    }
    let links: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    holding(|link| links.iter().any(|l| l == link))
}

/// The processes with a file descriptor whose link `wanted` accepts.
fn holding(wanted: impl Fn(&str) -> bool) -> Vec<u32> {
    crate::machine_cpu::listed_pids()
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|link| link.to_str().is_some_and(&wanted))
                })
            })
        })
        .collect()
}

/// The processes that map `file`.
fn mapping(file: &Path) -> Vec<u32> {
    let Some(name) = file.to_str() else {
        return Vec::new();
    };
    crate::machine_cpu::listed_pids()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .is_ok_and(|maps| maps.lines().any(|l| l.ends_with(name)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0\n\
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 100 0 0 10 0\n\
   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0000000000000000 20 4 30 10 -1\n\
   3: 0500000A:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0000000000000000 100 0 0 10 0\n";

    #[test]
    fn a_tcp_listener_is_found_by_port_and_address() {
        let at = |s: &str| listening_tcp(TCP, s.parse().unwrap());
        // 127.0.0.1:8080 listens (its connection, in state 01, is not the listener).
        assert_eq!(at("127.0.0.1:8080"), [111]);
        // Port 22 on every address: a loopback connection reaches it.
        assert_eq!(at("127.0.0.1:22"), [222]);
        // 10.0.0.5:8081 only at that address: not from loopback, nor another host's.
        assert_eq!(at("10.0.0.5:8081"), [444]);
        assert!(at("127.0.0.1:8081").is_empty());
        // Another host's port 22 is not this machine's listener on every address.
        assert!(at("192.0.2.7:22").is_empty());
        assert!(at("127.0.0.1:9999").is_empty());
        assert!(listening_tcp("garbage\n1: zz:zz\n", "127.0.0.1:1".parse().unwrap()).is_empty());
    }

    #[test]
    fn a_kernel_address_reads_in_memory_order() {
        let ip = |b: [u8; 4]| format!("{:08X}", u32::from_ne_bytes(b));
        assert_eq!(
            kernel_ip(&ip([127, 0, 0, 1])),
            Some("127.0.0.1".parse().unwrap())
        );
        let v6 = |a: Ipv6Addr| {
            a.octets()
                .chunks(4)
                .map(|c| ip(c.try_into().unwrap()))
                .collect::<String>()
        };
        assert_eq!(
            kernel_ip(&v6(Ipv6Addr::LOCALHOST)),
            Some("::1".parse().unwrap())
        );
        assert_eq!(
            kernel_ip(&v6("::ffff:10.0.0.5".parse().unwrap())),
            Some("10.0.0.5".parse().unwrap())
        );
        assert_eq!(kernel_ip("12"), None);
    }

    #[test]
    fn a_unix_listener_is_found_by_its_path() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                    0000000000000000: 00000002 00000000 00010000 0001 01 555 /tmp/glass.sock\n\
                    0000000000000000: 00000002 00000000 00000000 0001 03 666 /tmp/glass.sock\n\
                    0000000000000000: 00000002 00000000 00010000 0001 01 777\n";
        assert_eq!(listening_unix(text, Path::new("/tmp/glass.sock")), [555]);
        assert!(listening_unix(text, Path::new("/tmp/other.sock")).is_empty());
    }

    /// What listens here is found: this test's own listeners, on TCP and on a Unix socket
    /// (found only where this process is not left out, as [`pids`] leaves it out).
    #[test]
    fn a_server_on_this_machine_is_found_and_this_process_is_left_out() {
        let own = std::process::id();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = Endpoint::Tcp(tcp.local_addr().unwrap());
        assert_eq!(serving(&at, None), [own]);
        assert!(pids(&at).is_empty(), "this process counted");
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let unix = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(serving(&Endpoint::Unix(sock.clone()), None), [own]);
        let absent = Endpoint::Unix(dir.path().join("absent.sock"));
        assert!(serving(&absent, None).is_empty());
        // Closed, nothing listens there any more.
        drop((tcp, unix));
        assert!(serving(&at, None).is_empty());
        assert!(serving(&Endpoint::Unix(sock), None).is_empty());
    }

    /// A region's server holds its file open or maps it.
    #[test]
    fn a_shared_memory_region_s_server_is_a_process_that_holds_or_maps_it() {
        let own = std::process::id();
        let dir = tempfile::tempdir().unwrap();
        let region = dir.path().join("region");
        std::fs::write(&region, [0u8; 4096]).unwrap();
        let at = Endpoint::Shm(region.clone());
        assert!(serving(&at, None).is_empty());
        let file = std::fs::File::open(&region).unwrap();
        assert_eq!(serving(&at, None), [own]);
        assert!(pids(&at).is_empty(), "this process counted");
        // Mapped, with its descriptor closed.
        // SAFETY: a private read-only mapping of a file of 4 KiB, unmapped below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        drop(file);
        assert_eq!(serving(&at, None), [own]);
        // SAFETY: the mapping made above, of that length.
        assert_eq!(unsafe { libc::munmap(map, 4096) }, 0);
        assert!(serving(&at, None).is_empty());
    }
}
