//! [`super`]: words of the shell that run nothing or a script, and commands run on the
//! paths another command found ([`super::found`], [`super::pipes`]).
use std::path::PathBuf;

use super::{
    LineCommand,
    tests::{argvs, cmds, refused},
};

#[test]
fn words_of_the_shell_that_run_nothing_or_a_script() {
    // `type`, `command -v`: nothing runs; `time` is bash's keyword over the pipeline.
    assert!(argvs("type cargo; command -v node").is_empty());
    assert_eq!(argvs("time cargo build"), [vec!["cargo", "build"]]);
    assert_eq!(argvs("time -p make test"), [vec!["make", "test"]]);
    assert_eq!(
        argvs("command ls"),
        [vec!["command", "ls"]],
        "left to the analysis"
    );
    // `$?`, `$$`, `$#` stand as text.
    assert_eq!(cmds("echo $? $$").len(), 1);
    assert!(refused("cat $?").contains("$?"));
    // `source FILE` runs FILE as `bash FILE` does; the line goes on.
    assert_eq!(
        argvs("source .venv/bin/activate && pytest"),
        [vec!["bash", ".venv/bin/activate"], vec!["pytest"]]
    );
    assert_eq!(argvs(". ./env.sh x"), [vec!["bash", "./env.sh", "x"]]);
    assert!(refused("source env.sh").contains("PATH"));
}

#[test]
fn commands_on_found_paths_stand_for_the_roots() {
    let c = cmds("find src -name '*.rs' -exec grep -l x {} \\;");
    assert_eq!(c[0].argv, ["find", "src", "-name", "*.rs"]);
    assert_eq!(c[1].argv, ["grep", "-l", "x", "src"]);
    let found = c[1].found.as_ref().expect("found paths");
    assert_eq!(found.roots, [PathBuf::from("/work/src")]);
    assert!(!found.split && !found.filter.is_empty());
    let c = cmds("find . -type f | grep -v test | xargs wc -l");
    assert_eq!(c[3].argv, ["wc", "-l", "/work/."]);
    assert!(c[3].found.as_ref().is_some_and(|f| f.split));
    let c = cmds("find src 2>/dev/null | xargs wc -l 2>&1");
    assert!(c[2].found.is_some(), "{c:?}");
    let c = cmds("git ls-files -z src | xargs -0 -n 10 cat");
    assert_eq!(c[2].argv, ["cat", "/work/src"]);
    assert!(c[2].found.as_ref().is_some_and(|f| !f.split));
    // git's globs `[DIR/]*SUFFIX` are find's `-name '*SUFFIX'` below DIR.
    let c = cmds("git ls-files '*.py' 'tests/*_test.go' | xargs wc -l");
    assert_eq!(c[2].argv, ["wc", "-l", "/work/."]);
    assert_eq!(
        c[3].argv,
        ["wc", "-l", "/work/tests"],
        "one command per root"
    );
    let filter = &c[2].found.as_ref().expect("found paths").filter;
    assert_eq!(
        filter.files,
        [
            (crate::shell::FileRule::Include, "*.py".to_owned()),
            (crate::shell::FileRule::Include, "*_test.go".to_owned())
        ]
    );
    for line in [
        "git ls-files 'x*' | xargs cat",
        "git ls-files '*.p*' | xargs cat",
        "git ls-files 's*/*.py' | xargs cat",
        "git ls-files ':(glob)*.py' | xargs cat",
        "git ls-files README.md '*.py' | xargs cat",
        "git ls-files '*' | xargs cat",
    ] {
        assert!(refused(line).contains("xargs"), "{line}");
    }
    let c = cmds("find . -name '*.py' | xargs -I{} cp {} /tmp/out");
    assert_eq!(c[2].argv, ["cp", "/work/.", "/tmp/out"]);
    // Not lists of paths, or not read: xargs is refused.
    for line in [
        "echo ~/.ssh/id_rsa | xargs cat",
        "find . | sed s/a/b/ | xargs cat",
        "find . | grep -o x | xargs cat",
        "find . -print0 | xargs cat",
        "find . | xargs -0 cat",
        "find . | xargs -a list cat",
        "find . -printf '%p' | xargs cat",
        "xargs cat < list",
        "find . -name '*.rs' | xargs cat < list",
        "find . -name '*.rs' | xargs cat <<< ~/.ssh/id_rsa",
        "find . 2>&1 | xargs cat",
        "find . > out | xargs cat",
        "find . | grep x < list | xargs cat",
        "find . | bash -c 'xargs cat'",
        "find . | timeout 5 xargs cat",
    ] {
        assert!(refused(line).contains("xargs"), "{line}");
    }
    assert!(refused("find . -exec cd {} \\;").contains("found paths"));
    assert!(refused("find . | xargs bash -c true").contains("found paths"));
}

