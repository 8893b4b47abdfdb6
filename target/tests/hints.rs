//! Every file and every `raidline` command a message names must exist: a hint that sends the operator to a script that is
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

/// The `raidline …` commands named in backquotes in `text` (docs and messages alike), as words;
/// a `|` alternative (`ns enable|disable`) gives one command per alternative, a pipe after a
/// space ends the command.
fn raidline_commands(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("`raidline ") {
        let tail = &rest[i + 1..];
        let Some(end) = tail.find('`') else { break };
        let cmd = tail[..end].split(" | ").next().unwrap_or("");
        rest = &tail[end + 1..];
        let words: Vec<&str> = cmd.split_whitespace().skip(1).collect();
        let alts: Vec<Vec<&str>> = words.iter().map(|w| w.split('|').collect()).collect();
        // Expand each alternative of each word (few: one or two per command).
        let mut cmds: Vec<Vec<String>> = vec![Vec::new()];
        for a in alts {
            cmds = cmds
                .into_iter()
                .flat_map(|c| {
                    a.iter().map(move |w| {
                        let mut c = c.clone();
                        c.push(w.to_string());
                        c
                    })
                })
                .collect();
        }
        found.extend(cmds);
    }
    found
}

/// Whether `words` name a real `raidline` command path and only options that command has:
/// the subcommands are followed as far as they go; every `--option` must belong to the last
/// one (or be global).
fn command_exists(words: &[String]) -> Result<(), String> {
    let mut cmd = raidline_target::cli::command();
    cmd.build();
    let mut at = cmd.clone();
    let mut path = vec!["raidline".to_string()];
    for w in words {
        if let Some(flag) = w.strip_prefix("--") {
            let name = flag.split('=').next().unwrap_or(flag);
            let known = at.get_arguments().any(|a| a.get_long() == Some(name))
                || cmd
                    .get_arguments()
                    .any(|a| a.get_long() == Some(name) && a.is_global_set());
            if !known && name != "help" && name != "version" {
                return Err(format!("{}: no option --{name}", path.join(" ")));
            }
            continue;
        }
        if w == "…" || w == "..." {
            continue; // "and so on"
        }
        match at.find_subcommand(w) {
            Some(sub) => {
                path.push(w.clone());
                at = sub.clone();
            }
            None if at.has_subcommands() => {
                return Err(format!("{}: no command '{w}'", path.join(" ")));
            }
            None => {} // a value (ARRAY, a path, `{}` in a format string)
        }
    }
    Ok(())
}

/// Issue 20 item 6: every `raidline …` command a message or doc names exists, with the options
/// it shows.
#[test]
fn every_raidline_command_the_sources_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for crate_dir in ["target", "raid"] {
        sources(&root.join(crate_dir).join("src"), &mut files);
    }
    let mut named = 0;
    let mut wrong = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for words in raidline_commands(&text) {
            named += 1;
            if let Err(e) = command_exists(&words) {
                wrong.push(format!(
                    "{}: `raidline {}`: {e}",
                    f.display(),
                    words.join(" ")
                ));
            }
        }
    }
    assert!(
        named > 20,
        "only {named} commands named: the scan is broken"
    );
    assert!(wrong.is_empty(), "named but not a command: {wrong:#?}");
}

#[test]
fn the_command_check_refuses_what_does_not_exist() {
    let w = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert!(command_exists(&w("array start --accept-dirty-degraded array0")).is_ok());
    assert!(command_exists(&w("status --watch --socket /s")).is_ok());
    assert!(command_exists(&w("array grow a")).is_err());
    assert!(command_exists(&w("status --follow")).is_err());
    assert!(command_exists(&w("frobnicate")).is_err());
    assert_eq!(
        raidline_commands("see `raidline ns enable|disable X 1` or `raidline man | man -l -`"),
        [w("ns enable X 1"), w("ns disable X 1"), w("man")]
    );
}
