//! The removal ladder's switches and presets (the 2008 paper, Figure 7 order).
//!
//! Each switch names a component; `on` means the component does its work, `off` removes it.
//! Rung k of the ladder has switches 1..=k off. A configuration is validated before an engine
//! opens: a combination that cannot run correctly is refused with an error naming why.

use serde::{Deserialize, Serialize};

/// One rung's switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Switch {
    BtreeKeys,
    DiskLog,
    MainLog,
    Lsn,
    Locking,
    Latching,
    DirLookup,
    SmallPage,
    PageAccess,
    Xactions,
}

impl Switch {
    /// Every switch, in ladder order (rung 1 first).
    pub const LADDER: [Switch; 10] = [
        Switch::BtreeKeys,
        Switch::DiskLog,
        Switch::MainLog,
        Switch::Lsn,
        Switch::Locking,
        Switch::Latching,
        Switch::DirLookup,
        Switch::SmallPage,
        Switch::PageAccess,
        Switch::Xactions,
    ];

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Switch::BtreeKeys => "btree-keys",
            Switch::DiskLog => "disk-log",
            Switch::MainLog => "main-log",
            Switch::Lsn => "lsn",
            Switch::Locking => "locking",
            Switch::Latching => "latching",
            Switch::DirLookup => "dir-lookup",
            Switch::SmallPage => "small-page",
            Switch::PageAccess => "page-access",
            Switch::Xactions => "xactions",
        }
    }

    /// What turning the switch off removes.
    pub fn removes(self) -> &'static str {
        match self {
            Switch::BtreeKeys => {
                "generic schema-interpreted key comparison (hand-coded integer keys instead)"
            }
            Switch::DiskLog => "log flush I/O (the log buffer is never forced)",
            Switch::MainLog => "building and writing log records",
            Switch::Lsn => "LSN bookkeeping in pages, buffer pool and transactions",
            Switch::Locking => "the lock manager",
            Switch::Latching => "latches (single thread only)",
            Switch::DirLookup => {
                "catalog lookup by name on every operation (cached handles instead)"
            }
            Switch::SmallPage => "8 KiB pages (32 KiB pages instead)",
            Switch::PageAccess => {
                "the buffer manager (records allocated one by one, reached by pointer)"
            }
            Switch::Xactions => {
                "per-transaction registration and monitoring (the active-transaction table)"
            }
        }
    }

    /// Position on the ladder, 1-based.
    pub fn rung(self) -> usize {
        Switch::LADDER.iter().position(|s| *s == self).unwrap() + 1
    }

    pub fn from_name(name: &str) -> Result<Switch, ConfigError> {
        Switch::LADDER
            .iter()
            .copied()
            .find(|s| s.name() == name)
            .ok_or_else(|| ConfigError::UnknownSwitch(name.to_string()))
    }
}

/// A named starting configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Preset {
    /// Rung 0: everything on.
    Full,
    /// Rungs 1–10: everything off.
    Stripped,
    /// Rung 11: the hand-coded kernel (no engine at all).
    Optimal,
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::Full => "full",
            Preset::Stripped => "stripped",
            Preset::Optimal => "optimal",
        }
    }

    pub fn from_name(name: &str) -> Result<Preset, ConfigError> {
        match name {
            "full" => Ok(Preset::Full),
            "stripped" => Ok(Preset::Stripped),
            "optimal" => Ok(Preset::Optimal),
            other => Err(ConfigError::UnknownPreset(other.to_string())),
        }
    }
}

/// A configuration error, named so a user can fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown switch '{0}' (valid: btree-keys, disk-log, main-log, lsn, locking, latching, dir-lookup, small-page, page-access, xactions)")]
    UnknownSwitch(String),
    #[error("unknown preset '{0}' (valid: full, stripped, optimal)")]
    UnknownPreset(String),
    #[error("bad switch setting '{0}': expected NAME=on or NAME=off")]
    BadSetting(String),
    #[error("impossible configuration: {0}")]
    Impossible(String),
}

/// Which components are on. `true` = the component does its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switches {
    on: [bool; 10],
    /// Set by the `optimal` preset: run the hand-coded kernel instead of the engine.
    pub optimal: bool,
}

impl Default for Switches {
    fn default() -> Self {
        Switches::preset(Preset::Full)
    }
}

impl Switches {
    pub fn preset(preset: Preset) -> Switches {
        match preset {
            Preset::Full => Switches {
                on: [true; 10],
                optimal: false,
            },
            Preset::Stripped => Switches {
                on: [false; 10],
                optimal: false,
            },
            Preset::Optimal => Switches {
                on: [false; 10],
                optimal: true,
            },
        }
    }

    /// The configuration of ladder rung `rung` (0..=11): switches 1..=rung off.
    pub fn rung(rung: usize) -> Switches {
        let mut s = Switches::preset(Preset::Full);
        for sw in Switch::LADDER.iter().take(rung.min(10)) {
            s.set(*sw, false);
        }
        s.optimal = rung >= 11;
        s
    }

