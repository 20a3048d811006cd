//! Commands run on the paths another command found, through a shell: `find … -exec` and
//! `find … | xargs`. Each attack is first run in the real bash on the fixture tree, where it
//! reads the key, then refused by the engine; the ordinary lines beside them are allowed.
use gatewayd_core::engine::{Decision, Reason};
use serde_json::json;

use crate::support::*;

/// The fixture with `xargs` and `cp` on the exec allowlist.
fn fx_xargs() -> Fx {
    fx_exec(&["/usr/bin/xargs", "/usr/bin/cp"])
}

#[test]
fn found_paths_that_lead_to_a_protected_file_are_refused() {
    let f = fx_xargs();
    let mut s = session();
    // A symbolic link below the root (`key-link`, to `home/.ssh/id_rsa`) is opened by the
    // command, and a name with a blank becomes two paths for xargs, one of them `.env`.
    std::fs::write(f.p("work/src/z .env a.rs"), "x\n").expect("write");
    // A list of paths that is not find's: xargs reads its input from elsewhere.
    std::fs::write(f.p("work/list.txt"), f.p("home/.ssh/id_rsa")).expect("write");
    for line in [
        "find src -name '*.rs' -print0 | xargs cat < list.txt",
        "find . -name '*link' -exec cat {} +",
        "find . -name 'key*' | xargs cat",
        "find . -exec cat {} \\; -name '*.rs'",
        "find . -name '*.rs' -o -name '.env' -exec cat {} \\;",
        "find . -name '*.rs' | xargs cat",
        "cat $(find src -name '*.rs')",
        "for f in $(find . -name 'key*'); do cat \"$f\"; done",
    ] {
        let bare = run_in_bash(&f, line);
        assert!(
            bare.contains("BEGIN OPENSSH PRIVATE KEY") || bare.contains(DEPLOY_KEY),
            "{line}: without gatewayd it reads a secret: {bare}"
        );
        let o = refused(
            f.call(&mut s, "run_sh", json!({"command": line})),
            Decision::Deny,
            Reason::Shell,
        );
        assert!(
            o.verdict.message.contains("protected") || o.verdict.message.contains("xargs"),
            "{line}: {}",
            o.verdict.message
        );
    }
    for (line, reason) in [
        (
            "find src -name '*.rs' -exec cp {} /tmp/x \\;",
            Reason::Sandbox,
        ),
        (
            "find src -name '*.rs' -print0 | xargs -0 -I{} cp {} ../home/.bashrc",
            Reason::Sandbox,
        ),
        ("echo .env | xargs cat", Reason::Shell),
        ("find src -print0 | xargs cat", Reason::Shell),
    ] {
        refused(
            f.call(&mut s, "run_sh", json!({"command": line})),
            Decision::Deny,
            reason,
        );
    }
}

#[test]
fn ordinary_commands_on_found_paths_are_allowed() {
    let f = fx_xargs();
    let mut s = session();
    std::fs::create_dir_all(f.p("work/src/util")).expect("mkdir");
    std::fs::write(f.p("work/src/util/notes.txt"), "x\n").expect("write");
    for line in [
        "find src -name '*.rs' -exec wc -l {} +",
        "find src -name '*.rs' -exec grep -l TODO {} \\;",
        "find src -type f | xargs wc -l",
        "find src -name '*.rs' -print0 | xargs -0 grep -n main",
        "find src -name '*.txt' | grep -v keep | head -5 | xargs wc -l",
        "wc -l $(find src -name '*.rs')",
        "grep -c main $(find src -type f -name '*.rs' | head -3)",
        "for f in $(find src -name '*.rs'); do wc -l \"$f\"; done",
    ] {
        assert_allowed(&f, &mut s, line);
        assert!(
            !run_in_bash(&f, line).is_empty(),
            "{line} prints what it found"
        );
    }
}

