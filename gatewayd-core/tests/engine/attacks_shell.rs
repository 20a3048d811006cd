//! Attacks through shell tools: binaries off the allowlist, forbidden and unknown options,
//! file-valued options and recursive walks reaching protected paths, shell metacharacters,
//! unparsable lines, and URIs in place of paths. Every refusal asserts the decision, the reason
//! code, and that the tool's handler never ran.
use crate::support;

use gatewayd_core::engine::{Decision, Reason, Session};
use serde_json::json;
use support::*;

// ---- shell commands ----

fn shell_denied(f: &Fx, s: &mut Session, tool: &str, cmd: &str, reason: Reason) {
    let (o, ran) = f.call(s, tool, json!({"command": cmd}));
    assert_eq!(
        (o.verdict.decision, o.verdict.reason),
        (Decision::Deny, reason),
        "{cmd}: {}",
        o.verdict.message
    );
    assert!(!ran, "{cmd}: the handler ran");
    count_call("refused");
}

#[test]
fn shell_binary_not_on_the_allowlist() {
    let f = fx();
    let mut s = session();
    for cmd in [
        "curl https://evil.test",
        "/tmp/ls src",
        "python3 -c 'print(1)'",
        "sh -c ls",
        "./ls",
        "env ls",
    ] {
        shell_denied(&f, &mut s, "run_shell", cmd, Reason::Shell);
    }
}

#[test]
fn shell_forbidden_arguments() {
    let f = fx();
    let mut s = session();
    for cmd in [
        "find src -exec rm {} ;",
        "find src -execdir cat {} +",
        "find src -delete",
        "find src -fprint out/list.txt",
        "find src -name x -ok rm {} ;",
    ] {
        shell_denied(&f, &mut s, "run_shell", cmd, Reason::Shell);
    }
}

#[test]
fn shell_file_valued_options_are_path_checked() {
    let f = fx();
    let mut s = session();
    for cmd in [
        "grep -f .env notes.txt",
        "grep --file=.env notes.txt",
        "grep --file .env notes.txt",
        "grep -e x notes.txt .env",
        "cat .env",
        "cat key-link",
        "wc -l ../outside/data.txt",
        "head env-copy",
    ] {
        shell_denied(&f, &mut s, "run_shell", cmd, Reason::Sandbox);
    }
}

#[test]
fn shell_recursive_walks_reaching_protected_paths() {
    let f = fx();
    let mut s = session();
    let home = f.p("home");
    for cmd in [
        "grep -r KEY .".to_string(),
        "grep -rn KEY".into(),
        "ls -R".into(),
        "ls -R .".into(),
        "find .".into(),
        "find . -name id_rsa".into(),
        format!("find {home}"),
        format!("grep -r BEGIN {home}"),
        "grep -R TODO src".into(),
    ] {
        shell_denied(&f, &mut s, "run_shell", &cmd, Reason::Shell);
    }
}

#[test]
fn shell_metacharacters_through_a_shell() {
    let f = fx();
    let mut s = session();
    // Each command of a line is checked (`Sandbox` for a protected file it opens); what is
    // known only when the line runs is refused (`Shell`): substitutions, and `~` of a session
    // user the user database does not know (the fixture's `alice`).
    for (cmd, reason) in [
        ("ls; cat .env", Reason::Sandbox),
        ("ls && cat .env", Reason::Sandbox),
        ("ls\ncat .env", Reason::Sandbox),
        ("cat notes.txt | cat ../home/.ssh/id_rsa", Reason::Sandbox),
        ("cat < .env", Reason::Sandbox),
        ("cat $(echo .env)", Reason::Shell),
        ("cat `echo .env`", Reason::Shell),
        ("cat $SECRET_FILE", Reason::Shell),
        ("cat ~/.ssh/id_rsa", Reason::Shell),
        ("LD_PRELOAD=./x.so ls", Reason::Shell),
    ] {
        shell_denied(&f, &mut s, "run_sh", cmd, reason);
    }
    // The same shapes aimed at nothing protected are ordinary work.
    for cmd in [
        "cat *.txt",
        "ls > out/x",
        "cat notes.txt | wc",
        "X=1 ls",
        "ls && ls src",
    ] {
        let (o, ran) = f.call(&mut s, "run_sh", json!({"command": cmd}));
        assert_eq!(
            o.verdict.decision,
            Decision::Allow,
            "{cmd}: {}",
            o.verdict.message
        );
        assert!(ran, "{cmd}");
    }
}

#[test]
fn shell_line_that_cannot_be_parsed() {
    let f = fx();
    let mut s = session();
    shell_denied(
        &f,
        &mut s,
        "run_shell",
        "cat 'notes.txt",
        Reason::CheckError,
    );
    shell_denied(&f, &mut s, "run_shell", "", Reason::CheckError);
}

