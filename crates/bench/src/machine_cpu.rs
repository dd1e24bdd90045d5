//! How much of the machine's CPU time the rest of it took while a run ran: other processes,
//! and the hypervisor's steal. On a shared machine (CI, a laptop with a browser open, a cloud
//! VM) a run's threads wait for CPUs others hold, and its figures are then the load's as much
//! as the engine's; `glass bench` says so under a run where others took a tenth or more.
//!
//! ```text
//!   /proc/stat "cpu" line     every CPU's time, by kind ─► busy (user … steal), total
//!   /proc/self/stat           this process's user + system time, all its threads
//!   others' share = (Δbusy − Δours) / Δtotal      over the run, warm-up included
//! ```
//!
//! Both files count in the kernel's `USER_HZ` ticks (100 a second), so a run of a second on
//! two CPUs has about 200 ticks to share out; a short run's share is coarse.

/// The counters at one moment, in `USER_HZ` ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuSample {
    /// Every CPU's non-idle time: user, nice, system, irq, softirq and steal.
    busy: u64,
    /// Every CPU's time, idle and I/O wait included.
    total: u64,
    /// This process's user and system time.
    ours: u64,
}

impl CpuSample {
    /// Reads the machine's and this process's counters; `None` where `/proc` cannot say.
    pub fn now() -> Option<CpuSample> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        CpuSample::parse(&stat, &own)
    }

    /// A sample from the text of `/proc/stat` and of `/proc/self/stat`.
    fn parse(stat: &str, own: &str) -> Option<CpuSample> {
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
        // After the command's name, which is in parentheses and may hold spaces and
        // parentheses of its own: state is field 3, utime 14 and stime 15.
        let after_name = &own[own.rfind(')')? + 1..];
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        Some(CpuSample {
            busy,
            total,
            ours: utime + stime,
        })
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
    fn a_sample_reads_the_machine_and_this_process() {
        // The name holds a space and a parenthesis, as a process may call itself.
        let own = "4242 (glass (w) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 70 20 0 0 20 0 9 0";
        let s = CpuSample::parse(STAT, own).unwrap();
        assert_eq!(s.busy, 1000 + 10 + 300 + 5 + 5 + 30);
        assert_eq!(s.total, s.busy + 5000 + 50);
        assert_eq!(s.ours, 70 + 20);
        assert_eq!(CpuSample::parse("intr 1\n", own), None);
        assert_eq!(CpuSample::parse(STAT, "4242 (glass) S 1"), None);
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
