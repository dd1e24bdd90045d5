//! The load manifest: which workload, with which options, a database directory holds.
//!
//! `glass load` (and `glass bench --db` on an empty directory) writes `glass-load.json` into
//! the database directory after the load finished and the database was closed cleanly. Its
//! presence therefore means "fully loaded"; `glass check` and later `glass bench --db` runs
//! read it to rebuild the workload with the options it was loaded with (a TPC-C check needs
//! the warehouse count) and refuse a directory loaded by another workload or scale.
//!
//! The file is written to a temporary name and renamed, so it is either absent or complete.
//!
//! | field                          | meaning                                       |
//! |--------------------------------|-----------------------------------------------|
//! | `workload`                     | `tpcc`, `tpcb`, `ycsb`, `voter`               |
//! | `scale`                        | as `--scale`                                  |
//! | `mix`                          | TPC-C mix, `full` or `paper`                  |
//! | `ycsb_workload`, `distribution`, `field_size`, `field_count` | YCSB options   |
//! | `glass_version`, `loaded_at`   | the build that loaded it, and when (UTC)      |

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use workloads::{Distribution, Mix, WorkloadOptions};

/// File name of the manifest inside a database directory.
pub const MANIFEST_FILE: &str = "glass-load.json";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadManifest {
    pub workload: String,
    pub scale: u64,
    pub mix: String,
    pub ycsb_workload: String,
    pub distribution: String,
    pub field_size: usize,
    pub field_count: usize,
    pub glass_version: String,
    pub loaded_at: String,
}

/// Why a manifest could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("read {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid load manifest: {detail}")]
    Corrupt { path: PathBuf, detail: String },
}

pub fn mix_name(mix: Mix) -> &'static str {
    match mix {
        Mix::Full => "full",
        Mix::Paper => "paper",
        Mix::Charm => "charm",
    }
}

pub fn mix_from_name(name: &str) -> Result<Mix, String> {
    match name {
        "full" => Ok(Mix::Full),
        "paper" => Ok(Mix::Paper),
        "charm" => Ok(Mix::Charm),
        other => Err(format!("unknown mix '{other}' (valid: full, paper, charm)")),
    }
}

pub fn distribution_name(d: Distribution) -> &'static str {
    match d {
        Distribution::Uniform => "uniform",
        Distribution::Zipfian => "zipfian",
        Distribution::Latest => "latest",
    }
}

impl LoadManifest {
    pub fn new(workload: &str, options: &WorkloadOptions, loaded_at: String) -> LoadManifest {
        LoadManifest {
            workload: workload.to_string(),
            scale: options.scale,
            mix: mix_name(options.mix).to_string(),
            ycsb_workload: options.ycsb_workload.to_ascii_uppercase().to_string(),
            distribution: distribution_name(options.ycsb_distribution).to_string(),
            field_size: options.field_size,
            field_count: options.field_count,
            glass_version: env!("CARGO_PKG_VERSION").to_string(),
            loaded_at,
        }
    }

    /// The workload options the database was loaded with.
    pub fn options(&self) -> Result<WorkloadOptions, String> {
        let mut letters = self.ycsb_workload.chars();
        let ycsb_workload = match (letters.next(), letters.next()) {
            (Some(c), None) => c,
            _ => return Err(format!("bad ycsb_workload '{}'", self.ycsb_workload)),
        };
        Ok(WorkloadOptions {
            scale: self.scale,
            mix: mix_from_name(&self.mix)?,
            ycsb_workload,
            ycsb_distribution: Distribution::from_name(&self.distribution)?,
            field_size: self.field_size,
            field_count: self.field_count,
        })
    }

    /// How `options` differ from what was loaded, in the data that loading decides (the mix
    /// and the YCSB request distribution only shape the run, not the data).
    pub fn mismatch(&self, workload: &str, options: &WorkloadOptions) -> Option<String> {
        if self.workload != workload {
            return Some(format!(
                "it holds a {} database, not {workload}",
                self.workload
            ));
        }
        if self.scale != options.scale {
            return Some(format!(
                "it was loaded with --scale {}, not {}",
                self.scale, options.scale
            ));
        }
        if workload == "ycsb"
            && (self.field_size != options.field_size || self.field_count != options.field_count)
        {
            return Some(format!(
                "it was loaded with {} fields of {} bytes, not {} of {}",
                self.field_count, self.field_size, options.field_count, options.field_size
            ));
        }
        None
    }