#[test]
fn a_substitution_that_lists_paths_stands_for_their_roots() {
    let c = cmds("wc -l $(git ls-files src docs)");
    assert_eq!(c[1].argv, ["wc", "-l", "/work/src", "/work/docs"]);
    assert!(c[1].found.as_ref().is_some_and(|f| f.split));
    let c = cmds("grep -n main $(find . -name '*.rs' -not -path './target/*') > out.txt");
    assert_eq!(c[1].argv, ["grep", "-n", "main", "/work/."]);
    assert_eq!(c[1].writes, [PathBuf::from("/work/out.txt")]);
    // Text where text is taken, as before.
    assert_eq!(cmds("echo $(find .)")[1].found, None);
    for line in [
        "cat \"$(find . -name x)\"",
        "cat $(find . -name x; echo ~/.ssh/id_rsa)",
        "cat $(echo .env)",
        "cat $(find . -print0)",
        "cat $(find . -name x) $(git ls-files)",
        "$(find . -name x)",
        "cd $(find . -type d -name x)",
        "cat $(cd /; find . -name x)",
        "cat $(find $(echo .) -name x)",
    ] {
        refused(line);
    }
}

#[test]
fn the_files_a_search_lists_are_a_list_of_paths() {
    for (line, root) in [
        ("rg -l fn src | xargs wc -l", "/work/src"),
        ("rg --files -g '*.rs' | xargs wc -l", "/work/."),
        ("rg -il -t rust todo a | xargs wc -l", "/work/a"),
        ("grep -rl TODO src | xargs wc -l", "/work/src"),
        ("grep -rlZ TODO -- src | xargs -0 wc -l", "/work/src"),
    ] {
        let c = cmds(line);
        let last = c.last().expect("a command");
        assert_eq!(last.argv, ["wc", "-l", root], "{line}");
        assert!(last.found.is_some(), "{line}");
    }
    for line in [
        "rg fn src | xargs wc -l",
        "rg -n -l fn src | xargs wc -l",
        "grep -l TODO a b | xargs wc -l",
        "grep -rn TODO src | xargs wc -l",
        "rg -l --pre cat fn | xargs wc -l",
    ] {
        assert!(refused(line).contains("xargs"), "{line}");
    }
}

#[test]
fn values_known_only_when_the_line_runs_stand_as_text() {
    // A variable set from a substitution: its inner line is walked; the variable is text.
    let c = cmds("n=$(git rev-list --count HEAD); echo \"$n commits\"");
    assert_eq!(c[0].argv, ["git", "rev-list", "--count", "HEAD"]);
    assert_eq!(c[1].argv[0], "echo");
    assert_eq!(cmds("x=$(wc -l < README.md); echo $x lines").len(), 2);
    assert!(refused("f=$(echo .env); cat \"$f\"").contains("`$f`"));
    assert!(refused("d=$(pwd -P); cd $d").contains("`$d`"));
    // `$(pwd)` is known: the directory.
    assert_eq!(
        cmds("d=$(pwd); cd $d/src && ls").last().unwrap().cwd,
        std::path::Path::new("/work/src")
    );
    assert!(refused("PAGER=$(echo sh) git log").contains("PAGER"));
    // basename and dirname print parts of their words.
    assert_eq!(cmds("basename $(pwd)").len(), 2);
    // Arithmetic of integers written out; nothing that names a variable.
    assert_eq!(cmds("echo $((1 + 2 * 3))").len(), 1);
    assert!(refused("cat $((1+2))").contains("arithmetic"));
    for line in ["echo $((x+1))", "echo $((a[$(id)]))", "echo $(($n))"] {
        assert!(refused(line).contains("arithmetic"), "{line}");
    }
    // ulimit and umask run nothing.
    assert!(argvs("ulimit -n; umask").is_empty());
}

