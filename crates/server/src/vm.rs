//! `--isolation vm`: each worker's procedure process in a KVM guest of its own.
//!
//! ```text
//!   worker thread ── Unix socket ── QEMU (KVM) ── virtio-serial port ── glass guest (in the VM)
//! ```
//!
//! The host starts `qemu-system-x86_64` from Debian's packages with a Debian kernel
//! (`bench/vm/prepare.sh` fetches it, with the virtio modules the guest needs, into
//! [`default_guest_dir`]) and an initramfs Glass writes itself: this very binary, stripped,
//! the shared libraries it links, and the kernel's virtio modules. The kernel runs the binary
//! as its init (`rdinit=/glass -- guest ...`); [`enter_guest`] mounts `/dev`, `/proc` and
//! `/sys`, loads the modules, finds the port, and forks the procedure process, which then
//! shuts itself in as a `process` guest does (address-space limit, seccomp allow-list) and
//! serves the host over the port. The init waits for it, writes how it ended to the console
//! (which the host keeps as the guest's stderr) and powers the machine off, so the host sees
//! the channel close as it sees a process exit.
//!
//! Three channels. Two end on the host in a Unix socket the worker listens on and QEMU
//! connects to, over which frames cross as they do over `uds`; the third is memory the worker
//! and the guest share, polled by both as `shm-poll` is between processes:
//!
//! | channel  | in the guest | through |
//! |----------|--------------|---------|
//! | `virtio` | a virtio-serial port (`/dev/vportNpM`, named `glass`) | QEMU's virtio-serial device |
//! | `tcp`    | a TCP connection to [`GUEST_FORWARD`], over the guest's own network stack and a virtio NIC | QEMU's user-mode network (slirp), which forwards that address to the socket (`guestfwd`): the paper's `vm tcp`, with a user-space TCP on the host's side instead of the host kernel's bridge |
//! | `shm-poll` | the BAR of a shared-memory PCI device, mapped from sysfs (`/sys/bus/pci/devices/…/resource2`) | QEMU's `ivshmem-plain`, backed by the worker's region file (`share=on`): the paper's `vm_shm`; no QEMU code on a message's path, only the two sides' polling |

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::isolation::Channel;

/// The virtio modules the guest's kernel loads, in dependency order (a kernel with them built
/// in needs none of the files): the PCI transport, the serial port, the network card.
pub const MODULES: [&str; 9] = [
    "virtio_ring",
    "virtio",
    "virtio_pci_legacy_dev",
    "virtio_pci_modern_dev",
    "virtio_pci",
    "virtio_console",
    "failover",
    "net_failover",
    "virtio_net",
];

/// Where a guest on channel `tcp` connects: an address of QEMU's user-mode network that it
/// forwards to the worker's socket.
pub const GUEST_FORWARD: &str = "10.0.2.100:7000";

/// The guest's own address on that network (QEMU's user-mode default), and its mask.
const GUEST_ADDRESS: [u8; 4] = [10, 0, 2, 15];
const GUEST_NETMASK: [u8; 4] = [255, 255, 255, 0];

/// The name of the virtio-serial port the guest finds its host on.
pub const PORT: &str = "glass";

/// QEMU's inter-VM shared-memory device (`ivshmem-plain`), as PCI vendor and device ids.
const IVSHMEM: (&str, &str) = ("0x1af4", "0x1110");

/// Where a guest's channel leaves its VM (the host's side of [`Vm::command`]).
#[derive(Clone, Copy, Debug)]
pub enum Link<'a> {
    /// A virtio-serial port whose host end connects to this Unix socket (`virtio`).
    Serial(&'a Path),
    /// The guest's own TCP over a virtio NIC, forwarded to this Unix socket (`tcp`).
    Network(&'a Path),
    /// A shared-memory PCI device backed by this region file, whose size is a power of two
    /// (`shm-poll`).
    Memory(&'a Path),
}

/// The VMM, looked up on `PATH`.
pub const QEMU: &str = "qemu-system-x86_64";

/// The guest's memory beyond its procedure process's limit: the kernel, and the initramfs
/// (the binary and its libraries) unpacked in RAM.
const OVERHEAD_MIB: u64 = 320;

/// Where `bench/vm/prepare.sh` puts the guest kernel by default: `$GLASS_VM_GUEST`, else
/// `target/vm-guest` under the current directory.
pub fn default_guest_dir() -> PathBuf {
    std::env::var_os("GLASS_VM_GUEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/vm-guest"))
}

/// What runs the guest's instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// The processor, through KVM: the paper's configuration.
    Kvm,
    /// QEMU's own translator (TCG), in software: the same boundary and the same containment,
    /// for a machine without a usable KVM, and many times slower to run the procedure's code.
    Tcg,
}