    pub fn path(dir: &Path) -> PathBuf {
        dir.join(MANIFEST_FILE)
    }

    /// Reads the manifest of `dir`; `Ok(None)` if there is none (nothing fully loaded).
    pub fn read(dir: &Path) -> Result<Option<LoadManifest>, ManifestError> {
        let path = LoadManifest::path(dir);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ManifestError::Io { path, source }),
        };
        LoadManifest::parse(&path, &bytes).map(Some)
    }

    /// Decodes the manifest read from `path` and checks that it names options Glass knows
    /// ([`LoadManifest::options`]); anything else is [`ManifestError::Corrupt`].
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<LoadManifest, ManifestError> {
        let corrupt = |detail: String| ManifestError::Corrupt {
            path: path.to_path_buf(),
            detail,
        };
        let manifest: LoadManifest =
            serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
        manifest.options().map_err(corrupt)?;
        Ok(manifest)
    }

    /// Writes the manifest into `dir` atomically and durably: a temporary file, synced, then
    /// renamed over the manifest, then the directory synced. The load is done only once its
    /// manifest is durable: a power loss before leaves a directory `check` and `bench` call
    /// an incomplete load, never a manifest whose name survived without its bytes.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let path = LoadManifest::path(dir);
        let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, &path)?;
        storage::file::sync_directory(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest written into a directory just created survives a power cut (the directory
    /// synced into its parent, the manifest's bytes and its name synced). Skipped, saying so,
    /// where FUSE cannot be mounted.
    #[test]
    fn a_written_manifest_survives_a_power_cut() {
        use rand::SeedableRng;
        let at = tempfile::tempdir().unwrap();
        let Some(mounted) = powercut::Mounted::mount_or_skip(at.path()) else {
            return;
        };
        let dir = mounted.path().join("dbs").join("db");
        storage::file::create_dir_all_durably(&dir).unwrap();
        let m = LoadManifest::new("tpcb", &WorkloadOptions::default(), "now".into());
        m.write(&dir).unwrap();
        let cut = mounted
            .cut(0.0, &mut rand::rngs::SmallRng::seed_from_u64(3))
            .unwrap();
        assert_eq!(cut.files_lost, 0, "{cut:?}");
        let read = LoadManifest::read(&dir)
            .unwrap()
            .expect("the manifest survived");
        assert_eq!(read, m);
    }

    #[test]
    fn round_trips_and_rebuilds_options() {
        let dir = tempfile::tempdir().unwrap();
        assert!(LoadManifest::read(dir.path()).unwrap().is_none());
        let options = WorkloadOptions {
            scale: 3,
            mix: Mix::Paper,
            ycsb_workload: 'b',
            ycsb_distribution: Distribution::Uniform,
            field_size: 10,
            field_count: 2,
        };
        let m = LoadManifest::new("ycsb", &options, "now".into());
        m.write(dir.path()).unwrap();
        let back = LoadManifest::read(dir.path()).unwrap().unwrap();
        assert_eq!(back, m);
        let rebuilt = back.options().unwrap();
        assert_eq!(rebuilt.scale, 3);
        assert_eq!(rebuilt.mix, Mix::Paper);
        assert_eq!(rebuilt.ycsb_workload, 'B');
        assert_eq!(rebuilt.ycsb_distribution, Distribution::Uniform);
        assert_eq!(back.mismatch("ycsb", &rebuilt), None);
        let other_scale = WorkloadOptions {
            scale: 4,
            ..rebuilt.clone()
        };
        assert!(back
            .mismatch("ycsb", &other_scale)
            .unwrap()
            .contains("--scale 3"));
        assert!(back
            .mismatch("tpcc", &rebuilt)
            .unwrap()
            .contains("ycsb database"));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        for text in ["", "{", "[]", "{\"workload\": 5}", "\u{0}\u{ff}"] {
            std::fs::write(LoadManifest::path(dir.path()), text).unwrap();
            assert!(matches!(
                LoadManifest::read(dir.path()),
                Err(ManifestError::Corrupt { .. })
            ));
        }
        let mut m = LoadManifest::new("tpcc", &WorkloadOptions::default(), "now".into());
        m.mix = "weird".into();
        m.write(dir.path()).unwrap();
        assert!(LoadManifest::read(dir.path()).is_err());
    }
}
