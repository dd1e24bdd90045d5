//! How this machine's idle CPUs wait, recorded with every run because a run's wake-ups pay
//! for it.
//!
//! A thread that sleeps (a committer waiting for its group's force, a lock waiter, a force's
//! own `fdatasync`) is woken on a CPU that may have gone idle meanwhile. On a virtual machine
//! whose `cpuidle` driver is `haltpoll` with `guest_halt_poll_ns` at 0, an idle vCPU halts at
//! once and the hypervisor takes some 30 µs to run it again: on the 2-core machine these
//! figures come from, durable TPC-B ran 6,700–7,100 txn/s on one thread and 27,000–28,100 on
//! eight with halting at once, 9,000–9,700 and 35,400–36,900 with 200 µs of polling first,
//! the same binary in interleaved rounds (docs/performance.md, "What an idle vCPU costs a
//! durable run"); a Unix socket's round trip between two vCPUs took 61 µs against 14. Glass
//! changes nothing here; `glass bench`, `scale`, `isolation` and `section3` record the setting
//! in their JSON so that figures from two machines can be told apart, and say so in their
//! reports where it costs.

use std::path::Path;

use serde::Serialize;

/// The idle policy read from sysfs; a field is `None` where the file is missing or unreadable.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuIdle {
    /// `cpuidle`'s driver (`haltpoll`, `intel_idle`, `acpi_idle`, ...).
    pub driver: Option<String>,
    /// `cpuidle`'s governor (`haltpoll`, `menu`, `teo`, ...).
    pub governor: Option<String>,
    /// The `haltpoll` driver's `guest_halt_poll_ns`: how long an idle vCPU polls before it
    /// halts (where the module is loaded).
    pub halt_poll_ns: Option<u64>,
}

impl CpuIdle {
    /// Reads this machine's policy.
    pub fn probe() -> CpuIdle {
        CpuIdle::probe_at(Path::new("/sys"))
    }

    /// Reads the policy from a sysfs mounted at `sys`.
    pub fn probe_at(sys: &Path) -> CpuIdle {
        let read = |path: &str| {
            std::fs::read_to_string(sys.join(path))
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        CpuIdle {
            driver: read("devices/system/cpu/cpuidle/current_driver"),
            governor: read("devices/system/cpu/cpuidle/current_governor")
                .or_else(|| read("devices/system/cpu/cpuidle/current_governor_ro")),
            halt_poll_ns: read("module/haltpoll/parameters/guest_halt_poll_ns")
                .and_then(|s| s.parse().ok()),
        }
    }

    /// Whether an idle vCPU halts without polling first (`haltpoll` with no polling time).
    pub fn halts_at_once(&self) -> bool {
        self.driver.as_deref() == Some("haltpoll") && self.halt_poll_ns == Some(0)
    }

    /// A line for the report of a run whose threads sleep and wake (`sleeps`: a forced log, or
    /// more than one thread), where idle vCPUs halt at once; `None` otherwise.
    pub fn note(&self, sleeps: bool) -> Option<String> {
        (sleeps && self.halts_at_once()).then(|| {
            "machine: idle vCPUs halt at once (cpuidle haltpoll, guest_halt_poll_ns 0): a \
             sleeping thread woken on an idle CPU waits some 30 µs for the hypervisor, and \
             these figures include such waits (docs/performance.md, \"What an idle vCPU costs \
             a durable run\")"
                .to_string()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sysfs(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn a_haltpoll_guest_that_does_not_poll_is_told_apart_from_one_that_does() {
        let halting = sysfs(&[
            ("devices/system/cpu/cpuidle/current_driver", "haltpoll\n"),
            (
                "devices/system/cpu/cpuidle/current_governor_ro",
                "haltpoll\n",
            ),
            ("module/haltpoll/parameters/guest_halt_poll_ns", "0\n"),
        ]);
        let idle = CpuIdle::probe_at(halting.path());
        assert_eq!(
            idle,
            CpuIdle {
                driver: Some("haltpoll".into()),
                governor: Some("haltpoll".into()),
                halt_poll_ns: Some(0),
            }
        );
        assert!(idle.halts_at_once());
        assert!(idle.note(true).unwrap().contains("guest_halt_poll_ns 0"));
        assert_eq!(idle.note(false), None, "a run whose threads never sleep");

        let polling = sysfs(&[
            ("devices/system/cpu/cpuidle/current_driver", "haltpoll\n"),
            ("module/haltpoll/parameters/guest_halt_poll_ns", "200000\n"),
        ]);
        let idle = CpuIdle::probe_at(polling.path());
        assert_eq!(idle.halt_poll_ns, Some(200_000));
        assert!(!idle.halts_at_once());
        assert_eq!(idle.note(true), None);
    }

    #[test]
    fn a_machine_without_cpuidle_records_nothing_and_says_nothing() {
        let bare = sysfs(&[("devices/system/cpu/online", "0-1\n")]);
        let idle = CpuIdle::probe_at(bare.path());
        assert_eq!(idle, CpuIdle::default());
        assert_eq!(idle.note(true), None);
        let other = sysfs(&[
            ("devices/system/cpu/cpuidle/current_driver", "intel_idle\n"),
            ("devices/system/cpu/cpuidle/current_governor", "menu\n"),
        ]);
        let idle = CpuIdle::probe_at(other.path());
        assert_eq!(idle.driver.as_deref(), Some("intel_idle"));
        assert_eq!(idle.governor.as_deref(), Some("menu"));
        assert!(!idle.halts_at_once());
    }
}
