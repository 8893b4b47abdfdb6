//! Every file a message names must exist: a hint that sends the operator to a script that is
//! not there (the no-RDMA error once named `deploy/rxe-setup.sh`) is worse than none. Scans the
//! workspace's Rust sources for `deploy/…` paths and checks each one.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `deploy/…` paths named in `text`.
fn deploy_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("deploy/") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_./@-".contains(c)))
            .unwrap_or(tail.len());
        // A sentence's full stop is not part of the path.
        found.push(tail[..end].trim_end_matches('.').to_string());
        rest = &tail[end..];
    }
    found
}

#[test]
fn every_deploy_path_the_sources_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for crate_dir in ["target", "initiator", "cc", "raid", "fabric", "proto"] {
        sources(&root.join(crate_dir).join("src"), &mut files);
    }
    assert!(
        files.len() > 50,
        "the scan found only {} sources",
        files.len()
    );
    let mut named = 0;
    let mut missing = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for p in deploy_paths(&text) {
            named += 1;
            // `deploy/rxe-setup@.service` and the like: the file as written.
            if !root.join(&p).exists() {
                missing.push(format!("{}: {p}", f.display()));
            }
        }
    }
    assert!(
        named > 0,
        "no deploy/ path named anywhere: the scan is broken"
    );
    assert!(missing.is_empty(), "named but not there: {missing:#?}");
}

#[test]
fn the_path_scan_stops_where_a_path_ends() {
    assert_eq!(
        deploy_paths("see deploy/rxe-setup. Or `deploy/raidline.toml`, (deploy/lab/run)"),
        ["deploy/rxe-setup", "deploy/raidline.toml", "deploy/lab/run"]
    );
}