#[test]
fn process_substitutions_are_pipes_from_commands_of_the_line() {
    // Their commands are commands of the line; the word is a pipe, `-`, no file.
    assert_eq!(
        argvs("diff <(sort a) <(sort b)"),
        [vec!["sort", "a"], vec!["sort", "b"], vec!["diff", "-", "-"]]
    );
    let c = cmds("tee >(gzip > out.gz) < in.txt");
    assert_eq!(c[0].writes, [PathBuf::from("/work/out.gz")]);
    assert_eq!(c[1].reads, [PathBuf::from("/work/in.txt")]);
    assert_eq!(
        argvs("wc -l < <(git ls-files)"),
        [vec!["git", "ls-files"], vec!["wc", "-l"]]
    );
    // A `cd` inside stays inside.
    let c = cmds("cat <(cd /etc && cat passwd) README.md");
    assert_eq!(
        (&c[0].cwd, &c[1].cwd),
        (&PathBuf::from("/etc"), &PathBuf::from("/work"))
    );
    assert!(refused("source <(echo x)").contains("PATH"));
    assert!(refused("cat <(cat <(cat <(cat <(echo deep))))").contains("nested"));
}

#[test]
fn what_read_reads_is_text() {
    let c = cmds("while read -r line; do echo \"$line\"; done < notes.txt");
    assert_eq!(c[0].reads, [PathBuf::from("/work/notes.txt")]);
    // The loop changes `$l`: walked twice.
    assert_eq!(
        cmds("cat a | while read l; do echo \"$l\" | cut -c1-5; done").len(),
        5
    );
    for line in [
        "read f; cat \"$f\"",
        "while read -r f; do wc -l \"$f\"; done < list.txt",
        "read d; cd \"$d\" && ls",
        "read -r c; $c",
    ] {
        assert!(refused(line).contains("substitution"), "{line}");
    }
}

#[test]
fn a_loop_that_reads_a_list_of_paths_runs_on_found_paths() {
    let c = cmds("find src -name '*.rs' | while read -r f; do wc -l \"$f\"; echo \"$f\"; done");
    let wc: Vec<&LineCommand> = c.iter().filter(|c| c.argv[0] == "wc").collect();
    assert!(!wc.is_empty());
    for w in wc {
        assert_eq!(w.argv, ["wc", "-l", "/work/src"]);
        assert!(
            w.found
                .as_ref()
                .is_some_and(|f| f.split && !f.filter.is_empty())
        );
    }
    for line in [
        // Not a list's path, or not the whole word.
        "echo .env | while read -r f; do cat \"$f\"; done",
        "find src | while read -r f; do cat \"$f.bak\"; done",
        "find src | while read f; do cat \"$f\"; done",
        "find src | while read -r a b; do cat \"$a\"; done",
        "find src | while read -r f; do echo ~/.ssh/id_rsa | read -r g; cat \"$g\"; done",
        "find src | while read -r f; do cat \"$(echo \"$f\")\"; done",
        "find src | while read -r f; do cat \"$f\"; done < list.txt",
        "while read -r f; do cat \"$f\"; done < <(find src)",
        "find src -print0 | while read -r f; do cat \"$f\"; done",
    ] {
        let why = refused(line);
        assert!(
            why.contains("read") || why.contains("`$g`") || why.contains("substitution"),
            "{line}: {why}"
        );
    }
}

#[test]
fn ansi_c_words_are_what_bash_makes_of_them() {
    assert_eq!(argvs("printf $'a\\tb\\n'"), [vec!["printf", "a\tb\n"]]);
    assert_eq!(argvs("echo $'it\\'s'"), [vec!["echo", "it's"]]);
    // Escapes by code could spell any path: `$'.e\x6ev'` is `.env`.
    for line in [
        "cat $'.e\\x6ev'",
        "cat $'\\056env'",
        "cat $'\\u002eenv'",
        "cat $'\\cA'",
    ] {
        assert!(refused(line).contains("escape"), "{line}");
    }
    // The walk's own mark for values known only when the line runs cannot be written.
    assert!(refused("x='\u{1}value-of-a-command-substitution\u{1}found 0'").contains("U+0001"));
}

