//! The analyst notebooks (`notebooks/*.ipynb`), executed as a person would run them, top to
//! bottom in a Jupyter kernel (papermill, from the test venv), against a demo archive built
//! by the real CLI. Each notebook checks itself with `assert`s against the archive's own
//! answers (`rows`, `survey --json`, `fold --json`, `files`), so a run that finishes is a
//! notebook that agrees with the archive; the test also reads the executed notebook back and
//! requires each check's printed verdict, so a cell that silently did nothing fails it.
//! The cold-tier notebook runs against moto's S3 server on loopback, started here.

#[path = "common/process.rs"]
mod process;
#[path = "common/s3.rs"]
mod s3;

use process::{python, scratch, show, BIN};
use std::path::Path;
use std::process::Command;

/// Builds a small demo archive (4 runs × 8 probes, 4 000 ticks, compacted at the end).
fn demo(root: &Path, env: &[(&'static str, String)]) {
    let out = Command::new(BIN)
        .args(["demo", root.to_str().unwrap(), "--ticks", "4000"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("demo runs");
    assert!(out.status.success(), "{}", show("demo", &out));
}

/// What the executed notebook's cells printed and displayed (never their source).
fn outputs(executed: &str) -> String {
    let nb: serde_json::Value = serde_json::from_str(executed).expect("a notebook");
    let mut out = String::new();
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(lines) => lines.iter().filter_map(|l| l.as_str()).collect(),
        _ => String::new(),
    };
    for cell in nb["cells"].as_array().expect("cells") {
        for o in cell["outputs"].as_array().into_iter().flatten() {
            out.push_str(&text(&o["text"]));
            out.push_str(&text(&o["data"]["text/plain"]));
            out.push('\n');
        }
    }
    out
}

/// Executes `notebook` with papermill and `params`; answers what its cells printed.
fn execute(
    notebook: &str,
    dir: &Path,
    params: &[(&str, &str)],
    env: &[(&'static str, String)],
) -> String {
    let py = python("papermill, duckdb, polars, deltalake, matplotlib");
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("notebooks")
        .join(notebook);
    let executed = dir.join(format!("executed-{notebook}"));
    let mut cmd = Command::new(&py);
    cmd.args(["-m", "papermill", "--no-progress-bar"])
        .arg(&source)
        .arg(&executed)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    for (k, v) in params {
        cmd.args(["-p", k, v]);
    }
    let out = cmd.output().expect("papermill runs");
    assert!(out.status.success(), "{}", show(notebook, &out));
    outputs(&std::fs::read_to_string(&executed).expect("the executed notebook"))
}

#[test]
fn the_rows_and_statistics_notebooks_agree_with_the_archive() {
    let dir = scratch("notebooks-");
    let root = dir.path().join("archive");
    demo(&root, &[]);
    let out_dir = dir.path().join("out");
    let params = [
        ("ARCHIVE", root.to_str().unwrap()),
        ("CLI", BIN),
        ("OUT_DIR", out_dir.to_str().unwrap()),
    ];
    let rows = execute("01-rows-and-envelope.ipynb", dir.path(), &params, &[]);
    for verdict in [
        "rows through the Delta log",
        "Polars agrees",
        "the envelope from raw rows equals the archive's survey in all",
        "saved ",
    ] {
        assert!(
            rows.contains(verdict),
            "notebook 01 never printed {verdict:?}"
        );
    }
    let envelope = std::fs::metadata(out_dir.join("envelope.png")).expect("the envelope plot");
    assert!(
        envelope.len() > 10_000,
        "a real plot: {} bytes",
        envelope.len()
    );
    // A coarser budget: buckets merge cells, and the level cells must merge the same way.
    for budget in ["200", "20"] {
        let mut with_budget = params.to_vec();
        with_budget.push(("BUDGET", budget));
        let stats = execute(
            "02-statistics-and-levels.ipynb",
            dir.path(),
            &with_budget,
            &[],
        );
        for verdict in [
            "the merged level cells equal the archive's survey bucket for bucket",
            "the same as `series-archive files --levels`",
            "statistics from raw rows equal series-archive fold",
        ] {
            assert!(
                stats.contains(verdict),
                "notebook 02 (budget {budget}) never printed {verdict:?}"
            );
        }
    }
}

#[test]
fn the_cold_tier_notebook_reads_the_files_by_url() {
    let dir = scratch("notebooks-cold-");
    let moto = s3::Moto::start(&["notebook-tier"]);
    let env = moto.env();
    let root = dir.path().join("archive");
    demo(&root, &env);
    let out = Command::new(BIN)
        .args([
            "offload",
            root.to_str().unwrap(),
            "--cold",
            "s3://notebook-tier/site",
            "--local-budget",
            "0",
        ])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("offload runs");
    assert!(out.status.success(), "{}", show("offload", &out));
    let text = execute(
        "03-cold-tier.ipynb",
        dir.path(),
        &[("ARCHIVE", root.to_str().unwrap()), ("CLI", BIN)],
        &env,
    );
    for verdict in [
        "of them in the cold tier",
        "DuckDB and Polars read by URL exactly the",
        "delta_scan refuses the table with cold files",
    ] {
        assert!(
            text.contains(verdict),
            "notebook 03 never printed {verdict:?}"
        );
    }
}
