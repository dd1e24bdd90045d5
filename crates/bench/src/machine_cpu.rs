//! How much of the machine's CPU time the rest of it took while a run ran: other processes,
//! and the hypervisor's steal. On a shared machine (CI, a laptop with a browser open, a cloud
//! VM) a run's threads wait for CPUs others hold, and its figures are then the load's as much
//! as the engine's; `glass bench` says so under a run where others took a tenth or more, and
//! `glass section3`, `glass isolation` and `glass charm` in their reports.
//!
//! ```text
//!   /proc/stat "cpu" line     every CPU's time, by kind ─► busy (user … steal), total
//!   /proc/<pid>/stat          user + system time of this process, of the children it reaped
//!                             and of every live descendant (the servers and procedure
//!                             processes a command starts are its own work, not others'),
//!                             and of a server here that a run drives and its descendants
//!                             ([`Watch::start_with`], [`crate::local_server`])
//!   others' share = (Δbusy − Δours) / Δtotal      over the run, warm-up included
//! ```
//!
//! Both files count in the kernel's `USER_HZ` ticks (100 a second), so a run of a second on
//! two CPUs has about 200 ticks to share out; a short run's share is coarse. A descendant's
//! time moves into its parent's reaped-children time when it is waited for, so one that ends
//! between two samples stays counted as ours; one that ends unreaped is lost to "others".

use std::collections::{HashMap, HashSet};

/// The counters at one moment, in `USER_HZ` ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuSample {
    /// Every CPU's non-idle time: user, nice, system, irq, softirq and steal.
    busy: u64,
    /// Every CPU's time, idle and I/O wait included.
    total: u64,
    /// The CPU time of this process and its descendants ([`ProcStat::ticks`] of each).
    ours: u64,
}

/// What one `/proc/<pid>/stat` says that a sample needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ProcStat {
    pid: u32,
    ppid: u32,
    /// User and system time, its own and its reaped children's.
    ticks: u64,
}

impl ProcStat {
    /// From the text of `/proc/<pid>/stat`; `None` where it does not parse.
    fn parse(text: &str) -> Option<ProcStat> {
        let pid = text.split_whitespace().next()?.parse().ok()?;
        // After the command's name, which is in parentheses and may hold spaces and
        // parentheses of its own: state is field 3, ppid 4, utime 14, stime 15, cutime 16 and
        // cstime 17.
        let after_name = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let field = |i: usize| -> Option<u64> { fields.get(i)?.parse().ok() };
        Some(ProcStat {
            pid,
            ppid: u32::try_from(field(1)?).ok()?,
            ticks: field(11)? + field(12)? + field(13)? + field(14)?,
        })
    }
}

/// The ticks of `roots` and of every process under them in `procs`, at any depth, each
/// process once (a root under another root too).
fn tree_ticks(roots: &[u32], procs: &[ProcStat]) -> u64 {
    let mut children: HashMap<u32, Vec<&ProcStat>> = HashMap::new();
    for p in procs {
        children.entry(p.ppid).or_default().push(p);
    }
    // Each process once: the kernel's tree has no cycle, a malformed listing might.
    let mut seen = HashSet::new();
    let mut ticks = 0;
    for p in procs.iter().filter(|p| roots.contains(&p.pid)) {
        if seen.insert(p.pid) {
            ticks += p.ticks;
        }
    }
    let mut todo: Vec<u32> = roots.to_vec();
    seen.extend(roots);
    while let Some(pid) = todo.pop() {
        for child in children.get(&pid).into_iter().flatten() {
            if seen.insert(child.pid) {
                ticks += child.ticks;
                todo.push(child.pid);
            }
        }
    }
    ticks
}

/// The ids of every process `/proc` lists now (none where it cannot be read).
pub(crate) fn listed_pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
}

/// Every process `/proc` lists now (those that end while it is read are skipped).
fn processes() -> Vec<ProcStat> {
    listed_pids()
        .filter_map(|pid| {
            ProcStat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
        })
        .collect()
}

impl CpuSample {
    /// Reads the machine's counters and those of this process and its descendants; `None`
    /// where `/proc` cannot say.
    pub fn now() -> Option<CpuSample> {
        CpuSample::now_with(&[])
    }

    /// As [`CpuSample::now`], counting the processes `also` and their descendants as ours too.
    fn now_with(also: &[u32]) -> Option<CpuSample> {
        let own = ProcStat::parse(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        let mut procs = processes();
        if !procs.iter().any(|p| p.pid == own.pid) {
            procs.push(own);
        }
        let mut roots = vec![own.pid];
        roots.extend(also);
        let ours = tree_ticks(&roots, &procs);
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        CpuSample::parse(&stat, ours)
    }

    /// A sample from the text of `/proc/stat` and the ticks counted as ours.
    fn parse(stat: &str, ours: u64) -> Option<CpuSample> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let ticks: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // user nice system idle iowait irq softirq steal [guest guest_nice]: a guest's time
        // is counted in user (and nice) already.
        let field = |i: usize| ticks.get(i).copied().unwrap_or(0);
        if ticks.len() < 4 {
            return None;
        }
        let busy = field(0) + field(1) + field(2) + field(5) + field(6) + field(7);
        let total = busy + field(3) + field(4);
        Some(CpuSample { busy, total, ours })
    }

