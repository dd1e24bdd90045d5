//! What one crossing of a procedure channel costs by itself: a frame to a peer thread and a
//! frame back (one round trip), for each channel of `glass serve --isolation process`
//! (`shm-poll`, `shm-uds`, `uds`, `tcp` over loopback), with no encoding, no procedure and no
//! engine on either side. `glass isolation` reports the whole
//! isolation overhead of a call (its crossings, both sides' encoding and decoding, the guest's
//! wrapper); this says how much of it the channel alone is.
//!
//! Each channel is measured in both placements `glass isolation` has: `across`, the two
//! threads pinned to two CPUs (`--procedure-core` given a core of its own; `shm-poll` spins on
//! both sides), and `shared`, both on the first (the guest on its worker's core; `shm-poll`
//! then does not spin, as [`server::isolation::spin_for`] decides). The CPUs are 0 and 1, or
//! the two named by `CROSSING_CPUS` (say `0,2` on a machine whose CPU 1 is CPU 0's sibling).
//!
//!   cargo bench -p server --bench crossing
//!   CROSSING_CPUS=0,2 target/release/deps/crossing-HASH --bench     (a built copy elsewhere)

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use protocol::shm::Region;
use server::isolation::{shm_send, shm_wait, spin_for};

/// Frame sizes: a small operation (a key out) and a YCSB row back (ten 100-byte fields).
const SIZES: [usize; 2] = [32, 1100];

/// The two CPUs of the `across` placement: 0 and 1, or `CROSSING_CPUS`; none where the machine
/// has one CPU. A CPU the machine does not have ends the run with a message.
fn cpus() -> Option<(usize, usize)> {
    // The machine's CPUs, not this thread's affinity (which a pinned parent passes on).
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    let Ok(named) = std::env::var("CROSSING_CPUS") else {
        return (online > 1).then_some((0, 1));
    };
    let parsed = named.split_once(',').and_then(|(a, b)| {
        Some((
            a.trim().parse::<usize>().ok()?,
            b.trim().parse::<usize>().ok()?,
        ))
    });
    match parsed {
        Some((a, b)) if a < online && b < online && a != b => Some((a, b)),
        _ => {
            eprintln!("CROSSING_CPUS={named}: want two different CPUs below {online}, as in 0,2");
            std::process::exit(2)
        }
    }
}

/// Where the host (this thread) and the echoing peer run, and how long `shm-poll` spins.
#[derive(Clone, Copy)]
struct Placement {
    name: &'static str,
    host: usize,
    peer: usize,
    spin: Duration,
}

fn placements() -> Vec<Placement> {
    let (host, peer) = cpus().unwrap_or((0, 0));
    let mut places = vec![Placement {
        name: "shared",
        host,
        peer: host,
        spin: spin_for(&[host], Some(host)),
    }];
    if host != peer {
        places.insert(
            0,
            Placement {
                name: "across",
                host,
                peer,
                spin: spin_for(&[host], Some(peer)),
            },
        );
    }
    places
}

/// Pins the calling thread to `cpu` (one [`cpus`] checked the machine has).
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes within it for a cpu
    // below CPU_SETSIZE; sched_setaffinity reads `size_of` bytes of it.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(pinned, 0, "pin a thread to CPU {cpu}");
}

fn shm_poll(c: &mut Criterion) {
    shared_memory(c, false);
}

fn shm_uds(c: &mut Criterion) {
    shared_memory(c, true);
}

