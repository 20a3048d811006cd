//! [`super`]: shell lines as agents write them.
use std::path::{Path, PathBuf};

use super::{Context, LineCommand, parse_line};
use crate::shell::ShellError;

fn ctx(cwd: &Path) -> Context {
    Context::new(cwd.to_path_buf(), Some("alice".into()), |u| match u {
        "alice" => Some(PathBuf::from("/home/alice")),
        "bob" => Some(PathBuf::from("/home/bob")),
        _ => None,
    })
}

pub(super) fn ctx_at_work() -> Context {
    ctx(Path::new("/work"))
}

pub(super) fn cmds(line: &str) -> Vec<LineCommand> {
    parse_line(line, &ctx_at_work()).unwrap_or_else(|e| panic!("{line}: {e}"))
}

pub(super) fn argvs(line: &str) -> Vec<Vec<String>> {
    cmds(line).into_iter().map(|c| c.argv).collect()
}

pub(super) fn refused(line: &str) -> String {
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
    // An expanded here-document's substitutions run: they are commands of the line.
    assert_eq!(
        argvs("cat <<EOF\n$(rm -rf /)\nEOF"),
        [vec!["rm", "-rf", "/"], vec!["cat"]]
    );
    assert!(refused("cat <<EOF\n$KEY\nEOF").contains("$KEY"));
}

#[test]
fn redirections_to_the_standard_devices_open_no_file_of_the_users() {
    for line in [
        "echo done > /dev/stderr",
        "sort < /dev/stdin 2>/dev/full",
        "base64 < /dev/urandom > /dev/fd/1",
    ] {
        let c = &cmds(line)[0];
        assert!(c.reads.is_empty() && c.writes.is_empty(), "{line}: {c:?}");
    }
    // Any other device, or another spelling, is a path like any other, which the
    // sandbox checks.
    let c = &cmds("cat < /dev/sda > /dev/tty")[0];
    assert_eq!(c.reads, [PathBuf::from("/dev/sda")]);
    assert_eq!(c.writes, [PathBuf::from("/dev/tty")]);
    let c = &cmds("cat < /dev/../dev/urandom")[0];
    assert_eq!(c.reads, [PathBuf::from("/dev/../dev/urandom")]);
}

#[test]
fn cd_carries_to_the_next_commands_but_not_out_of_a_subshell() {
    // A pipeline's commands and a command run with `&` are subshells too.
    let c = cmds("cd /tmp | cat .env; cd /etc & cat .env; cat a");
    assert_eq!(c[0].argv, ["cat", ".env"]);
    assert_eq!(
        c[0].cwd,
        Path::new("/work"),
        "`cd x | …` stays in its subshell"
    );
    assert_eq!(
        c[1].cwd,
        Path::new("/work"),
        "`cd x &` stays in its subshell"
    );
    assert_eq!(c[2].cwd, Path::new("/work"));
    // A `cd` to a directory that is there holds for the rest of the line.
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir(root.join("sub")).expect("mkdir");
    let c =
        parse_line("cd sub && cat notes.txt; (cd /tmp && ls); pwd", &ctx(root)).expect("allowed");
    assert_eq!(c[0].cwd, root.join("sub"));
    assert_eq!(c[1].argv, ["ls"]);
    assert_eq!(c[1].cwd, Path::new("/tmp"));
    assert_eq!(c[2].cwd, root.join("sub"));
    assert_eq!(
        cmds("cd ~/.ssh && cat id_rsa")[0].cwd,
        Path::new("/home/alice/.ssh")
    );
    assert_eq!(cmds("cd .. && ls")[0].cwd, Path::new("/"));
    refused("cd - && ls");
}

#[test]
fn pushd_and_popd_move_as_cd_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("sub/deeper")).expect("mkdir");
    let walk = |line: &str| parse_line(line, &ctx(root));
    let c = walk("pushd sub && cat notes.txt && popd").expect("allowed");
    assert_eq!(c[0].cwd, root.join("sub"));
    let c = walk("pushd sub; pushd deeper; ls; popd; ls; popd; cat a").expect("allowed");
    let cwds: Vec<&Path> = c.iter().map(|c| c.cwd.as_path()).collect();
    assert_eq!(
        cwds,
        [
            root.join("sub/deeper"),
            root.join("sub"),
            root.to_path_buf()
        ]
    );
    // A `pushd` that may not have run: where `popd` goes is not known.
    let e = walk("[ -d sub ] && pushd sub; popd; cat a").expect_err("refused");
    assert!(
        e.to_string().contains("the directory a command runs in"),
        "{e}"
    );
    for line in [
        "popd",
        "pushd",
        "pushd +1",
        "pushd -n sub",
        "pushd sub; popd +1",
    ] {
        refused(line);
    }
    assert!(refused("popd; ls").contains("did not `pushd`"));
}

