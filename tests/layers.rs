//! The house rules of `src/` (issue 24), as `scripts/layers.py` checks them: no import cycle
//! outside `archive/engine/`'s star, imports only down the archive's layers, and no
//! file-system or object-store call outside `src/archive/io/`. The checker is also shown a
//! copy of the tree with one breach of each kind planted, and must name all three.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn check(src: &Path) -> (bool, String) {
    let out = Command::new("python3")
        .arg(root().join("scripts/layers.py"))
        .arg("--src")
        .arg(src)
        .output()
        .expect("python3 runs scripts/layers.py");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create");
    for entry in std::fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn append(path: &Path, text: &str) {
    let mut body = std::fs::read_to_string(path).expect("read");
    body.push_str(text);
    std::fs::write(path, body).expect("write");
}

#[test]
fn the_source_tree_keeps_the_house_rules() {
    let (ok, text) = check(&root().join("src"));
    assert!(ok, "scripts/layers.py found breaches:\n{text}");
    assert!(text.starts_with("ok: "), "{text}");
}

#[test]
fn the_checker_names_a_cycle_an_upward_import_and_a_file_system_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    copy_tree(&root().join("src"), &src);
    // format (pure) naming the engine: upward, and a cycle through everything.
    append(
        &src.join("archive/format/ladder.rs"),
        "\nuse crate::archive::engine::Archive;\nfn _planted(_: &Archive) {}\n",
    );
    // plan naming io: side by side, never each other.
    append(
        &src.join("archive/plan/levels.rs"),
        "\nfn _planted() -> usize { crate::archive::io::cold::MULTIPART_THRESHOLD }\n",
    );
    // A planner reading a file.
    append(
        &src.join("archive/plan/select.rs"),
        "\nfn _planted() { let _ = std::fs::read(\"x\"); }\n",
    );
    let (ok, text) = check(&src);
    assert!(!ok, "the planted breaches passed:\n{text}");
    assert!(
        text.contains("cycle of") && text.contains("archive::format::ladder"),
        "{text}"
    );
    assert!(
        text.contains("archive::format::ladder imports archive::engine"),
        "{text}"
    );
    assert!(
        text.contains("archive::plan::levels imports archive::io::cold"),
        "{text}"
    );
    assert!(
        text.contains("src/archive/plan/select.rs") && text.contains("std::fs"),
        "{text}"
    );
}

/// The library used as a dependency (`default-features = false`) carries none of the command
/// line's stack: no argument parser, HTTP server, SQLite, plotting or progress bars.
#[test]
fn the_library_without_default_features_carries_no_command_line_dependency() {
    let out = Command::new(env!("CARGO"))
        .current_dir(root())
        .args([
            "tree",
            "-e",
            "normal",
            "--no-default-features",
            "--prefix",
            "none",
        ])
        .output()
        .expect("cargo tree runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("arrow-array"),
        "the tree lists the library's stack:\n{text}"
    );
    for banned in ["clap", "axum", "rusqlite", "resvg", "plotters", "indicatif"] {
        let found: Vec<&str> = text
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(banned))
            .collect();
        assert!(
            found.is_empty(),
            "{banned} is in the library's tree: {found:?}"
        );
    }
    // And with the defaults, the command line's stack is there (the check can fail).
    let full = Command::new(env!("CARGO"))
        .current_dir(root())
        .args(["tree", "-e", "normal", "--prefix", "none"])
        .output()
        .expect("cargo tree runs");
    let full = String::from_utf8_lossy(&full.stdout);
    assert!(
        full.lines().any(|l| l.starts_with("clap ")),
        "the default build has clap:\n{full}"
    );
}