impl std::str::FromStr for Accel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "kvm" => Ok(Accel::Kvm),
            "tcg" => Ok(Accel::Tcg),
            _ => Err(format!(
                "the VM's accelerator must be kvm or tcg, not {s:?}"
            )),
        }
    }
}

impl std::fmt::Display for Accel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        })
    }
}

/// What a server needs to start guests in VMs, each part checked.
#[derive(Clone, Debug)]
pub struct Vm {
    pub qemu: PathBuf,
    /// Holds `vmlinuz` and `modules/NAME.ko` ([`MODULES`]).
    pub guest_dir: PathBuf,
    pub accel: Accel,
}

impl Vm {
    /// Checks that this machine can run `vm` guests from `guest_dir`: `/dev/kvm` opens for
    /// reading and writing, QEMU is installed, and the kernel is there. The error names what is
    /// missing and how to get it.
    pub fn find(guest_dir: &Path, accel: Accel) -> Result<Vm, String> {
        if accel == Accel::Kvm {
            if let Err(e) = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/kvm")
            {
                return Err(format!(
                    "isolation level vm needs KVM, and /dev/kvm does not open ({e}): this \
                     machine cannot run a virtual machine at hardware speed (--vm-accel tcg \
                     emulates one in software)"
                ));
            }
        }
        let qemu = find_on_path(QEMU).ok_or_else(|| {
            format!(
                "isolation level vm needs {QEMU} (Debian: apt-get install \
                 qemu-system-x86, or run bench/vm/prepare.sh)"
            )
        })?;
        let kernel = guest_dir.join("vmlinuz");
        if !kernel.is_file() {
            return Err(format!(
                "isolation level vm needs a guest kernel, and {} is not there: run \
                 bench/vm/prepare.sh (it fetches Debian's kernel into target/vm-guest) or pass \
                 --vm-guest DIR",
                kernel.display()
            ));
        }
        Ok(Vm {
            qemu,
            guest_dir: guest_dir.to_path_buf(),
            accel,
        })
    }

    /// The longest a guest may take to boot and answer its setup: seconds under KVM (30 s
    /// allowed), some eight here under emulation, and more on a loaded machine (120 s
    /// allowed).
    pub fn boot_budget(&self) -> Duration {
        match self.accel {
            Accel::Kvm => Duration::from_secs(30),
            Accel::Tcg => Duration::from_secs(120),
        }
    }