#[test]
fn the_count_of_processors_may_be_an_option_value() {
    for line in [
        "make -j$(nproc)",
        "cargo build --jobs=$(nproc)",
        "npm test -- --maxWorkers=$(nproc --all)",
        "make -j\"$(getconf _NPROCESSORS_ONLN)\" test",
    ] {
        assert!(!cmds(line).is_empty(), "{line}");
    }
    // Anywhere else, or another command's output, it may be a path.
    for line in [
        "pytest -n $(nproc)",
        "cat $(nproc)",
        "make -C$(nproc)x -j$(ls)",
        "make -j$(nproc)$PATH",
        "make -j$(cat ~/.ssh/id_rsa)",
        "cd $(nproc)",
        "make $(nproc)",
        "make -$(nproc)",
    ] {
        refused(line);
    }
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
        "npm_config_global=true npm install x",
        "NPM_CONFIG_PREFIX=/usr/local npm i x",
        "PIP_USER=1 pip install x",
        "export PIP_TARGET=.git/hooks",
        "GOBIN=/usr/local/bin go build ./cmd/x",
        "RUSTC_WRAPPER=./evil.sh cargo build",
        "YARN_GLOBAL_FOLDER=/usr/local yarn add x",
    ] {
        assert!(refused(line).contains("assignment"), "{line}");
    }
    assert_eq!(
        argvs("PIP_DISABLE_PIP_VERSION_CHECK=1 CARGO_TERM_COLOR=always cargo test")[0],
        ["cargo", "test"]
    );
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
    assert!(refused("for f; do wc -l $f; done").contains("for"));
    assert!(refused("for ((i=0; i<3; i++)); do echo $i; done").contains("for"));
    assert!(refused("eval \"cat x\"").contains("eval"));
    assert_eq!(
        argvs("cat ~/.ssh/{id_rsa,config}")[0][1..],
        ["/home/alice/.ssh/id_rsa", "/home/alice/.ssh/config"],
        "braces first, then `~`"
    );
    assert!(
        refused("X={a,b}; cat $X").contains("brace"),
        "not in an assignment"
    );
    assert!(refused("cat {01..10}.txt").contains("pads"));
    assert!(refused("echo $((x+1))").contains("arithmetic"));
    assert_eq!(
        argvs("[[ -f Cargo.toml && ! -d x ]] && cargo build; [[ 3 -gt 2 ]] || echo n"),
        [vec!["cargo", "build"], vec!["echo", "n"]]
    );
    assert_eq!(
        argvs("for f in a b; do [[ \"$f\" == a* ]] && echo $f; done").len(),
        2
    );
    assert_eq!(
        cmds("[[ -f x ]] > ~/.bashrc")[0].writes,
        [PathBuf::from("/home/alice/.bashrc")]
    );
    assert!(refused("[[ -f $KEY ]] && echo y").contains("$KEY"));
    assert!(refused("[[ 'a[$(id)]' -eq 1 ]]").contains("arithmetic comparison"));
    assert!(refused("[[ -v 'a[$(id)]' ]]").contains("subscript"));
    assert!(refused("[ -v 'a[$(id)]' ]").contains("subscript"));
    assert!(refused("test -R 'a[$(id)]'").contains("subscript"));
    assert_eq!(argvs("[ -v HOME ] && echo y")[1], ["echo", "y"]);
    assert_eq!(argvs("[[ -v HOME ]] && echo y"), [vec!["echo", "y"]]);
    assert!(refused("[[ -n \"$(cat .env)\" ]]").contains("command substitution"));
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

