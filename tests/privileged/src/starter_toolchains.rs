//! The starter (`gatewayd policy init`) on a machine whose toolchain lives in the home, as
//! pyenv, rustup and nvm install theirs: a program the shell tool lists, found on `PATH`
//! there, runs under `gatewayd run` as it does bare, because the starter makes its install
//! tree readable; with that one entry taken out, the kernel refuses it.
use super::*;

/// `HOME/.tc/bin/applypatch` (a name the starter lists that no system has), a script
/// reading `HOME/.tc/share/data` as a toolchain reads its own files; returns the `PATH` that
/// finds it.
fn toolchain_in(home: &Path) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let tc = home.join(".tc");
    std::fs::create_dir_all(tc.join("bin")).unwrap();
    std::fs::create_dir_all(tc.join("share")).unwrap();
    std::fs::write(tc.join("share/data"), "toolchain-data\n").unwrap();
    let program = tc.join("bin/applypatch");
    std::fs::write(
        &program,
        "#!/bin/sh\ncat \"$(dirname \"$0\")/../share/data\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:/usr/bin:/bin", tc.join("bin").display())
}

#[test]
fn a_toolchain_in_the_home_runs_under_the_starter() {
    // Out of `/tmp`, which the starter's sessions have their own of.
    let dir = Scratch::at(Path::new("/var/tmp"), "toolchain");
    let (home, ws) = (dir.path("home"), dir.path("work"));
    std::fs::create_dir_all(&ws).unwrap();
    let path = toolchain_in(&home);
    let tree = home.join(".tc").display().to_string();
    let starter = dir.path("starter.json");
    let init = Command::new(gatewayd())
        .args(["policy", "init", "--out"])
        .arg(&starter)
        .arg("--workspace")
        .arg(&ws)
        .arg("--home")
        .arg(&home)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    assert!(stdout(&init).contains(&tree), "{}", stdout(&init));

    let bare = Command::new("/bin/sh")
        .args(["-c", "applypatch"])
        .env("PATH", &path)
        .current_dir(&ws)
        .output()
        .unwrap();
    assert_eq!(stdout(&bare), "toolchain-data\n", "bare: {bare:?}");

    let run = |policy: &Path, audit: &str| {
        under_gatewayd(policy, dir.path(audit), "/bin/sh")
            .args(["-c", "applypatch"])
            .env("PATH", &path)
            .current_dir(&ws)
            .output()
            .unwrap()
    };
    let under = run(&starter, "starter.jsonl");
    assert_eq!(
        stdout(&under),
        "toolchain-data\n",
        "under the starter: {under:?}"
    );

    // The feature removed: the same starter without the toolchain's entry.
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&starter).unwrap()).unwrap();
    let readable = p["sandbox"]["readable"].as_array_mut().unwrap();
    let before = readable.len();
    readable.retain(|r| r.as_str() != Some(tree.as_str()));
    assert_eq!(readable.len(), before - 1, "one entry for the toolchain");
    let without = dir.path("without.json");
    std::fs::write(&without, p.to_string()).unwrap();
    let refused = run(&without, "without.jsonl");
    assert!(
        !stdout(&refused).contains("toolchain-data"),
        "without the entry: {refused:?}"
    );
    // Refused by the kernel and recorded: at tier 2 the exec (Landlock's EACCES), by the
    // path; at tier 1 the shell's read of the script (BPF LSM's EPERM), by its inode.
    use std::os::unix::fs::MetadataExt as _;
    let script = std::fs::metadata(home.join(".tc/bin/applypatch"))
        .unwrap()
        .ino();
    let recs = records(&dir.path("without.jsonl"));
    let names_it = |d: &serde_json::Value| {
        d["path"].as_str().is_some_and(|p| p.starts_with(&tree)) || d["ino"] == script
    };
    assert!(
        recs.iter()
            .any(|r| r["reason"] == "outside_readable" && names_it(&r["detail"])),
        "without the entry: {refused:?} {recs:#?}"
    );
}