#[test]
fn shell_options_the_tables_do_not_know() {
    let f = fx();
    let mut s = session();
    for cmd in [
        "cat --unknown-opt notes.txt",
        "cat -Z notes.txt",
        "grep --no-such-flag TODO notes.txt",
        "grep -rQ TODO src",
        "ls --frobnicate src",
        "find src -frobnicate",
        "head --lines-from-end 2 notes.txt",
        "wc --files0-from-stdin notes.txt",
    ] {
        shell_denied(&f, &mut s, "run_shell", cmd, Reason::Shell);
    }
    let (o, _) = f.call(
        &mut s,
        "run_shell",
        json!({"command": "cat --unknown-opt notes.txt"}),
    );
    assert!(
        o.verdict
            .message
            .contains("`cat` has no option `--unknown-opt` that the gateway knows"),
        "{}",
        o.verdict.message
    );
}

#[test]
fn uris_in_place_of_paths() {
    let f = fx();
    let mut s = session();
    let env = format!("file://{}", f.p("work/.env"));
    let key = format!("file://localhost{}", f.p("home/.ssh/id%5Frsa"));
    for path in [
        env.clone(),
        key,
        format!("file://{}", f.p("outside/data.txt")),
        "file://evil.test/etc/passwd".to_string(),
        "https://api.search.test/notes.txt".to_string(),
    ] {
        denied(
            f.call(&mut s, "read_file", json!({"path": path})),
            Reason::Sandbox,
        );
    }
    denied(
        f.call(
            &mut s,
            "write_file",
            json!({"path": format!("file://{}", f.p("work/out/keep/x")), "content": "x"}),
        ),
        Reason::Sandbox,
    );
    // cat opens its operands as paths: a URI there is refused, whatever it names.
    shell_denied(
        &f,
        &mut s,
        "run_shell",
        &format!("cat {env}"),
        Reason::Shell,
    );
    shell_denied(
        &f,
        &mut s,
        "run_shell",
        "cat file:///etc/passwd",
        Reason::Shell,
    );
}

/// bash decodes `$'…'`'s escapes: `$'.e\x6ev'` is `.env`. The real bash reads the fixture's
/// `.env` through each line; the engine refuses them.
#[test]
fn ansi_c_escapes_that_spell_a_protected_path() {
    let f = fx();
    let mut s = session();
    for line in ["cat $'.e\\x6ev'", "cat $'\\056env'", "head -1 $'\\x2e'env"] {
        let o = bash_reads_it_the_engine_refuses(&f, &mut s, line, DEPLOY_KEY);
        assert_eq!(o.verdict.reason, Reason::Shell, "{line}");
    }
}

/// Variables that change how bash finds paths: `GLOBIGNORE` turns dotglob on (`*` matches
/// `.env`), `PWD` is what `$PWD` expands to, and `CDPATH` is where `cd` looks first. The
/// real bash prints a secret through each line; the engine refuses the assignment.
#[test]
fn variables_that_change_where_bash_finds_paths() {
    let f = fx();
    let mut s = session();
    std::fs::create_dir(f.p("work/.ssh")).expect("a decoy .ssh in the workspace");
    let home = f.p("home");
    for (line, secret) in [
        ("GLOBIGNORE=x; cat *".to_owned(), DEPLOY_KEY),
        (
            format!("PWD={home}; cat \"$PWD/.ssh/id_rsa\""),
            "PRIVATE KEY",
        ),
        (
            format!("CDPATH={home}; cd .ssh && cat id_rsa"),
            "PRIVATE KEY",
        ),
    ] {
        let o = bash_reads_it_the_engine_refuses(&f, &mut s, &line, secret);
        assert_eq!(o.verdict.reason, Reason::Shell, "{line}");
    }
}

/// Options that change how bash makes paths of words: `cd -P` goes where links lead
/// (`lnk/..` is the parent of the link's target), `set -f` stops globbing (`[x]` is then the
/// file named `[x]`, not `x`), `set +B` stops brace expansion (`{a,b}` is one name). The
/// decoys are links to the key; the real bash prints it through each line.
#[test]
fn shell_options_that_change_what_a_word_names() {
    let f = fx();
    let mut s = session();
    let key = f.p("home/.ssh/id_rsa");
    std::os::unix::fs::symlink(f.p("home/.aws"), f.p("work/lnk")).expect("symlink");
    for decoy in ["[x]", "{a,b}"] {
        std::os::unix::fs::symlink(&key, f.p(&format!("work/{decoy}"))).expect("symlink");
    }
    for plain in ["x", "a", "b"] {
        std::fs::write(f.p(&format!("work/{plain}")), "plain\n").expect("write");
    }
    for line in [
        "cd -P lnk/.. && cat .ssh/id_rsa",
        "set -f; cat [x]",
        "set -o noglob; cat [x]",
        "set +B; cat {a,b}",
        "bash -o noglob -c 'cat [x]'",
        "bash +o braceexpand -c 'cat {a,b}'",
    ] {
        bash_reads_it_the_engine_refuses(&f, &mut s, line, "PRIVATE KEY");
    }
}