#[test]
fn command_substitutions_run_their_commands_and_give_text_only() {
    // Claude Code's commits: the message is a here-document printed by `cat`.
    let commit = "git commit -m \"$(cat <<'EOF'\nFix the parser\n\nCo-Authored-By: x\nEOF\n)\"";
    let c = cmds(commit);
    assert_eq!(c[0].argv, ["cat"], "the inner command runs first");
    assert_eq!(c[1].argv[..3], ["git", "commit", "-m"]);
    for line in [
        "git commit -am \"$(cat msg.txt)\"",
        "git commit --message=\"$(cat msg.txt)\"",
        "git tag -a v1 -m \"release $(date +%F)\"",
        "echo \"today: $(date)\" && echo `whoami`",
        "printf '%s\\n' $(ls src)",
        "echo \"$(echo \"$(echo deep)\")\"",
    ] {
        assert!(cmds(line).len() >= 2, "{line}");
    }
    assert_eq!(
        argvs("echo \"n: $(wc -l < ~/.ssh/id_rsa)\"")[0],
        ["wc", "-l"],
        "the inner command is checked like any other"
    );
    assert_eq!(
        cmds("echo \"n: $(wc -l < ~/.ssh/id_rsa)\"")[0].reads,
        [PathBuf::from("/home/alice/.ssh/id_rsa")]
    );
    // An assignment's substitution is a command of the line, which the engine checks.
    assert_eq!(argvs("X=$(cat .env); echo ok")[0], ["cat", ".env"]);
    // Its value is known only when it runs: refused wherever it is not text.
    for line in [
        "cat $(ls ~/.ssh | head -1)",
        "cat \"$(ls ~/.ssh | head -1)\"",
        "cd \"$(git rev-parse --show-toplevel)\" && ls",
        "$(which python3) x.py",
        "echo x > \"$(cat name.txt)\"",
        "X=$(cat .env); cat $X",
        "git commit -m $(cat msg.txt)",
        "git am -m \"$(cat x)\"",
        "git commit --author -m \"$(cat x)\"",
        "git log -m \"$(cat x)\"",
        "git commit -F \"$(cat x)\"",
        "cat <<< \"$(ls)\"",
        "echo \"$(echo \"$(echo \"$(echo \"$(echo deep)\")\")\")\"",
    ] {
        let why = refused(line);
        assert!(
            why.contains("command substitution") || why.contains("nested"),
            "{line}: {why}"
        );
    }
}

#[test]
fn environment_variables_without_secrets_are_text_only() {
    for line in [
        "echo $PATH",
        "echo \"user: $USER, shell: $SHELL\"",
        "printf '%s\\n' \"$TERM\"",
    ] {
        assert_eq!(cmds(line).len(), 1, "{line}");
    }
    for line in [
        "cat $PATH",
        "ls \"$TMPDIR\"",
        "cd $TMPDIR",
        "echo x > $TMPDIR/a",
        "F=$USER",
    ] {
        assert!(
            refused(line).contains("is known only when the line runs"),
            "{line}"
        );
    }
    assert!(refused("echo $AWS_SECRET_ACCESS_KEY").contains("$AWS_SECRET_ACCESS_KEY"));
}

#[test]
fn wrappers_run_their_command_as_a_command_of_the_line() {
    assert_eq!(
        argvs("timeout 60 cargo test && nice -n 5 make"),
        [
            vec!["timeout"],
            vec!["cargo", "test"],
            vec!["nice"],
            vec!["make"]
        ]
    );
    let c = cmds("nohup env RUST_LOG=debug cargo run > server.log 2>&1 &");
    assert_eq!(c[0].argv, ["nohup"]);
    assert_eq!(
        c[0].writes,
        [
            PathBuf::from("/work/server.log"),
            PathBuf::from("/work/nohup.out")
        ]
    );
    assert_eq!(c[2].argv, ["cargo", "run"]);
    assert!(c[2].analyse && !c[0].analyse && !c[1].analyse);
    assert!(refused("env PATH=. ls").contains("PATH"));
    assert!(refused("timeout 5 cd /tmp; cat .env").contains("builtin"));
    // Not read: left to the analysis, which refuses a program that runs another.
    assert_eq!(argvs("env -S 'cat .env'"), [vec!["env", "-S", "cat .env"]]);
}