    pub fn is_on(&self, s: Switch) -> bool {
        self.on[s.rung() - 1]
    }

    pub fn set(&mut self, s: Switch, on: bool) {
        self.on[s.rung() - 1] = on;
    }

    /// Applies a `NAME=on|off` setting from the command line.
    pub fn apply(&mut self, setting: &str) -> Result<(), ConfigError> {
        let (name, value) = setting
            .split_once('=')
            .ok_or_else(|| ConfigError::BadSetting(setting.to_string()))?;
        let on = match value {
            "on" => true,
            "off" => false,
            _ => return Err(ConfigError::BadSetting(setting.to_string())),
        };
        self.set(Switch::from_name(name)?, on);
        Ok(())
    }

    /// The most threads that may use a database with these switches at once: one for the
    /// kernel, or without latches or locks (see [`Switches::validate`]); otherwise no limit.
    /// A loader that fills tables in parallel stays within it.
    pub fn max_threads(&self) -> usize {
        if self.optimal || !self.is_on(Switch::Latching) || !self.is_on(Switch::Locking) {
            1
        } else {
            usize::MAX
        }
    }

    /// Refuses combinations that cannot run correctly with `threads` worker threads.
    pub fn validate(&self, threads: usize) -> Result<(), ConfigError> {
        if threads > 1 && self.optimal {
            return Err(ConfigError::Impossible(
                "the optimal kernel is single-threaded".to_string(),
            ));
        }
        if threads > 1 && !self.is_on(Switch::Latching) {
            return Err(ConfigError::Impossible(format!(
                "latching=off allows one thread only, not {threads}: without latches shared structures would be corrupted"
            )));
        }
        if threads > 1 && !self.is_on(Switch::Locking) {
            return Err(ConfigError::Impossible(format!(
                "locking=off allows one thread only, not {threads}: without locks concurrent transactions are not isolated"
            )));
        }
        if !self.is_on(Switch::Lsn) && self.is_on(Switch::MainLog) {
            return Err(ConfigError::Impossible(
                "lsn=off needs main-log=off: without page LSNs, redo cannot tell which logged changes a page already holds".to_string(),
            ));
        }
        if self.is_on(Switch::DiskLog) && !self.is_on(Switch::MainLog) {
            // Nothing to force: disk-log is implied off. Not an error, see `effective`.
        }
        Ok(())
    }

    /// Names of the switches that are off, in ladder order (as recorded in results).
    pub fn off_names(&self) -> Vec<&'static str> {
        Switch::LADDER
            .iter()
            .filter(|s| !self.is_on(**s))
            .map(|s| s.name())
            .collect()
    }

    /// The preset this configuration equals, if any.
    pub fn preset_name(&self) -> Option<&'static str> {
        [Preset::Full, Preset::Stripped, Preset::Optimal]
            .into_iter()
            .find(|p| Switches::preset(*p) == *self)
            .map(|p| p.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rungs_are_cumulative() {
        assert_eq!(Switches::rung(0), Switches::preset(Preset::Full));
        assert_eq!(Switches::rung(10), Switches::preset(Preset::Stripped));
        assert_eq!(Switches::rung(11), Switches::preset(Preset::Optimal));
        let r3 = Switches::rung(3);
        assert_eq!(r3.off_names(), vec!["btree-keys", "disk-log", "main-log"]);
    }

    #[test]
    fn settings_are_parsed_and_validated() {
        let mut s = Switches::default();
        s.apply("locking=off").unwrap();
        assert!(!s.is_on(Switch::Locking));
        assert!(matches!(
            s.apply("nope=off"),
            Err(ConfigError::UnknownSwitch(_))
        ));
        assert!(matches!(
            s.apply("locking"),
            Err(ConfigError::BadSetting(_))
        ));
        assert!(s.validate(2).is_err());
        assert!(s.validate(1).is_ok());
        let mut t = Switches::default();
        t.apply("lsn=off").unwrap();
        assert!(t.validate(1).is_err());
        assert!(Switches::preset(Preset::Stripped).validate(1).is_ok());
    }

    #[test]
    fn max_threads_agrees_with_validate() {
        for preset in [Preset::Full, Preset::Stripped, Preset::Optimal] {
            for off in ["none", "latching=off", "locking=off", "lsn=off"] {
                let mut s = Switches::preset(preset);
                if off != "none" {
                    s.apply(off).unwrap();
                }
                // Every setting that runs on one thread runs on `max_threads` and no more.
                if s.validate(1).is_ok() {
                    let max = s.max_threads();
                    assert_eq!(s.validate(2).is_ok(), max >= 2, "{preset:?} {off}");
                }
            }
        }
        assert_eq!(Switches::preset(Preset::Stripped).max_threads(), 1);
        assert_eq!(Switches::preset(Preset::Full).max_threads(), usize::MAX);
    }
}
