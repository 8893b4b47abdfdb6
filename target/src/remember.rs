//! Remembered members: the devices an array is made of right now, kept in the state directory
//! (`<state_dir>/<array>.members`, one path per line) so that a restart finds them even when the
//! configuration still names the old ones.
//!
//! The configuration lists an array's members and spares by path, but the array changes under
//! the daemon: a spare added with `raidline array add-spare` takes a failed role, `raidline
//! array replace` moves a role to a new device. Without this file the next start would open
//! only the configured paths and come up degraded (the new device unknown) although every
//! member is present. Assembly decides by superblock, so offering it extra candidates is safe:
//! a retired or foreign device is refused by its superblock and logged, never used.
//!
//! The file is rewritten atomically (temporary file, fsync, rename, fsync of the directory)
//! whenever the set of member and spare paths changes. A file that cannot be read or written
//! is logged and otherwise ignored: it only ever adds candidates.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The file remembering `array`'s members under `dir`.
pub fn file_for(dir: &Path, array: &str) -> PathBuf {
    dir.join(format!("{array}.members"))
}

/// The paths remembered in `file` (empty when there is no file). Blank lines and lines starting
/// with `#` are skipped.
pub fn load(file: &Path) -> std::io::Result<Vec<PathBuf>> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(PathBuf::from)
        .collect())
}

/// Writes `paths` to `file` atomically, creating its directory if needed.
pub fn save(file: &Path, array: &str, paths: &[String]) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = file.with_extension("members.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        writeln!(
            f,
            "# raidline: current members and spares of array {array} (written by the daemon;"
        )?;
        writeln!(
            f,
            "# offered to assembly beside the configured paths at the next start)"
        )?;
        for p in paths {
            writeln!(f, "{p}")?;
        }
        f.sync_all()?;
    }
    std::fs::rename(&tmp, file)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Candidates for assembly: `configured` first, then every remembered path not already in it.
pub fn candidates(configured: &[PathBuf], remembered: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = configured.to_vec();
    for p in remembered {
        if !out.contains(p) {
            out.push(p.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_round_trip_and_merge() {
        let dir = std::env::temp_dir().join(format!("raidline-remember-{}", std::process::id()));
        let f = file_for(&dir, "array0");
        assert_eq!(load(&f).unwrap(), Vec::<PathBuf>::new(), "no file yet");
        save(&f, "array0", &["/dev/a".into(), "/dev/new".into()]).unwrap();
        let back = load(&f).unwrap();
        assert_eq!(
            back,
            vec![PathBuf::from("/dev/a"), PathBuf::from("/dev/new")]
        );
        // Rewritten, not appended.
        save(&f, "array0", &["/dev/b".into()]).unwrap();
        assert_eq!(load(&f).unwrap(), vec![PathBuf::from("/dev/b")]);
        let c = candidates(
            &[PathBuf::from("/dev/a"), PathBuf::from("/dev/b")],
            &[PathBuf::from("/dev/b"), PathBuf::from("/dev/new")],
        );
        assert_eq!(
            c,
            vec![
                PathBuf::from("/dev/a"),
                PathBuf::from("/dev/b"),
                PathBuf::from("/dev/new")
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