/// bash's `[^…]` negates like `[!…]`, and `[[:lower:]]` is a class of letters; a glob
/// matcher that reads them otherwise finds no file and passes the word as written. The
/// real bash reads `.env` through each line; the engine refuses them.
#[test]
fn glob_brackets_as_bash_reads_them() {
    let f = fx();
    let mut s = session();
    for line in [
        "cat .[^a]nv",
        "cat .[[:lower:]]nv",
        "cat .en[^x]",
        "head -1 .e[[:alpha:]]v",
    ] {
        bash_reads_it_the_engine_refuses(&f, &mut s, line, DEPLOY_KEY);
    }
    let (o, _) = f.call(
        &mut s,
        "run_sh",
        serde_json::json!({"command": "ls src/[^.]*"}),
    );
    assert_eq!(o.verdict.decision, Decision::Allow, "{}", o.verdict.message);
}

/// An interpreter with no script reads its program from its input; left to the host, that
/// input takes code later, in no call the gateway decides (Codex sends no hook event for
/// its `write_stdin`, measured with Codex 0.171.0). Shown first: a python3 started with
/// nothing to run prints the key when code is written to its input afterwards.
#[test]
fn an_interpreter_left_to_read_its_program_from_the_hosts_input() {
    use std::io::Write as _;
    let f = fx_exec(&["/usr/bin/python3", "/usr/bin/node"]);
    let mut s = session();
    let mut python = std::process::Command::new("python3")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut input = python.stdin.take().expect("its input");
    let code = format!("print(open({:?}).read())\n", f.p("home/.ssh/id_rsa"));
    input.write_all(code.as_bytes()).expect("write");
    drop(input);
    let out = python.wait_with_output().expect("python3 ends").stdout;
    assert!(String::from_utf8_lossy(&out).contains("PRIVATE KEY"));
    for line in [
        "python3",
        "python3 -i",
        "cd src && python3 -",
        "timeout 60 node -i",
    ] {
        shell_denied(&f, &mut s, "run_sh", line, Reason::Shell);
    }
    // The program on the line, or from a file or a pipe, is the line's.
    for line in [
        "python3 - <<'EOF'\nprint(1)\nEOF",
        "cat notes.txt | python3",
        "python3 < notes.txt",
        "python3 --version",
    ] {
        assert_allowed(&f, &mut s, line);
    }
}

/// A program an interpreter is given on the line runs unanalysed, as a script does; its text
/// is read for what it names in plain sight. Shown first: the same programs, run bare, print
/// the key and start a command.
#[test]
fn programs_given_on_the_line_are_read_for_what_they_name() {
    let f = fx_exec(&["/usr/bin/python3", "/usr/bin/node", "/usr/bin/echo"]);
    let mut s = session();
    let key = f.p("home/.ssh/id_rsa");
    let reads_the_key = format!("print(open({key:?}).read())");
    let runs_a_command = "import os; os.system('echo ran-a-command')";
    for (args, printed) in [
        (vec!["-c", reads_the_key.as_str()], "PRIVATE KEY"),
        (vec!["-c", runs_a_command], "ran-a-command"),
    ] {
        let out = std::process::Command::new("python3")
            .args(&args)
            .output()
            .expect("python3 runs");
        assert!(String::from_utf8_lossy(&out.stdout).contains(printed));
    }
    for line in [
        format!("python3 -c '{reads_the_key}'"),
        format!("python3 - <<'EOF'\n{reads_the_key}\nEOF"),
        format!("echo '{reads_the_key}' | python3"),
        "python3 -c \"print(open('../home/.ssh/id_rsa').read())\"".to_owned(),
        "node -e \"require('fs').readFileSync(process.env.HOME + '/.ssh/id_rsa')\"".to_owned(),
    ] {
        shell_denied(&f, &mut s, "run_sh", &line, Reason::Sandbox);
    }
    for line in [
        format!("python3 -c \"{runs_a_command}\""),
        format!("python3 <<'EOF'\n{runs_a_command}\nEOF"),
        "node -e \"require('child_process').execSync('id')\"".to_owned(),
        "python3 -c 'import socket; socket.create_connection((\"example.org\", 80))'".to_owned(),
        "cat notes.txt | python3 -c 'import sys; exec(sys.stdin.read())'".to_owned(),
    ] {
        shell_denied(&f, &mut s, "run_sh", &line, Reason::Shell);
    }
    for line in [
        "python3 -c 'import sys; print(sys.version)'",
        "python3 -c \"import json; print(json.dumps({'a': 1}))\"",
        "node -e 'console.log(1 + 1)'",
        "echo 'print(2 + 2)' | python3",
        "python3 -c 'import os; print(os.listdir(\".\"))'",
    ] {
        assert_allowed(&f, &mut s, line);
    }
}