    /// The share of the machine's CPU time between `self` and `later` that others took:
    /// other processes and the hypervisor. `None` where no time passed to share.
    pub fn others_share(&self, later: &CpuSample) -> Option<f64> {
        let total = later.total.checked_sub(self.total).filter(|&t| t > 0)?;
        let busy = later.busy.saturating_sub(self.busy);
        let ours = later.ours.saturating_sub(self.ours);
        Some((busy.saturating_sub(ours) as f64 / total as f64).clamp(0.0, 1.0))
    }
}

/// The share others took between its start and [`Watch::share`]: what a run says of itself,
/// and a report made of many runs (`glass section3`, `glass isolation`, `glass charm`) of the
/// whole command.
pub struct Watch {
    start: Option<CpuSample>,
    /// Processes counted as ours besides this one's tree: a server here that a run drives.
    also: Vec<u32>,
}

impl Watch {
    pub fn start() -> Watch {
        Watch::start_with(Vec::new())
    }

    /// A watch that counts the processes `also`, and their descendants, as this command's
    /// own work: a server on this machine that a run drives ([`crate::local_server::pids`]).
    pub fn start_with(also: Vec<u32>) -> Watch {
        Watch {
            start: CpuSample::now_with(&also),
            also,
        }
    }

    /// Others' share since the start; `None` where `/proc` could not say.
    pub fn share(&self) -> Option<f64> {
        self.start
            .zip(CpuSample::now_with(&self.also))
            .and_then(|(a, b)| a.others_share(&b))
    }
}

/// The sentence a report prints where others took `share` of the CPUs while it was measured,
/// if it is worth saying.
pub fn report_note(share: f64) -> Option<String> {
    (share >= NOTE_FROM).then(|| {
        format!(
            "Other processes (and the hypervisor) took {:.0}% of the machine's CPU time while \
             this was measured (the servers and procedure processes this command started or \
             drove not counted): its figures include waiting for the CPUs they held, and are not to be \
             compared with a quiet machine's",
            100.0 * share
        )
    })
}

/// From this share of the machine's CPU time taken by others up, a run says so.
pub const NOTE_FROM: f64 = 0.10;