#[test]
fn trees_find_leaves_out_are_not_looked_at() {
    let f = fx_xargs();
    let mut s = session();
    // A link to the key in a tree find's `-not -path` leaves out, beside a script.
    std::fs::create_dir_all(f.p("work/src/node_modules/pkg")).expect("mkdir");
    std::os::unix::fs::symlink(
        f.p("home/.ssh/id_rsa"),
        f.p("work/src/node_modules/pkg/index.js"),
    )
    .expect("symlink");
    std::fs::write(f.p("work/src/app.js"), "run()\n").expect("write");
    let all = "find src -name '*.js' | xargs cat";
    assert!(run_in_bash(&f, all).contains("BEGIN OPENSSH PRIVATE KEY"));
    refused(
        f.call(&mut s, "run_sh", json!({"command": all})),
        Decision::Deny,
        Reason::Shell,
    );
    for line in [
        "find src -name '*.js' -not -path 'src/node_modules/*' | xargs cat",
        "find src -name '*.js' ! -path '*/node_modules/*' -exec cat {} +",
    ] {
        let bare = run_in_bash(&f, line);
        assert!(
            bare.contains("run()") && !bare.contains("PRIVATE KEY"),
            "{line}: {bare}"
        );
        assert_allowed(&f, &mut s, line);
    }
}

#[test]
fn a_found_file_of_a_protected_name_is_refused() {
    let f = fx_with(|v| {
        v["sandbox"]["protected_names"] = json!([".env.*"]);
        let exec = v["sandbox"]["exec"].as_array_mut().expect("exec list");
        exec.push(json!("/usr/bin/xargs"));
    });
    let mut s = session();
    std::fs::write(f.p("work/src/.env.local"), format!("KEY={DEPLOY_KEY}\n")).expect("write");
    // Read directly, the name is refused; found, it was not looked at.
    refused(
        f.call(&mut s, "run_sh", json!({"command": "cat src/.env.local"})),
        Decision::Deny,
        Reason::Sandbox,
    );
    for line in [
        "find src -name '.env.*' -exec cat {} +",
        "find src -type f | xargs cat",
    ] {
        assert!(
            run_in_bash(&f, line).contains(DEPLOY_KEY),
            "{line}: the bare line reads it"
        );
        let o = refused(
            f.call(&mut s, "run_sh", json!({"command": line})),
            Decision::Deny,
            Reason::Shell,
        );
        assert!(
            o.verdict.message.contains("protected name"),
            "{line}: {}",
            o.verdict.message
        );
    }
    assert_allowed(&f, &mut s, "find src -name '*.rs' -exec wc -l {} +");
}

/// fnmatch (find's `-name`, grep's `--include`) reads `[^x]` as "not x" and `[[:lower:]]`
/// as a class of letters; a filter that read them otherwise would leave `.env` out of a
/// walk that reaches it.
#[test]
fn name_globs_are_read_as_fnmatch_reads_them() {
    let f = fx_with(|v| {
        let root = v["sandbox"]["root"].as_str().expect("root").to_owned();
        let protected = v["sandbox"]["protected"].as_array_mut().expect("protected");
        protected.push(json!(format!("{root}/src/.env")));
    });
    let mut s = session();
    std::fs::write(f.p("work/src/.env"), format!("KEY={DEPLOY_KEY}\n")).expect("write");
    for line in [
        "find src -name '.[^x]nv' -exec cat {} +",
        "find src -name '.[[:lower:]]nv' -exec cat {} +",
        "grep -r KEY src --include='.[^x]nv'",
        "grep -r KEY src --include='.[[:lower:]]nv'",
    ] {
        bash_reads_it_the_engine_refuses(&f, &mut s, line, DEPLOY_KEY);
    }
}

/// Runs git in the fixture's workspace.
fn git(f: &Fx, args: &[&str]) {
    gatewayd_testkit::git::git(std::path::Path::new(&f.p("work")), args);
}