    /// The QEMU command for one guest: `program` (this binary) as the VM's init with `args`
    /// (`guest ...`), its channel leaving the VM through `link`, and memory for a procedure
    /// process limited to `memory_mib`. Its standard output is the guest's console.
    pub fn command(
        &self,
        initrd: &Path,
        link: Link<'_>,
        memory_mib: u64,
        args: &[String],
    ) -> Result<Command, String> {
        let mut append = String::from("console=ttyS0 quiet loglevel=0 panic=-1 rdinit=/glass --");
        for arg in args {
            append.push(' ');
            append.push_str(arg);
        }
        let mut command = Command::new(&self.qemu);
        command
            .args(match self.accel {
                Accel::Kvm => ["-accel", "kvm", "-cpu", "host"],
                Accel::Tcg => ["-accel", "tcg", "-cpu", "max"],
            })
            .args(["-smp", "1"])
            .args(["-m", &(memory_mib + OVERHEAD_MIB).to_string()])
            .args(["-nodefaults", "-no-user-config", "-no-reboot"])
            .args(["-display", "none", "-serial", "stdio"])
            .arg("-kernel")
            .arg(self.guest_dir.join("vmlinuz"))
            .arg("-initrd")
            .arg(initrd)
            .args(["-append", &append]);
        match link {
            Link::Network(socket) => {
                // No route out: only the forwarded address answers.
                let (ip, port) = GUEST_FORWARD.split_once(':').expect("address:port");
                command
                    .arg("-netdev")
                    .arg(format!(
                        "user,id=net,restrict=on,guestfwd=tcp:{ip}:{port}-unix:{}",
                        socket.display()
                    ))
                    .args(["-device", "virtio-net-pci,netdev=net"]);
            }
            Link::Serial(socket) => {
                command
                    .args(["-device", "virtio-serial-pci,id=vs"])
                    .arg("-chardev")
                    .arg(format!("socket,id=port,path={}", socket.display()))
                    .args([
                        "-device",
                        &format!("virtserialport,bus=vs.0,chardev=port,name={PORT}"),
                    ]);
            }
            Link::Memory(region) => {
                let size = std::fs::metadata(region)
                    .map_err(|e| format!("read {}: {e}", region.display()))?
                    .len();
                if !size.is_power_of_two() {
                    return Err(format!(
                        "{} is {size} bytes: a VM's shared memory must be a power of two",
                        region.display()
                    ));
                }
                command
                    .arg("-object")
                    .arg(format!(
                        "memory-backend-file,id=glassmem,share=on,mem-path={},size={size}",
                        region.display()
                    ))
                    .args(["-device", "ivshmem-plain,memdev=glassmem"]);
            }
        }
        Ok(command)
    }