/// The line under a run where others took `share` of the CPUs, if it is worth saying. A
/// `durable` run's committers sleep through every force and then wait for a CPU, so it is
/// hit hardest (docs/performance.md, "Other work on the machine": one thread of durable TPC-B
/// ran a twentieth of its quiet rate beside a build), and the line says so.
pub fn note(share: f64, durable: bool) -> Option<String> {
    (share >= NOTE_FROM).then(|| {
        format!(
            "machine: other processes (and the hypervisor) took {:.0}% of the CPU time while \
             this ran, warm-up included: its figures include waiting for the CPUs they held{}",
            100.0 * share,
            if durable {
                ", after every force of the log (a durable run's commits are slowed most)"
            } else {
                ""
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  1000 10 300 5000 50 5 5 30 0 0\n\
                        cpu0 500 5 150 2500 25 2 3 15 0 0\n\
                        intr 12345\n";

    #[test]
    fn a_sample_reads_the_machine() {
        let s = CpuSample::parse(STAT, 90).unwrap();
        assert_eq!(s.busy, 1000 + 10 + 300 + 5 + 5 + 30);
        assert_eq!(s.total, s.busy + 5000 + 50);
        assert_eq!(s.ours, 90);
        assert_eq!(CpuSample::parse("intr 1\n", 90), None);
    }

    #[test]
    fn a_process_stat_gives_its_parent_and_its_time_with_its_reaped_childrens() {
        // The name holds a space and a parenthesis, as a process may call itself.
        let own = "4242 (glass (w) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 70 20 5 3 20 0 9 0";
        let p = ProcStat::parse(own).unwrap();
        assert_eq!((p.pid, p.ppid, p.ticks), (4242, 1, 70 + 20 + 5 + 3));
        assert_eq!(ProcStat::parse("4242 (glass) S 1"), None);
        assert_eq!(
            ProcStat::parse("x (glass) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14"),
            None
        );
    }

    #[test]
    fn a_tree_counts_its_descendants_at_any_depth_and_nothing_else() {
        let p = |pid, ppid, ticks| ProcStat { pid, ppid, ticks };
        let procs = [
            p(1, 0, 1_000),
            p(10, 1, 100), // this command
            p(11, 10, 40), // a server it started
            p(12, 11, 7),  // that server's procedure process
            p(13, 10, 2),  // another child
            p(20, 1, 500), // a neighbour
            p(21, 20, 50), // the neighbour's child
        ];
        assert_eq!(tree_ticks(&[10], &procs), 100 + 40 + 7 + 2);
        assert_eq!(tree_ticks(&[20], &procs), 500 + 50);
        assert_eq!(tree_ticks(&[12], &procs), 7);
        // A server of the neighbour's that this command drives counts, once, and a root under
        // another root is not counted twice.
        assert_eq!(tree_ticks(&[10, 21], &procs), 149 + 50);
        assert_eq!(tree_ticks(&[10, 11], &procs), 149);
        assert_eq!(tree_ticks(&[99], &procs), 0);
        // A process listed as its own parent, or two as each other's, do not loop.
        assert_eq!(tree_ticks(&[5], &[p(5, 5, 3)]), 3);
        assert_eq!(tree_ticks(&[5], &[p(5, 6, 3), p(6, 5, 4)]), 3 + 4);
    }

    #[test]
    fn a_child_process_s_time_is_ours_not_others() {
        let before = CpuSample::now().expect("/proc");
        // A child that does some work, then ends; left unreaped it stays listed (a zombie)
        // with its time.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .spawn()
            .expect("sh");
        let stat = format!("/proc/{}/stat", child.id());
        let child_ticks = loop {
            let text = std::fs::read_to_string(&stat).unwrap();
            if text[text.rfind(')').unwrap() + 1..]
                .trim_start()
                .starts_with('Z')
            {
                break ProcStat::parse(&text).unwrap().ticks;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert!(child_ticks > 0, "the child did no work");
        // Ended but not reaped: counted as a live descendant.
        let ended = CpuSample::now().unwrap();
        assert!(
            ended.ours - before.ours >= child_ticks,
            "{before:?} {ended:?} {child_ticks}"
        );
        // Reaped: counted in this process's children's time.
        assert!(child.wait().unwrap().success());
        let reaped = CpuSample::now().unwrap();
        assert!(
            reaped.ours - before.ours >= child_ticks,
            "{before:?} {reaped:?} {child_ticks}"
        );
    }

    /// A server here that a run drives is not the run's descendant: its time is counted as
    /// ours only when named.
    #[test]
    fn a_named_process_outside_our_tree_counts_as_ours() {
        // An orphan (its parent shell exits at once) that works, then waits to be killed.
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec sleep 30' \
                 >/dev/null 2>&1 & echo $!",
            ])
            .output()
            .expect("sh");
        let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let stat = format!("/proc/{pid}/stat");
        // Until it sleeps, its work done.
        let ticks = loop {
            let text = std::fs::read_to_string(&stat).unwrap();
            if std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with("sleep"))
            {
                break ProcStat::parse(&text).unwrap().ticks;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let plain = CpuSample::now().unwrap();
        let with = CpuSample::now_with(&[pid]).unwrap();
        // SAFETY: a plain kill(2) of the process this test started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        assert!(ticks > 0, "the orphan did no work");
        assert!(
            with.ours >= plain.ours + ticks,
            "{plain:?} {with:?} {ticks}"
        );
    }

    #[test]
    fn others_share_is_the_busy_time_that_was_not_ours() {
        let before = CpuSample {
            busy: 1_000,
            total: 4_000,
            ours: 100,
        };
        // 200 ticks passed on two CPUs: 150 busy, 90 of them ours.
        let after = CpuSample {
            busy: 1_150,
            total: 4_200,
            ours: 190,
        };
        let share = before.others_share(&after).unwrap();
        assert!((share - 0.30).abs() < 1e-9, "{share}");
        assert_eq!(before.others_share(&before), None);
        // Ours counted ahead of the machine's (the files are read one after the other).
        let skewed = CpuSample { ours: 400, ..after };
        assert_eq!(before.others_share(&skewed), Some(0.0));
    }

    #[test]
    fn a_busy_machine_is_told_an_idle_one_is_not() {
        assert_eq!(note(0.05, false), None);
        assert_eq!(note(0.05, true), None);
        let line = note(0.34, false).unwrap();
        assert!(line.contains("took 34% of the CPU time"), "{line}");
        assert!(!line.contains("force"), "{line}");
        let durable = note(0.34, true).unwrap();
        assert!(durable.starts_with(&line), "{durable}");
        assert!(
            durable.contains("after every force of the log"),
            "{durable}"
        );
    }

    #[test]
    fn a_report_says_a_busy_machine_and_not_an_idle_one() {
        assert_eq!(report_note(0.05), None);
        let line = report_note(0.5).unwrap();
        assert!(
            line.contains("took 50% of the machine's CPU time"),
            "{line}"
        );
        let watch = Watch::start();
        if let Some(share) = watch.share() {
            assert!((0.0..=1.0).contains(&share), "{share}");
        }
    }

    #[test]
    fn this_machine_can_be_sampled() {
        let before = CpuSample::now().expect("/proc/stat and /proc/self/stat");
        // Some work of our own, so that time passes on every counter.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let after = CpuSample::now().unwrap();
        assert!(after.total >= before.total && after.ours >= before.ours);
        if let Some(share) = before.others_share(&after) {
            assert!((0.0..=1.0).contains(&share), "{share}");
        }
    }
}
