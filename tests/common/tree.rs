//! What a directory holds and what an archive records, for the crash tests.
#![allow(dead_code)]

use series_archive::archive::Archive;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What a directory holds: every directory and file, relative, with each file's bytes.
pub type Tree = BTreeMap<String, Option<Vec<u8>>>;

pub fn tree(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, out: &mut Tree) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            let rel = path
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "_delta_log") {
                    // The Delta logs are derived from the manifest and change at every
                    // commit and writable open; tests/delta_log.rs checks them.
                    continue;
                }
                out.insert(format!("{rel}/"), None);
                walk(root, &path, out);
            } else {
                out.insert(rel, Some(std::fs::read(&path).expect("read file")));
            }
        }
    }
    let mut out = Tree::new();
    walk(root, root, &mut out);
    out
}

/// The tree as a listing of paths and sizes, for readable assertion messages.
pub fn listing(tree: &Tree) -> String {
    tree.iter()
        .map(|(p, b)| match b {
            Some(b) => format!("{p} {}\n", b.len()),
            None => format!("{p}\n"),
        })
        .collect()
}

/// Every file the archive's durable state names (data and level files alike), relative to
/// the root: collected from the snapshot the state would start a generation with.
pub fn recorded_paths(archive: &Archive) -> BTreeSet<String> {
    fn collect(value: &serde_json::Value, out: &mut BTreeSet<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    match (key.as_str(), v) {
                        ("path", serde_json::Value::String(p)) => {
                            out.insert(p.clone());
                        }
                        _ => collect(v, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    let snapshot =
        serde_json::to_value(archive.state().snapshot(0)).expect("a snapshot serializes");
    let mut out = BTreeSet::new();
    collect(&snapshot, &mut out);
    out
}

/// Copies a directory tree, leaving out `LOCK` (a copy is never locked).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create directory");
    for entry in std::fs::read_dir(from).expect("list directory") {
        let entry = entry.expect("directory entry");
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&source, &target);
        } else if entry.file_name() != "LOCK" {
            std::fs::copy(&source, &target).expect("copy file");
        }
    }
}