    /// The guest's initramfs for `program`, written once into the guest directory and reused
    /// while the program and the modules are unchanged (its name carries the program's size
    /// and time, and the modules' sizes).
    pub fn initramfs(&self, program: &Path) -> Result<PathBuf, String> {
        let meta =
            std::fs::metadata(program).map_err(|e| format!("read {}: {e}", program.display()))?;
        let stamp = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let modules: u64 = MODULES
            .iter()
            .filter_map(|m| {
                let path = self.guest_dir.join("modules").join(format!("{m}.ko"));
                std::fs::metadata(path).ok().map(|m| m.len())
            })
            .sum();
        let path = self
            .guest_dir
            .join(format!("initramfs-{}-{stamp}-{modules}.cpio", meta.len()));
        if path.is_file() {
            return Ok(path);
        }
        let partial = self.guest_dir.join(format!(
            "initramfs.partial-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let written =
            write_initramfs(program, &self.guest_dir.join("modules"), &partial).and_then(|()| {
                std::fs::rename(&partial, &path)
                    .map_err(|e| format!("rename {}: {e}", partial.display()))
            });
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
            return written.map(|()| path);
        }
        // Those of earlier builds of the program go (one in use stays open until its VM ends).
        let name = path.file_name().map(|n| n.to_string_lossy().to_string());
        for old in std::fs::read_dir(&self.guest_dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let old_name = old.file_name().to_string_lossy().to_string();
            if old_name.starts_with("initramfs-") && Some(&old_name) != name.as_ref() {
                let _ = std::fs::remove_file(old.path());
            }
        }
        Ok(path)
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// One file of the initramfs: where it goes, and its bytes.
struct Entry {
    name: String,
    mode: u32,
    data: Vec<u8>,
}

/// Writes the initramfs (`newc` cpio): `/glass` (the program, stripped of debug information
/// where `strip` is installed), the shared libraries `ldd` names at their own paths, the
/// modules found in `modules`, the directories the init mounts on, and `/dev/console` for the
/// init's standard streams.
fn write_initramfs(program: &Path, modules: &Path, out: &Path) -> Result<(), String> {
    let mut files = vec![Entry {
        name: "glass".to_string(),
        mode: 0o100_755,
        data: stripped(program)?,
    }];
    for library in libraries(program)? {
        let data =
            std::fs::read(&library).map_err(|e| format!("read {}: {e}", library.display()))?;
        files.push(Entry {
            name: library
                .to_string_lossy()
                .trim_start_matches('/')
                .to_string(),
            mode: 0o100_755,
            data,
        });
    }
    for module in MODULES {
        let path = modules.join(format!("{module}.ko"));
        if let Ok(data) = std::fs::read(&path) {
            files.push(Entry {
                name: format!("modules/{module}.ko"),
                mode: 0o100_644,
                data,
            });
        }
    }
    let mut dirs: Vec<String> = ["dev", "proc", "sys", "tmp", "modules"]
        .iter()
        .map(|d| d.to_string())
        .collect();
    for file in &files {
        let mut parent = Path::new(&file.name).parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            dirs.push(p.to_string_lossy().to_string());
            parent = p.parent();
        }
    }
    dirs.sort();
    dirs.dedup();
    let file = std::fs::File::create(out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let io = |e: std::io::Error| format!("write {}: {e}", out.display());
    let mut ino = 1;
    let mut header = |name: &str, mode: u32| {
        ino += 1;
        cpio::NewcBuilder::new(name).ino(ino).mode(mode).nlink(1)
    };
    for dir in &dirs {
        w = header(dir, 0o040_755).write(w, 0).finish().map_err(io)?;
    }
    // The console, character device 5:1, so that the init starts with standard streams.
    w = header("dev/console", 0o020_600)
        .rdev_major(5)
        .rdev_minor(1)
        .write(w, 0)
        .finish()
        .map_err(io)?;
    for file in &files {
        let mut writer = header(&file.name, file.mode).write(w, file.data.len() as u32);
        writer.write_all(&file.data).map_err(io)?;
        w = writer.finish().map_err(io)?;
    }
    let mut w = cpio::newc::trailer(w).map_err(io)?;
    w.flush().map_err(io)?;
    Ok(())
}

/// The program's bytes, without debug information where `strip` can remove it (the guest's
/// RAM holds them).
fn stripped(program: &Path) -> Result<Vec<u8>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = dir.path().join("glass");
    let ok = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&out)
        .arg(program)
        .status()
        .is_ok_and(|s| s.success());
    let from = if ok { out.as_path() } else { program };
    std::fs::read(from).map_err(|e| format!("read {}: {e}", from.display()))
}

/// The shared libraries `program` loads, the dynamic loader included, as `ldd` lists them.
fn libraries(program: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("ldd")
        .arg(program)
        .output()
        .map_err(|e| format!("run ldd on {}: {e}", program.display()))?;
    if !out.status.success() {
        // A static binary: nothing to carry.
        return Ok(Vec::new());
    }
    Ok(parse_ldd(&String::from_utf8_lossy(&out.stdout)))
}

/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` and `/lib64/ld-linux-x86-64.so.2
/// (0x...)` give their paths; the vDSO has none.
fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// In the VM, run as its init (PID 1): mounts the file systems, loads the modules, finds
/// what `channel` goes through (the port; the network card, which it brings up; the
/// shared-memory device), and forks. Returns in the child, which goes on to be the procedure
/// process; the init waits for it, says on the console how it ended, and powers the machine
/// off. Returns what the child connects to: the port's device, [`GUEST_FORWARD`], or the
/// shared memory's sysfs file.
pub fn enter_guest(channel: Channel) -> Result<String, String> {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != 1 {
        return Err(
            "a vm guest runs as its virtual machine's init (PID 1), not by hand".to_string(),
        );
    }
    for (source, target, fs) in [
        (c"devtmpfs", c"/dev", c"devtmpfs"),
        (c"proc", c"/proc", c"proc"),
        (c"sysfs", c"/sys", c"sysfs"),
    ] {
        // SAFETY: the strings are NUL-terminated; no data argument.
        if unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                fs.as_ptr(),
                0,
                std::ptr::null(),
            )
        } != 0
        {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EBUSY) {
                return Err(format!("mount {target:?}: {e}"));
            }
        }
    }
    for module in MODULES {
        load_module(Path::new(&format!("/modules/{module}.ko")))?;
    }
    let address = match channel {
        Channel::Tcp => {
            bring_up("eth0", Duration::from_secs(10))?;
            GUEST_FORWARD.to_string()
        }
        Channel::ShmPoll => find_shared_memory(Duration::from_secs(10))?
            .to_string_lossy()
            .to_string(),
        _ => find_port(PORT, Duration::from_secs(10))?
            .to_string_lossy()
            .to_string(),
    };
    // SAFETY: the init is single-threaded here, so fork is safe.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        return Ok(address);
    }
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    let mut status = 0;
    loop {
        // SAFETY: waits for any child; orphans the init inherits are reaped on the way.
        let reaped = unsafe { libc::waitpid(-1, &mut status, 0) };
        if reaped == pid {
            break;
        }
        if reaped < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            eprintln!(
                "the procedure process could not be waited for: {}",
                std::io::Error::last_os_error()
            );
            break;
        }
    }
    use std::os::unix::process::ExitStatusExt;
    let status = std::process::ExitStatus::from_raw(status);
    eprintln!(
        "the procedure process {}",
        crate::isolation::describe(Some(status))
    );
    // SAFETY: sync and reboot take no pointers; powering off ends the VM, and QEMU with it.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    std::process::exit(0);
}