#[test]
fn for_loops_are_walked_once_per_value() {
    let c = cmds("for f in a.rs b.rs; do wc -l \"$f\"; head -1 $f; done");
    assert_eq!(
        c.iter().map(|c| c.argv.clone()).collect::<Vec<_>>(),
        [
            vec!["wc", "-l", "a.rs"],
            vec!["head", "-1", "a.rs"],
            vec!["wc", "-l", "b.rs"],
            vec!["head", "-1", "b.rs"]
        ]
    );
    assert_eq!(
        argvs("for d in ~/.ssh /etc; do ls ${d}; done")[0],
        ["ls", "/home/alice/.ssh"]
    );
    assert_eq!(
        cmds("for f in x; do cat < $f > $f.bak; done")[0].writes,
        [PathBuf::from("/work/x.bak")]
    );
    assert_eq!(
        cmds("for f in a b; do cd /tmp; cat $f; done")[1].cwd,
        Path::new("/tmp"),
        "the body runs in the line's shell"
    );
    assert!(
        refused("for f in a; do :; done; cat $f").contains("$f"),
        "a loop may stop early (`break`): its variable is not known after it"
    );
    assert_eq!(
        argvs("for i in 1 2; do break; done; echo ok"),
        [vec!["echo", "ok"]]
    );
    // Known only when it runs, or too much to walk: refused.
    assert!(refused("for f in $(ls); do cat $f; done").contains("command substitution"));
    assert!(refused("for f in \"a b\"; do cat $f; done").contains("double quotes"));
    assert!(refused("for PATH in /tmp; do ls; done").contains("PATH"));
    let many = (0..300)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(refused(&format!("for i in {many}; do echo $i; done")).contains("256"));
    assert!(
        refused("for a in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17; do for b in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17; do echo $a$b; done; done")
            .contains("256")
    );
}

#[test]
fn variables_set_on_the_line_are_known() {
    assert_eq!(
        argvs("F=notes.txt; cat \"$F\"; export G=x; cat $G; H=~/y; cat $H"),
        [
            vec!["cat", "notes.txt"],
            vec!["cat", "x"],
            vec!["cat", "/home/alice/y"]
        ]
    );
    // bash expands `~` after `=` and `:` in these; the walk does not follow it there.
    assert!(refused("export G=~/.ssh/id_rsa; cat $G").contains("$G"));
    assert!(refused("G=a:~/.ssh; ls $G").contains("$G"));
    assert!(
        refused("(F=a); cat $F").contains("$F"),
        "a subshell's variable stays there"
    );
    assert!(refused("F=a | true; cat $F").contains("$F"));
    assert!(
        refused("F=a cat x; cat $F").contains("$F"),
        "`F=a cmd` is cmd's only"
    );
    assert!(refused("F='a b'; cat $F").contains("double quotes"));
    assert!(
        refused("F=; sort -o $F ~/.bashrc").contains("drop"),
        "an empty word outside quotes is dropped, so `~/.bashrc` would be `-o`'s value"
    );
    assert_eq!(argvs("F=; echo \"$F\"")[0], ["echo", ""]);
}

#[test]
fn builtins_open_their_redirections_and_set_only_names_a_line_may_set() {
    // `: > F` empties F; `cd`, `export` and the like open their redirections too.
    for line in [
        ": > ~/.bashrc",
        "export X=1 > ~/.bashrc",
        "cd sub 2> ~/.bashrc",
    ] {
        assert_eq!(
            cmds(line)[0].writes,
            [PathBuf::from("/home/alice/.bashrc")],
            "{line}"
        );
    }
    assert_eq!(
        cmds("true < notes.txt")[0].reads,
        [PathBuf::from("/work/notes.txt")]
    );
    // Builtins that set variables to what they read, or by reference.
    for line in [
        "read PATH < x; ls",
        "read -r -a LD_PRELOAD <<< x",
        "printf -v PATH %s /tmp; ls",
        "printf -vBASH_ENV %s x",
        "mapfile -t NODE_OPTIONS < x",
        "declare -n R=PATH; R=/tmp; ls",
        "printf -v \"$(echo PATH)\" %s /tmp; ls",
    ] {
        let why = refused(line);
        assert!(
            why.contains("assignment") || why.contains("reference") || why.contains("name"),
            "{line}: {why}"
        );
    }
    // What they set is not known afterwards.
    assert!(refused("F=a; read F < x; cat $F").contains("$F"));
    assert!(refused("F=a; printf -v F %s b; cat $F").contains("$F"));
    assert!(refused("F=a; unset F; cat $F").contains("$F"));
    assert!(refused("declare -i F=1+2; cat $F").contains("expression"));
    assert!(refused("declare -i X='a[$(id)]'").contains("expression"));
    assert!(refused("local -a 'X=([a[$(id)]]=1)'").contains("expression"));
    assert!(refused("declare 'X=([$(id)]=1)'").contains("expression"));
    for line in [
        "unset 'a[$(id)]'",
        "read 'a[$(id)]' < x",
        "declare 'a[$(id)]=1'",
        "export 'a[$(id)]'",
        "mapfile -t 'a[$(id)]' < x",
    ] {
        assert!(refused(line).contains("array element"), "{line}");
    }
    assert!(refused("declare -r F; cat $F").contains("$F"));
    assert_eq!(
        argvs("read -r line < notes.txt; echo ok")[1],
        ["echo", "ok"]
    );
}