#[test]
fn double_quotes_keep_a_backslash_before_other_characters() {
    assert_eq!(
        argvs("cat \"a\\.b\" \"c\\$d\" \"e\\\\f\""),
        [vec!["cat", "a\\.b", "c$d", "e\\f"]]
    );
}

#[test]
fn set_options_that_change_nothing_the_walk_reads() {
    assert!(argvs("set -euo pipefail; set -x; set +e; set -- a b").is_empty());
    for line in [
        "set -f",
        "set -o noglob",
        "set +B",
        "set -P",
        "set -o physical",
        "set -k",
        "set -x -f",
        "set -e +o noglob",
        "set -euf",
    ] {
        assert!(refused(line).contains("set"), "{line}");
    }
}

#[test]
fn builtins_that_change_what_later_words_do_are_refused_by_the_walk() {
    // Refused whatever the allowlist says: they would change globbing, run arithmetic, or
    // choose the program a name runs.
    for line in ["shopt -s dotglob; ls", "let x=1", "hash -p /tmp/evil ls"] {
        assert!(
            refused(line).contains("runs code or changes the shell"),
            "{line}"
        );
    }
}

#[test]
fn a_tilde_bash_expands_in_an_assignment_like_argument_is_refused() {
    for line in ["dd if=~/.ssh/id_rsa of=x", "make PREFIX=a:~/b"] {
        assert!(refused(line).contains("expands `~`"), "{line}");
    }
    // Not after `=` of a name, or quoted: bash leaves it.
    assert_eq!(argvs("echo --opt=~/z")[0], ["echo", "--opt=~/z"]);
}

#[test]
fn a_root_xargs_would_split_is_not_a_list() {
    // `my dir/x.rs` would reach xargs as `my` and `dir/x.rs`, below no root.
    assert!(refused("find 'my dir' -name '*.rs' | xargs cat").contains("xargs"));
    assert!(refused("cat $(find 'my dir' -name '*.rs')").contains("substitution"));
}

#[test]
fn a_shell_started_with_options_that_change_words_is_not_read_as_a_body() {
    assert_eq!(argvs("bash -o pipefail -c 'ls | head'").len(), 3);
    for line in [
        "bash -o noglob -c 'cat [x]'",
        "sh +o braceexpand -c 'cat {a,b}'",
    ] {
        let c = cmds(line);
        assert!(
            c.len() == 1 && c[0].analyse,
            "{line}: left to the analysis, which refuses it"
        );
    }
}

#[test]
fn the_top_of_the_work_tree_where_the_line_is_there() {
    use gatewayd_testkit::git::git;
    let d = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(d.path()).unwrap();
    std::fs::create_dir(top.join("src")).unwrap();
    let ctx = |cwd: &std::path::Path| super::Context::new(cwd.to_path_buf(), None, |_| None);
    let line = "cd \"$(git rev-parse --show-toplevel)\" && git status";
    // No repository: git's answer is not known.
    assert!(super::parse_line(line, &ctx(&top)).is_err());
    git(&top, &["init", "-q"]);
    let c = super::parse_line(line, &ctx(&top)).expect("at the top");
    let argvs: Vec<_> = c.iter().map(|c| c.argv.clone()).collect();
    assert_eq!(
        argvs,
        [
            vec!["git", "rev-parse", "--show-toplevel"],
            vec!["git", "status"]
        ]
    );
    assert_eq!(c[1].cwd, top);
    // Below the top, unquoted, or in a longer word: known only when it runs.
    for (cwd, line) in [
        (top.join("src"), line),
        (top.clone(), "cd $(git rev-parse --show-toplevel) && ls"),
        (top.clone(), "cat \"$(git rev-parse --show-toplevel)/.env\""),
        (
            top.clone(),
            "cd \"$(git rev-parse --show-toplevel )\" && ls",
        ),
    ] {
        assert!(super::parse_line(line, &ctx(&cwd)).is_err(), "{line}");
    }
}

