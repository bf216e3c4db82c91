//! `offload` into a cold prefix that lost objects the manifest names there is refused, naming
//! the tier and an object, and changes nothing: moving more of the archive onto a tier that
//! is losing it is never routine. Against a real S3-compatible server on loopback (moto).

#[path = "common/process.rs"]
mod process;
#[path = "common/s3.rs"]
mod s3;
#[path = "common/tree.rs"]
mod tree;

use std::process::{Command, Output};

fn sa(moto: &s3::Moto, args: &[&str]) -> Output {
    Command::new(process::BIN)
        .args(args)
        .envs(moto.env())
        .env_remove("SERIES_ARCHIVE_LOG")
        .output()
        .expect("run series-archive")
}

fn ok(moto: &s3::Moto, args: &[&str]) -> String {
    let out = sa(moto, args);
    assert!(
        out.status.success(),
        "{}",
        process::show(&format!("series-archive {}", args.join(" ")), &out)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn ingest(moto: &s3::Moto, archive: &str, dir: &std::path::Path, from: u64) {
    let mut text = String::from("run,probe,ordinal,value\n");
    for t in from..from + 400 {
        for r in 0..2 {
            text.push_str(&format!("run_{r},p0,{t},{}\n", t * 3 + r));
        }
    }
    let input = dir.join(format!("rows-{from}.csv"));
    std::fs::write(&input, text).expect("write csv");
    ok(
        moto,
        &[
            "ingest",
            archive,
            "--stream",
            "capture",
            "--track",
            "run,probe",
            "--axis",
            "ordinal",
            "--seal-rows",
            "400",
            "--no-compact",
            input.to_str().expect("utf-8"),
        ],
    );
}

#[test]
fn offload_into_a_prefix_that_lost_its_objects_is_refused() {
    let dir = process::scratch("cli-tier-loss");
    let moto = s3::Moto::start(&["tier-loss"]);
    let archive = dir.path().join("archive");
    let a = archive.to_str().expect("utf-8");
    ingest(&moto, a, dir.path(), 0);
    let cold = "s3://tier-loss/site";
    ok(
        &moto,
        &["offload", a, "--cold", cold, "--local-budget", "0"],
    );
    let urls: Vec<String> = ok(&moto, &["files", a, "--stream", "capture"])
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(urls.iter().all(|u| u.starts_with(cold)), "{urls:?}");

    // One object lost from the bucket, then more rows to offload.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let store = moto.store("tier-loss");
    let lost = urls[0].clone();
    let key = object_store::path::Path::from(
        lost.strip_prefix("s3://tier-loss/").expect("in the bucket"),
    );
    rt.block_on(async {
        use object_store::ObjectStoreExt;
        store.delete(&key).await.expect("delete");
    });
    ingest(&moto, a, dir.path(), 400);
    let before = tree::tree(&archive);
    let out = sa(
        &moto,
        &["offload", a, "--cold", cold, "--local-budget", "0"],
    );
    let shown = process::show("offload into a prefix that lost an object", &out);
    assert_ne!(out.status.code(), Some(0), "{shown}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lost 1 object(s)"), "{shown}");
    assert!(stderr.contains(&lost), "{shown}");
    let mut after = tree::tree(&archive);
    after.remove("LOCK");
    let mut was = before;
    was.remove("LOCK");
    assert!(
        after == was,
        "the refused offload changed the archive:\n{shown}"
    );
}