/// Loads a kernel module from `path`; a missing file (the module built in) and a module
/// already loaded are fine.
fn load_module(path: &Path) -> Result<(), String> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("open {}: {e}", path.display())),
    };
    use std::os::fd::AsRawFd;
    // SAFETY: finit_module reads the open file and the empty, NUL-terminated parameter string.
    let r = unsafe { libc::syscall(libc::SYS_finit_module, file.as_raw_fd(), c"".as_ptr(), 0) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(format!("load {}: {e}", path.display()));
        }
    }
    Ok(())
}

/// Gives the network card `name` the guest's address and brings it up, once the driver has
/// created it.
fn bring_up(name: &str, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    while !Path::new("/sys/class/net").join(name).exists() {
        if Instant::now() > deadline {
            return Err(format!(
                "no network card {name} appeared within {} s",
                within.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: a datagram socket, used only for the interface ioctls below and closed after.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    let result = configure(fd, name);
    // SAFETY: closes the socket opened above.
    unsafe { libc::close(fd) };
    result
}

/// The ioctls that set `name`'s address and mask and raise its flags, on socket `fd`.
fn configure(fd: i32, name: &str) -> Result<(), String> {
    // SAFETY: an all-zero ifreq is valid; the name fits (checked) and stays NUL-terminated.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= request.ifr_name.len() {
        return Err(format!("interface name {name} is too long"));
    }
    for (to, from) in request.ifr_name.iter_mut().zip(name.bytes()) {
        *to = from as libc::c_char;
    }
    let ioctl = |request: &mut libc::ifreq, op: libc::c_ulong, what: &str| {
        // SAFETY: `request` is a valid ifreq for these interface ioctls.
        if unsafe { libc::ioctl(fd, op, request as *mut libc::ifreq) } != 0 {
            return Err(format!(
                "{what} {name}: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    };
    let inet = |octets: [u8; 4]| {
        // SAFETY: an all-zero sockaddr_in is valid; it is then filled in.
        let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from_ne_bytes(octets);
        // SAFETY: sockaddr_in and sockaddr have the same size; ifreq's field is a sockaddr.
        unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
    };
    request.ifr_ifru.ifru_addr = inet(GUEST_ADDRESS);
    ioctl(&mut request, libc::SIOCSIFADDR, "set the address of")?;
    request.ifr_ifru.ifru_netmask = inet(GUEST_NETMASK);
    ioctl(&mut request, libc::SIOCSIFNETMASK, "set the mask of")?;
    ioctl(&mut request, libc::SIOCGIFFLAGS, "read the flags of")?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { request.ifr_ifru.ifru_flags };
    request.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    ioctl(&mut request, libc::SIOCSIFFLAGS, "bring up")
}

/// The device of the virtio-serial port called `name`, once the driver has created it.
fn find_port(name: &str, within: Duration) -> Result<PathBuf, String> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(ports) = std::fs::read_dir("/sys/class/virtio-ports") {
            for port in ports.flatten() {
                let named = std::fs::read_to_string(port.path().join("name")).unwrap_or_default();
                let dev = Path::new("/dev").join(port.file_name());
                if named.trim() == name && dev.exists() {
                    return Ok(dev);
                }
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no virtio-serial port named {name} appeared within {} s",
                within.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The memory of the shared-memory PCI device ([`IVSHMEM`]): its BAR 2, as the sysfs file
/// that maps it, once the device is there, with its memory decoding turned on (no driver
/// claims the device, so nothing else would).
fn find_shared_memory(within: Duration) -> Result<PathBuf, String> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(devices) = std::fs::read_dir("/sys/bus/pci/devices") {
            for device in devices.flatten() {
                let dir = device.path();
                let id = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
                if (id("vendor").trim(), id("device").trim()) == IVSHMEM {
                    std::fs::write(dir.join("enable"), "1")
                        .map_err(|e| format!("enable {}: {e}", dir.display()))?;
                    return Ok(dir.join("resource2"));
                }
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no shared-memory device (PCI {}:{}) appeared within {} s",
                IVSHMEM.0,
                IVSHMEM.1,
                within.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_give_library_paths_and_skip_the_vdso() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n\
                    \tlibfoo.so => not found\n";
        assert_eq!(
            parse_ldd(text),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libm.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }

    #[test]
    fn the_initramfs_holds_the_program_its_libraries_the_modules_and_the_console() {
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path().join("modules");
        std::fs::create_dir(&modules).unwrap();
        std::fs::write(modules.join("virtio.ko"), b"module").unwrap();
        let program = std::env::current_exe().unwrap();
        let out = dir.path().join("initramfs.cpio");
        write_initramfs(&program, &modules, &out).unwrap();
        let mut names = Vec::new();
        let mut console = None;
        let mut file = std::io::BufReader::new(std::fs::File::open(&out).unwrap());
        loop {
            let reader = cpio::NewcReader::new(file).unwrap();
            if reader.entry().is_trailer() {
                break;
            }
            let entry = reader.entry();
            names.push(entry.name().to_string());
            if entry.name() == "dev/console" {
                console = Some((entry.mode(), entry.rdev_major(), entry.rdev_minor()));
            }
            file = reader.finish().unwrap();
        }
        for expected in ["glass", "modules/virtio.ko", "dev", "proc", "sys"] {
            assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
        }
        assert!(
            names.iter().any(|n| n.contains("libc.so")),
            "the C library: {names:?}"
        );
        assert_eq!(console, Some((0o020_600, 5, 1)));
        // Every directory comes before what it holds, as the kernel unpacks in order.
        let glass_lib = names.iter().position(|n| n.contains("libc.so")).unwrap();
        let parent = Path::new(&names[glass_lib]).parent().unwrap();
        let parent_at = names.iter().position(|n| Path::new(n) == parent).unwrap();
        assert!(parent_at < glass_lib);
    }

    #[test]
    fn shared_memory_becomes_an_ivshmem_device_of_the_regions_size() {
        let dir = tempfile::tempdir().unwrap();
        let vm = Vm {
            qemu: PathBuf::from(QEMU),
            guest_dir: dir.path().to_path_buf(),
            accel: Accel::Tcg,
        };
        let region = dir.path().join("region");
        std::fs::write(&region, vec![0u8; 1 << 16]).unwrap();
        let command = vm
            .command(
                Path::new("initrd"),
                Link::Memory(&region),
                64,
                &["guest".to_string()],
            )
            .unwrap();
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().to_string())
            .collect();
        let backend = format!(
            "memory-backend-file,id=glassmem,share=on,mem-path={},size=65536",
            region.display()
        );
        assert!(args.contains(&backend), "{args:?}");
        assert!(args.contains(&"ivshmem-plain,memdev=glassmem".to_string()));
        assert!(!args.iter().any(|a| a.contains("virtio")), "{args:?}");
        // A size the device's BAR cannot take is refused before QEMU is.
        std::fs::write(&region, vec![0u8; 3 << 12]).unwrap();
        let err = vm
            .command(Path::new("initrd"), Link::Memory(&region), 64, &[])
            .unwrap_err();
        assert!(err.contains("power of two"), "{err}");
    }

    #[test]
    fn a_machine_without_a_guest_kernel_is_refused_with_what_to_run() {
        let dir = tempfile::tempdir().unwrap();
        if let Err(e) = Vm::find(dir.path(), Accel::Tcg) {
            assert!(
                e.contains("KVM") || e.contains(QEMU) || e.contains("bench/vm/prepare.sh"),
                "{e}"
            );
        } else {
            panic!("an empty guest directory was accepted");
        }
    }
}