/// `shm-poll` (`wake` false: both sides poll the sequence numbers) or `shm-uds` (`wake`
/// true: the frame in shared memory, a byte on a Unix socket pair to wake the peer, which
/// sleeps in its read).
fn shared_memory(c: &mut Criterion, wake: bool) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("crossing.shm");
    let region = std::sync::Arc::new(Region::create(&path, 1, 4096).expect("a region"));
    let name = if wake { "shm-uds" } else { "shm-poll" };
    let mut group = c.benchmark_group(format!("{name} round trip"));
    for place in placements() {
        // shm-uds never spins: it sleeps in the socket's read.
        let spin = if wake { Duration::ZERO } else { place.spin };
        for size in SIZES {
            region.request_seq(0).store(0, Ordering::Relaxed);
            region.response_seq(0).store(0, Ordering::Relaxed);
            let (mut host_wake, mut peer_wake) = match wake {
                true => {
                    let (a, b) = UnixStream::pair().expect("a socket pair");
                    (Some(a), Some(b))
                }
                false => (None, None),
            };
            let echo = {
                let region = region.clone();
                std::thread::spawn(move || {
                    pin(place.peer);
                    let mut frame = Vec::new();
                    let mut seq = 0u64;
                    loop {
                        seq += 1;
                        await_frame(region.request_seq(0), seq, spin, &mut peer_wake);
                        let len = region.request_len(0).load(Ordering::Relaxed) as usize;
                        assert!(region.read(0, false, len, &mut frame));
                        if len == 0 {
                            return;
                        }
                        shm_send(&region, true, seq, &frame, peer_wake.as_mut()).expect("fits");
                    }
                })
            };
            pin(place.host);
            let request = vec![7u8; size];
            let mut reply = Vec::new();
            let mut seq = 0u64;
            group.bench_function(BenchmarkId::new(place.name, size), |b| {
                b.iter(|| {
                    seq += 1;
                    shm_send(&region, false, seq, &request, host_wake.as_mut()).expect("fits");
                    await_frame(region.response_seq(0), seq, spin, &mut host_wake);
                    let len = region.response_len(0).load(Ordering::Relaxed) as usize;
                    assert!(region.read(0, true, len, &mut reply));
                })
            });
            // An empty frame tells the echo to stop.
            shm_send(&region, false, seq + 1, &[], host_wake.as_mut()).expect("fits");
            echo.join().expect("the echo thread");
        }
    }
    group.finish();
}

/// Waits for the peer's frame numbered `seq`: on the wake-up socket where there is one (as
/// the guest and host of `shm-uds` do), else polling the sequence number.
fn await_frame(
    seq_at: &std::sync::atomic::AtomicU64,
    seq: u64,
    spin: Duration,
    wake: &mut Option<UnixStream>,
) {
    match wake {
        Some(w) => {
            let mut byte = [0u8; 1];
            w.read_exact(&mut byte).expect("the wake-up byte");
            assert_eq!(
                seq_at.load(Ordering::Acquire),
                seq,
                "woken with the frame there"
            );
        }
        None => {
            shm_wait(seq_at, seq, spin, || false);
        }
    }
}

fn unix_socket(c: &mut Criterion) {
    streams(c, "uds", || UnixStream::pair().expect("a socket pair"));
}

fn tcp(c: &mut Criterion) {
    streams(c, "tcp", || {
        // Loopback, with Nagle off on both ends, as the server's channel has it.
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let host = TcpStream::connect(listener.local_addr().unwrap()).expect("connect");
        let (peer, _) = listener.accept().expect("accept");
        host.set_nodelay(true).unwrap();
        peer.set_nodelay(true).unwrap();
        (host, peer)
    });
}

/// A channel over a byte stream (`tcp`, `uds`): the frame written, read whole by the peer,
/// written back.
fn streams<S: Read + Write + Send + 'static>(
    c: &mut Criterion,
    name: &str,
    connect: impl Fn() -> (S, S),
) {
    let mut group = c.benchmark_group(format!("{name} round trip"));
    for place in placements() {
        for size in SIZES {
            let (mut host, mut peer) = connect();
            let echo = std::thread::spawn(move || {
                pin(place.peer);
                let mut frame = vec![0u8; size];
                while peer.read_exact(&mut frame).is_ok() {
                    peer.write_all(&frame).expect("write back");
                }
            });
            pin(place.host);
            let request = vec![7u8; size];
            let mut reply = vec![0u8; size];
            group.bench_function(BenchmarkId::new(place.name, size), |b| {
                b.iter(|| {
                    host.write_all(&request).expect("write");
                    host.read_exact(&mut reply).expect("read");
                })
            });
            drop(host);
            echo.join().expect("the echo thread");
        }
    }
    group.finish();
}

criterion_group! {
    name = crossing;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = shm_poll, shm_uds, unix_socket, tcp
}
criterion_main!(crossing);