#[test]
fn what_may_not_have_run_is_not_known_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir(root.join("sub")).expect("mkdir");
    let walk = |line: &str| parse_line(line, &ctx(root));
    let cwd_of_last = |line: &str| {
        walk(line)
            .unwrap_or_else(|e| panic!("{line}: {e}"))
            .pop()
            .expect("a command")
            .cwd
    };
    // `&&` alone: each command runs only after those before it did.
    assert_eq!(
        cwd_of_last("cd sub && cat a && cd /tmp && cat b"),
        Path::new("/tmp")
    );
    assert_eq!(
        cwd_of_last("mkdir -p new && cd new && ls"),
        root.join("new")
    );
    // A `cd` that may fail, or may not have run: the next commands' directory is unknown.
    for line in [
        "cd missing; cat .env",
        "mkdir -p new && cd new; ls",
        "make && cd /tmp; cat .env",
        "cd sub || cat .env",
        "test -d x || cd /tmp && cat .env",
        "if test -d x; then cd /tmp; fi; cat .env",
        "if true; then :; else cd /tmp; fi; cat .env",
        "while false; do cd /tmp; done; cat .env",
        "for d in /tmp; do cd $d; done; cat .env",
    ] {
        let why = walk(line).map_or_else(|e| e.to_string(), |c| format!("{c:?}"));
        assert!(why.contains("after a `cd`"), "{line}: {why}");
    }
    // A loop's pass starts where the pass before ended, which `while` does not know and
    // `break` or `continue` leaves open.
    for line in [
        "while cd ..; do cat .env; done",
        "while true; do cat x; cd ..; done",
        "for i in 1 2; do cat .env; [ -f x ] && continue; cd /tmp; done",
        "F=a; until false; do cat $F; F=.env; done",
    ] {
        let why = walk(line).map_or_else(|e| e.to_string(), |c| format!("{c:?}"));
        assert!(
            why.contains("after a `cd`") || why.contains("$F"),
            "{line}: {why}"
        );
    }
    assert_eq!(
        walk("while true; do cat a; done").expect("no change").len(),
        2
    );
    assert_eq!(
        cwd_of_last("for d in /tmp /; do cd $d; ls; done"),
        Path::new("/"),
        "without break or continue each pass is walked as it runs"
    );
    // In a branch, the branch's own `cd` holds; a `cd` to an absolute path makes it known.
    assert_eq!(
        cwd_of_last("if true; then cd /tmp && ls; fi"),
        Path::new("/tmp")
    );
    assert_eq!(cwd_of_last("cd missing; cd /tmp; ls"), Path::new("/tmp"));
    assert!(
        walk("cd missing; cd sub; ls").is_err(),
        "relative to what is unknown"
    );
    // Changes are counted, not compared: the directory may be `/tmp` for `ls`.
    let back = format!("cd /tmp && cd {} || ls", root.display());
    assert!(walk(&back).is_err(), "{back}");
    // The same for variables.
    for line in [
        "F=a; true && F=b && F=a || cat $F",
        "true && F=a; cat $F",
        "true || F=a; cat $F",
        "if true; then F=a; fi; cat $F",
        "F=a; if true; then F=b; fi; cat $F",
    ] {
        let why = walk(line).map_or_else(|e| e.to_string(), |c| format!("{c:?}"));
        assert!(why.contains("$F"), "{line}: {why}");
    }
    assert_eq!(
        walk("F=a; true && cat $F; if x; then cat $F; fi")
            .expect("known")
            .len(),
        4
    );
    // A compound command's redirections are opened from where it starts, even when no
    // command of it opens a file.
    for (line, file) in [
        ("{ :; } > ~/.bashrc", "/home/alice/.bashrc"),
        ("if true; then :; fi > out.txt", "out.txt"),
        ("{ cd /tmp; } > out.txt", "out.txt"),
    ] {
        let c = walk(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(c[0].writes, [root.join(file)], "{line}");
    }
}