#[test]
fn what_git_ls_files_lists_is_what_the_index_tracks() {
    let f = fx_exec(&["/usr/bin/xargs", "/usr/bin/git"]);
    let mut s = session();
    git(&f, &["init", "-q"]);
    git(&f, &["add", "src", "notes.txt"]);
    // `.env` is there but not tracked: git lists only what its index holds.
    for line in [
        "git ls-files | xargs wc -l",
        "git ls-files -z | xargs -0 grep -n TODO",
        "wc -l $(git ls-files)",
    ] {
        assert_allowed(&f, &mut s, line);
        let bare = run_in_bash(&f, line);
        assert!(
            bare.contains("main.rs") || bare.contains("TODO"),
            "{line}: {bare}"
        );
        assert!(!bare.contains(DEPLOY_KEY), "{line}: {bare}");
    }
    // What is not tracked (`--others`) is every file below, as for find.
    bash_reads_it_the_engine_refuses(&f, &mut s, "git ls-files -o | xargs cat", DEPLOY_KEY);
    // Another git command of the line may change the index first: every file below counts.
    let o = refused(
        f.call(
            &mut s,
            "run_sh",
            json!({"command": "git add out/a.txt && git ls-files | xargs wc -l"}),
        ),
        Decision::Deny,
        Reason::Shell,
    );
    assert!(
        o.verdict.message.contains("protected"),
        "{}",
        o.verdict.message
    );
    // A tracked `.env`, and a tracked link to a key, are read by the command; so is a
    // changed tracked `.env`, by what `git diff` names.
    std::fs::write(f.p("work/src/main.rs"), "fn main() { /* changed */ }\n").expect("write");
    assert_allowed(&f, &mut s, "git diff --name-only | xargs wc -l");
    git(&f, &["add", "-f", ".env"]);
    let o = bash_reads_it_the_engine_refuses(&f, &mut s, "git ls-files | xargs cat", DEPLOY_KEY);
    let env = std::fs::read_to_string(f.p("work/.env")).expect("read");
    std::fs::write(f.p("work/.env"), format!("{env}# changed\n")).expect("write");
    bash_reads_it_the_engine_refuses(&f, &mut s, "git diff --name-only | xargs cat", DEPLOY_KEY);
    assert!(
        o.verdict.message.contains("protected"),
        "{}",
        o.verdict.message
    );
    git(&f, &["rm", "-q", "-f", "--cached", ".env"]);
    git(&f, &["add", "key-link"]);
    bash_reads_it_the_engine_refuses(
        &f,
        &mut s,
        "cat $(git ls-files)",
        "BEGIN OPENSSH PRIVATE KEY",
    );
    git(&f, &["rm", "-q", "--cached", "key-link"]);
    // A tracked file inside a protected directory.
    git(&f, &["add", "-f", "out/keep/ledger.txt"]);
    bash_reads_it_the_engine_refuses(&f, &mut s, "git ls-files | xargs cat", "do not touch");
    git(&f, &["rm", "-q", "--cached", "out/keep/ledger.txt"]);
    // A directory git tracks a file in, made a link to the keys' directory since.
    let kdir = std::path::Path::new(&f.p("work")).join("kdir");
    std::fs::create_dir(&kdir).expect("mkdir");
    std::fs::write(kdir.join("id_rsa"), "x").expect("write");
    git(&f, &["add", "kdir/id_rsa"]);
    std::fs::remove_dir_all(&kdir).expect("rm");
    std::os::unix::fs::symlink(f.p("home/.ssh"), &kdir).expect("symlink");
    bash_reads_it_the_engine_refuses(
        &f,
        &mut s,
        "git ls-files -z | xargs -0 cat",
        "BEGIN OPENSSH PRIVATE KEY",
    );
}

#[test]
fn an_index_written_by_hand_cannot_list_paths_out_of_the_tree() {
    let f = fx_exec(&["/usr/bin/xargs", "/usr/bin/git"]);
    let mut s = session();
    git(&f, &["init", "-q"]);
    // A name as long as `../home/.ssh/id_rsa`, then that path written into the index.
    let stand_in = "aaaaaaaaaaaaaaaaaaa";
    std::fs::write(f.p(&format!("work/{stand_in}")), "x").expect("write");
    git(&f, &["add", stand_in]);
    let index = std::path::Path::new(&f.p("work")).join(".git/index");
    let clean = std::fs::read(&index).expect("read");
    let crafted = gatewayd_testkit::git::index_with_name(&clean, stand_in, "../home/.ssh/id_rsa");
    std::fs::write(&index, crafted).expect("write");
    for line in [
        "git ls-files | xargs cat",
        "git add out/a.txt; git ls-files | xargs cat",
        "cat $(git ls-files)",
    ] {
        let o = bash_reads_it_the_engine_refuses(&f, &mut s, line, "BEGIN OPENSSH PRIVATE KEY");
        assert!(
            o.verdict.message.contains("git's index"),
            "{line}: {}",
            o.verdict.message
        );
    }
}