#[test]
fn pwd_substituted_is_the_directory_the_command_runs_in() {
    use super::tests::{argvs, ctx_at_work};
    assert_eq!(
        argvs("ls -la \"$(pwd)/src\""),
        [vec!["pwd"], vec!["ls", "-la", "/work/src"]]
    );
    assert_eq!(
        argvs("mkdir -p sub && cd sub && cat `pwd`/a $(pwd)"),
        [
            vec!["mkdir", "-p", "sub"],
            vec!["pwd"],
            vec!["pwd"],
            vec!["cat", "/work/sub/a", "/work/sub"]
        ]
    );
    // Another command, or `pwd` with options, is known only when it runs; so is `$(pwd)`
    // unquoted where the directory's path would split into words.
    for line in ["cat \"$(pwd -P)/a\"", "cat \"$(pwd; id)\""] {
        assert!(super::parse_line(line, &ctx_at_work()).is_err(), "{line}");
    }
    let spaced = super::Context::new("/work/my dir".into(), None, |_| None);
    assert!(super::parse_line("cat $(pwd)/a", &spaced).is_err());
    let c = super::parse_line("cat \"$(pwd)/a\"", &spaced).expect("quoted");
    assert_eq!(c[1].argv, ["cat", "/work/my dir/a"]);
}

#[test]
fn every_word_of_the_shell_alone_is_walked_as_a_line() {
    // Each is read by the walk (allowed, or refused as the shell's own), never left to the
    // check of a program by that name.
    for word in super::builtins::SHELL_WORDS {
        let argv = vec![(*word).to_owned(), "x".to_owned()];
        assert!(super::runs_inner_commands(&argv), "{word}");
        match super::parse_line(&argv.join(" "), &super::tests::ctx_at_work()) {
            Ok(c) => assert!(
                c.iter()
                    .all(|c| c.argv.first() != Some(&(*word).to_owned()) || *word == "command"),
                "{word}: {c:?}"
            ),
            Err(e) => assert!(!e.to_string().contains("exec allowlist"), "{word}: {e}"),
        }
    }
}

#[test]
fn a_for_loop_over_a_list_of_paths_stands_for_each() {
    let c = cmds("for f in $(find src -name '*.rs'); do wc -l \"$f\"; done");
    assert_eq!(c[0].argv, ["find", "src", "-name", "*.rs"]);
    assert_eq!(c[1].argv, ["wc", "-l", "/work/src"]);
    let found = c[1].found.as_ref().expect("found paths");
    assert!(found.split && !found.filter.is_empty());
    let c = cmds("for f in $(git ls-files docs); do head -3 $f; echo \"$f\"; done");
    assert_eq!(c[1].argv, ["head", "-3", "/work/docs"]);
    assert_eq!(c.len(), 3, "{c:?}");
    for line in [
        "for f in $(find . -print0); do cat \"$f\"; done",
        "for f in $(echo .env); do cat \"$f\"; done",
        "for f in \"$(find . -name x)\"; do cat \"$f\"; done",
        "for f in $(find . -name x) extra; do cat \"$f\"; done",
        "for f in $(find . -name x); do cd \"$f\"; done",
    ] {
        refused(line);
    }
}

#[test]
fn the_names_git_diff_lists_at_the_top_are_a_list_of_paths() {
    use gatewayd_testkit::git::git;
    let d = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(d.path()).unwrap();
    std::fs::create_dir(top.join("src")).unwrap();
    git(&top, &["init", "-q"]);
    let ctx = |cwd: &std::path::Path| super::Context::new(cwd.to_path_buf(), None, |_| None);
    let c = super::parse_line("git diff --name-only -- src | xargs wc -l", &ctx(&top))
        .expect("at the top");
    assert_eq!(
        c[2].argv,
        [
            "wc".into(),
            "-l".into(),
            top.join("src").display().to_string()
        ]
    );
    let found = c[2].found.as_ref().expect("found paths");
    assert_eq!(found.tracked_from.as_deref(), Some(top.as_path()));
    for (cwd, line) in [
        (top.join("src"), "git diff --name-only | xargs cat"),
        (top.clone(), "git diff --name-only HEAD~1 | xargs cat"),
        (top.clone(), "git diff --cached --name-only | xargs cat"),
        (top.clone(), "git diff --stat | xargs cat"),
        (top.clone(), "git diff --name-only src | xargs cat"),
    ] {
        assert!(super::parse_line(line, &ctx(&cwd)).is_err(), "{line}");
    }
}
