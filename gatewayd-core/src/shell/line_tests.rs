//! [`super::line`]: shell lines as agents write them.
use std::path::{Path, PathBuf};

use super::{
    ShellError,
    line::{Context, LineCommand, parse_line},
};

fn ctx(cwd: &Path) -> Context {
    Context {
        cwd: cwd.to_path_buf(),
        user: Some("alice".into()),
        home_of: |u| match u {
            "alice" => Some(PathBuf::from("/home/alice")),
            "bob" => Some(PathBuf::from("/home/bob")),
            _ => None,
        },
    }
}

fn cmds(line: &str) -> Vec<LineCommand> {
    parse_line(line, &ctx(Path::new("/work"))).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn argvs(line: &str) -> Vec<Vec<String>> {
    cmds(line).into_iter().map(|c| c.argv).collect()
}

fn refused(line: &str) -> String {
    match parse_line(line, &ctx(Path::new("/work"))) {
        Err(e @ (ShellError::Unanalysable(_) | ShellError::Syntax(_))) => e.to_string(),
        other => panic!("{line}: expected a refusal, got {other:?}"),
    }
}

#[test]
fn lists_and_pipelines_are_their_commands() {
    assert_eq!(argvs("ls | head"), [vec!["ls"], vec!["head"]]);
    assert_eq!(
        argvs("git status && git diff --stat; make test || true &"),
        [
            vec!["git", "status"],
            vec!["git", "diff", "--stat"],
            vec!["make", "test"],
            vec!["true"]
        ]
    );
    assert_eq!(
        argvs("{ echo a; echo b; } | sort"),
        [vec!["echo", "a"], vec!["echo", "b"], vec!["sort"]]
    );
    assert_eq!(argvs("if [ -f x ]; then cat x; else echo no; fi").len(), 3);
}

#[test]
fn redirections_are_reads_and_writes() {
    let c = &cmds("cat README.md 2>/dev/null")[0];
    assert_eq!(c.argv, ["cat", "README.md"]);
    assert!(c.reads.is_empty() && c.writes.is_empty(), "{c:?}");
    let c = &cmds("cargo build 2>&1 > build.log")[0];
    assert_eq!(c.writes, [PathBuf::from("/work/build.log")]);
    let c = &cmds("sort < ~/.ssh/id_rsa >> out.txt")[0];
    assert_eq!(c.reads, [PathBuf::from("/home/alice/.ssh/id_rsa")]);
    assert_eq!(c.writes, [PathBuf::from("/work/out.txt")]);
    let c = &cmds("make &> log")[0];
    assert_eq!(c.writes, [PathBuf::from("/work/log")]);
    let c = &cmds("cat <<'EOF'\n$(not run)\nEOF")[0];
    assert_eq!(c.argv, ["cat"]);
    refused("cat <<EOF\n$(rm -rf /)\nEOF");
}

#[test]
fn cd_carries_to_the_next_commands_but_not_out_of_a_subshell() {
    let c = cmds("cd sub && cat notes.txt; (cd /tmp && ls); pwd");
    assert_eq!(c[0].cwd, Path::new("/work/sub"));
    assert_eq!(c[1].argv, ["ls"]);
    assert_eq!(c[1].cwd, Path::new("/tmp"));
    assert_eq!(c[2].cwd, Path::new("/work/sub"));
    assert_eq!(
        cmds("cd ~/.ssh && cat id_rsa")[0].cwd,
        Path::new("/home/alice/.ssh")
    );
    assert_eq!(cmds("cd .. && ls")[0].cwd, Path::new("/"));
    refused("cd - && ls");
}

#[test]
fn home_and_assignments() {
    assert_eq!(argvs("cat ~/.ssh/id_rsa")[0][1], "/home/alice/.ssh/id_rsa");
    assert_eq!(
        argvs("cat $HOME/.aws/credentials")[0][1],
        "/home/alice/.aws/credentials"
    );
    assert_eq!(argvs("cat \"${HOME}/.env\"")[0][1], "/home/alice/.env");
    assert_eq!(argvs("cat ~bob/x")[0][1], "/home/bob/x");
    assert_eq!(argvs("echo '~' \"~\"")[0][1..], ["~", "~"]);
    assert_eq!(
        argvs("RUST_LOG=debug cargo test -q"),
        [vec!["cargo", "test", "-q"]]
    );
    assert_eq!(
        argvs("GIT_PAGER=cat git log -3"),
        [vec!["git", "log", "-3"]]
    );
    for line in [
        "PATH=/tmp:$PATH ls",
        "LD_PRELOAD=./x.so cat a",
        "GIT_SSH_COMMAND=./x git fetch",
        "PAGER=./evil git log",
        "export NODE_OPTIONS=--require=./x.js",
    ] {
        assert!(refused(line).contains("assignment"), "{line}");
    }
    let unknown = Context {
        user: None,
        ..ctx(Path::new("/work"))
    };
    assert!(parse_line("cat ~/.ssh/id_rsa", &unknown).is_err());
}

#[test]
fn what_is_known_only_when_it_runs_is_refused_with_its_reason() {
    assert!(refused("cat $(ls ~/.ssh | head -1)").contains("command substitution"));
    assert!(refused("cat `echo /etc/shadow`").contains("command substitution"));
    assert!(refused("cat $KEYFILE").contains("$KEYFILE"));
    assert!(refused("for f in *.rs; do wc -l $f; done").contains("for"));
    assert!(refused("eval \"cat x\"").contains("eval"));
    assert!(refused("source ./env.sh").contains("source"));
    assert!(refused(". ./env.sh").contains("`.`"));
    assert!(refused("diff <(cat a) b").contains("process substitution"));
    assert!(refused("cat ~/.ssh/{id_rsa,config}").contains("brace"));
    assert!(refused("echo $((1+2))").contains("arithmetic"));
    assert!(refused("cat 'unterminated").contains("syntax"));
}

#[test]
fn shell_bodies_are_lines_of_their_own() {
    let c = cmds("bash -lc 'cd sub && pytest -q'");
    assert_eq!(c[0].argv, ["bash"]);
    assert!(!c[0].analyse);
    assert_eq!(c[1].argv, ["pytest", "-q"]);
    assert_eq!(c[1].cwd, Path::new("/work/sub"));
    assert_eq!(
        argvs("sh -c \"cat ~/.ssh/id_rsa\"")[1][1],
        "/home/alice/.ssh/id_rsa"
    );
    assert_eq!(argvs("bash -e -o pipefail -c 'ls | wc -l'").len(), 3);
    assert!(refused("bash -c 'bash -c \"bash -c \\\"bash -c ls\\\"\"'").contains("nested"));
    // Not a -c body: a script, analysed as the program's argument.
    assert_eq!(argvs("bash build.sh"), [vec!["bash", "build.sh"]]);
}

#[test]
fn globs_expand_against_the_file_system() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    for f in ["a.rs", "b.rs", ".env", "src/c.rs"] {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, "x").expect("write");
    }
    let ctx = ctx(root);
    let argv = |line: &str| parse_line(line, &ctx).expect(line).remove(0).argv;
    assert_eq!(argv("wc -l *.rs"), ["wc", "-l", "a.rs", "b.rs"]);
    assert_eq!(
        argv("cat *"),
        ["cat", "a.rs", "b.rs", "src"],
        "no dotfile without a dot"
    );
    assert_eq!(argv("cat .e*"), ["cat", ".env"]);
    assert_eq!(argv("ls */*.rs"), ["ls", "src/c.rs"]);
    assert_eq!(
        argv("ls '*.rs' \"*\""),
        ["ls", "*.rs", "*"],
        "quoted: no glob"
    );
    assert_eq!(argv("ls *.py"), ["ls", "*.py"], "no match: as written");
    let abs = format!("cat {}/.e?v", root.display());
    assert_eq!(argv(&abs)[1], root.join(".env").display().to_string());
}