/// bash evaluates an array subscript, or an operand of `[[ … -eq … ]]` and `declare -i`, as
/// arithmetic, and arithmetic runs the command substitutions inside a quoted word. Each line
/// here runs its command in the real bash (the marker file appears), and the walk refuses it.
#[test]
fn arithmetic_that_bash_evaluates_is_refused_and_each_case_runs_in_bash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("ran");
    let m = marker.display();
    let lines = [
        format!("declare -a a; read 'a[$(touch {m})]' < /dev/null"),
        format!("declare -a a; unset 'a[$(touch {m})]'"),
        format!("declare -a a; declare 'a[$(touch {m})]=1'"),
        format!("declare -a a; typeset 'a[$(touch {m})]=2'"),
        format!("declare -a a; printf -v 'a[$(touch {m})]' x"),
        format!("declare -i X='a[$(touch {m})]'"),
        format!("declare -a a; [[ 'a[$(touch {m})]' -eq 1 ]]"),
        format!("declare -a a; X='a[$(touch {m})]'; [[ \"$X\" -lt 1 ]]"),
        format!("declare -a a; test -v 'a[$(touch {m})]'"),
        format!("declare -a a; [ -v 'a[$(touch {m})]' ]"),
        format!("[[ -v 'a[$(touch {m})]' ]]"),
    ];
    for line in &lines {
        let _ = std::fs::remove_file(&marker);
        let ran = std::process::Command::new("bash")
            .args(["-c", line])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("bash runs");
        assert!(ran.code().is_some(), "{line}: bash was killed");
        assert!(marker.exists(), "bash did not run the command of {line}");
        let why = parse_line(line, &ctx(dir.path()))
            .map_or_else(|e| e.to_string(), |c| format!("allowed: {c:?}"));
        assert!(
            why.contains("expression") || why.contains("subscript") || why.contains("array"),
            "{line}: {why}"
        );
    }
}

#[test]
fn case_branches_are_commands_that_may_run() {
    assert_eq!(
        argvs("case \"$SHELL\" in *bash) echo bash;; *) ls src;; esac"),
        vec![vec!["echo", "bash"], vec!["ls", "src"]]
    );
    // Its words' substitutions are commands of the line; a pattern is no file.
    assert_eq!(
        argvs("case $(uname) in Linux|*.py) cat a;; esac"),
        vec![vec!["uname"], vec!["cat", "a"]]
    );
    // A branch's `cd` leaves the directory unknown after the `case`.
    assert!(refused("case x in x) cd /tmp;; esac; rm a").contains("after a `cd`"));
    assert!(refused("case x in a) cd /tmp;& b) rm a;; esac").contains("goes on into the next"));
    let why = refused("case $1 in a) ls;; esac");
    assert!(why.contains("parameter"), "{why}");
}

#[test]
fn the_last_jobs_id_is_a_runtime_value_that_kill_alone_takes() {
    assert!(crate::shell::LAST_JOB.contains(super::words::RUNTIME_STAND_IN));
    for line in [
        "sleep 9 & kill $!",
        "sleep 9 & PID=$!; sleep 1; kill \"$PID\"",
        "sleep 9 & echo \"started $!\"",
    ] {
        cmds(line);
    }
    for line in [
        "sleep 9 & rm -rf \"$!\"/x",
        "sleep 9 & P=$!; cat \"$P\"",
        "P=$!x; kill $P",
    ] {
        refused(line);
    }
}
