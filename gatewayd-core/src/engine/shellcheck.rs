//! The policy part of a shell-command argument: the line is parsed to argv without a shell
//! by [`crate::shell`]; here the binary allowlist, forbidden arguments, the files it reads
//! and the trees it walks are checked against the sandbox.
use std::path::{Path, PathBuf};

use super::{
    Reason, archive, git_apply, inline_program,
    sandbox::{self, EgressView, Resolved, SandboxView},
};
use crate::{
    policy::{PathAccess, ShellRule},
    shell::{
        self, CommandAnalysis, ShellError,
        line::{Input, LineCommand},
    },
};

/// Parses and analyses `line`. Err: (reason, message). A refused metacharacter or
/// assignment, and an option a known command's table does not know, are `shell` denials; a
/// line that cannot be parsed is a `check_error`.
fn analyze_line(line: &str, through_shell: bool) -> Result<CommandAnalysis, (Reason, String)> {
    let map = |e: ShellError| {
        let r = match e {
            ShellError::Metachar { .. }
            | ShellError::Assignment(_)
            | ShellError::UnknownOption { .. } => Reason::Shell,
            _ => Reason::CheckError,
        };
        (r, format!("command line refused: {e}"))
    };
    let argv = shell::split(line, through_shell).map_err(map)?;
    shell::analyze(&argv).map_err(map)
}

/// The canonical form of a path the analysis found (as the command opens it: a word that
/// looks like a URI is a relative path to `cat`; URIs a program reads as such were turned
/// into their paths by the analysis).
pub(super) fn resolve(sb: &SandboxView, p: &Path) -> Result<Resolved, (Reason, String)> {
    sb.resolve_path(&p.to_string_lossy()).map_err(|m| {
        (
            Reason::Sandbox,
            format!("command path cannot be resolved: {m}"),
        )
    })
}

/// Whether `program` may run. A bare name must be the file name of a listed binary. A path
/// (relative ones taken from `cwd`, where the command runs) is the file it resolves to,
/// which must be a listed binary, bear a listed name (a version after it too: a virtual
/// environment's `python` resolves to `python3.11`, for `python3`), or, when a shell that
/// runs script files is listed, lie where the agent may write: the agent's own program
/// (`./node_modules/.bin/jest`, `target/debug/app`), which then runs as a script given to
/// that shell does (`bash ./build.sh`, which could run it anyway), not analysed.
fn program_allowed(sb: &SandboxView, rule: &ShellRule, program: &str, cwd: &Path) -> bool {
    let listed: Vec<PathBuf> = match &rule.exec {
        Some(v) => v.iter().map(PathBuf::from).collect(),
        None => sb.exec.clone(),
    };
    if !program.contains('/') {
        return listed
            .iter()
            .any(|l| l.file_name().is_some_and(|n| n == program) || l.as_os_str() == program);
    }
    let Ok(real) = sb.resolve_path(&cwd.join(program).to_string_lossy()) else {
        return false;
    };
    let file_name = real.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let is_listed_binary = |l: &PathBuf| {
        l.is_absolute()
            && (*l == real.path || std::fs::canonicalize(l).is_ok_and(|c| c == real.path))
    };
    let has_listed_name = |l: &PathBuf| {
        l.to_str()
            .is_some_and(|name| !name.contains('/') && shell::names_program(file_name, name))
    };
    let runs_scripts = |l: &PathBuf| {
        l.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| shell::interpreters::SCRIPT_SHELLS.contains(&n))
    };
    let readable = || sb.check(program, &real, PathAccess::Read).is_ok();
    let own = || sb.check(program, &real, PathAccess::Write).is_ok();
    listed.iter().any(is_listed_binary)
        || (listed.iter().any(has_listed_name) && readable())
        || (listed.iter().any(runs_scripts) && own())
}

/// Programs often refused by the starter, each with one it lists that does the job.
const INSTEAD: &[(&[&str], &str)] = &[
    (&["patch"], "apply the diff with `git apply FILE.diff`"),
    (&["wget"], "download with `curl -fsSLO URL`"),
    (
        &["pkill", "killall"],
        "stop a job the line started with `kill %1`",
    ),
    (
        &["vi", "vim", "nvim", "nano", "emacs", "code"],
        "edit the file with the agent's own file tools (an editor waits for a person)",
    ),
];

/// The refusal of a program off the allowlist, with what the model can run instead: a
/// script by a path (`./build.sh`) through its interpreter, which runs it as a script.
fn not_allowlisted(name: &str, program: &str) -> (Reason, String) {
    let what = format!("`{name}`: program `{program}` is not on the exec allowlist");
    let interpreter = match Path::new(program).extension().and_then(|e| e.to_str()) {
        Some("py") => Some("python3"),
        Some("js" | "mjs" | "cjs") => Some("node"),
        Some("sh" | "bash") => Some("bash"),
        _ => None,
    };
    let file_name = program.rsplit('/').next().unwrap_or(program);
    let instead = INSTEAD
        .iter()
        .find(|(names, _)| names.contains(&file_name))
        .map(|(_, how)| how);
    let step = match (interpreter, instead) {
        (Some(i), _) if program.contains('/') => format!(
            "run the script through its interpreter (`{i} {program}`) if the policy allows it, or ask the user to add `{program}` to the exec allowlist"
        ),
        (_, Some(how)) => format!(
            "{how}, if the policy allows it; or ask the user to add `{program}` to the exec allowlist"
        ),
        _ => format!(
            "use a program the policy allows, or ask the user to add `{program}` to the exec allowlist"
        ),
    };
    (Reason::Shell, super::with_next(&what, &step))
}

/// What an allowed line does that the rest of the decision needs to know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LineReach {
    /// A command of the line connects to a URL (allowed by the egress list): the line sends
    /// data out, so the secret matcher and the Rule of Two treat the call as `sends_out`.
    pub(crate) sends_out: bool,
}

/// Checks one command line; `user` is the session's (`~`, `$HOME` are that user's home).
pub(crate) fn check(
    sb: &SandboxView,
    egress: &EgressView,
    rule: &ShellRule,
    name: &str,
    line: &str,
    user: &str,
) -> Result<LineReach, (Reason, String)> {
    if rule.through_shell {
        match shell::split(line, true) {
            // What a shell would interpret, or a shell's `-c` body: the line's commands one
            // by one.
            Err(ShellError::Metachar { .. } | ShellError::Assignment(_)) => {
                return check_line(sb, egress, rule, name, line, user);
            }
            Ok(argv) if shell::line::runs_inner_commands(&argv) => {
                return check_line(sb, egress, rule, name, line, user);
            }
            _ => {}
        }
    }
    let a = analyze_line(line, rule.through_shell)?;
    if a.program_from_input {
        return Err(program_from_the_hosts_input(name, &a.program));
    }
    if a.patch_from_input {
        return Err(patch_not_on_the_line(name, &a.program, HOSTS_INPUT));
    }
    let cwd = line_start(sb);
    let reach = check_analysis(sb, egress, rule, name, &a, &cwd)?;
    let home = || shell::line::user_home(user);
    for text in &a.inline_programs {
        inline_program::check(sb, egress, name, &a.program, text, &cwd, &home)?;
    }
    Ok(reach)
}

/// Where a line starts: `sandbox.root`, else gatewayd's own directory.
fn line_start(sb: &SandboxView) -> PathBuf {
    sb.root
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// The program an interpreter with no script reads from its input, as the line gives it
/// ([`Input`]), checked: its text is read as `-c CODE`'s is; a file is a script (its read is
/// checked); the host's input, or another program's output, is refused.
fn check_program_from_input(
    sb: &SandboxView,
    egress: &EgressView,
    name: &str,
    a: &CommandAnalysis,
    c: &LineCommand,
    home: &dyn Fn() -> Option<PathBuf>,
) -> Result<(), (Reason, String)> {
    match &c.input {
        Input::Host => Err(program_from_the_hosts_input(name, &a.program)),
        Input::Text(text) => {
            inline_program::check(sb, egress, name, &a.program, text, &c.cwd, home)
        }
        Input::Files => Ok(()),
        Input::Output(writer) => Err((
            Reason::Shell,
            super::with_next(
                &format!(
                    "`{name}`: `{}` would run as its program what {writer} gives its input, which the line does not show",
                    a.program
                ),
                "save it as a file in the workspace, read it, then run the file",
            ),
        )),
    }
}

/// The files of the patch `apply_patch` reads from its input, as writes from where it runs;
/// a path `~/…` is both that and the same below the session user's home (Codex 0.171
/// writes it below the working directory, measured; its later source expands it from
/// `$HOME`). Err: a patch the line does not give (Codex applies only what the call shows).
fn take_patch_from_input(
    name: &str,
    a: &mut CommandAnalysis,
    c: &LineCommand,
    home: &dyn Fn() -> Option<PathBuf>,
) -> Result<(), (Reason, String)> {
    let text = match &c.input {
        Input::Text(text) => text,
        Input::Host => return Err(patch_not_on_the_line(name, &a.program, HOSTS_INPUT)),
        Input::Files => {
            let what = "in a file, which may change before it runs";
            return Err(patch_not_on_the_line(name, &a.program, what));
        }
        Input::Output(writer) => {
            let what = format!("that {writer} gives its input");
            return Err(patch_not_on_the_line(name, &a.program, &what));
        }
    };
    let refuse = |why: &str| (Reason::Shell, format!("`{name}`: `{}`: {why}", a.program));
    for file in shell::patch_files(text).map_err(|why| refuse(&why))? {
        if let Some(rest) = shell::below_home(&file) {
            let unknown = || refuse("`~` in the patch, and the session user's home is not known");
            a.writes.push(home().ok_or_else(unknown)?.join(rest));
        }
        a.writes.push(c.cwd.join(&file));
    }
    Ok(())
}

/// Where a patch read from the host's input comes from.
const HOSTS_INPUT: &str = "the agent host writes to its input later";

/// The refusal of `apply_patch` whose patch, `what`, the line does not show.
fn patch_not_on_the_line(name: &str, program: &str, what: &str) -> (Reason, String) {
    let what = format!("`{name}`: `{program}` would apply the patch {what}");
    let step =
        format!("give the patch on the line, as a command of its own: `{program} <<'EOF'` … `EOF`");
    (Reason::Shell, super::with_next(&what, &step))
}

/// The refusal of an interpreter left to read its program from the host's input, which the
/// host can write to later without a call the gateway decides (Codex's `write_stdin`).
fn program_from_the_hosts_input(name: &str, program: &str) -> (Reason, String) {
    let what = format!(
        "`{name}`: `{program}` with no script reads its program from its input, which the agent host can write to later without a call the gateway decides"
    );
    let step = format!(
        "run a script file (`{program} script`), or give the program on the line (`{program} - <<'EOF'` … `EOF`)"
    );
    (Reason::Shell, super::with_next(&what, &step))
}

/// Programs that write no file (but through a redirection, which a line shows): beside them
/// on a line, ripgrep's ignore files are those the call is decided on.
const WRITE_NO_FILE: [&str; 16] = [
    "rg", "grep", "head", "tail", "wc", "cut", "tr", "uniq", "cat", "ls", "echo", "printf", "pwd",
    "true", "false", "nl",
];

/// A line of several commands, redirections or expansions ([`shell::line`]): each command
/// is checked as a line of its own would be, its relative paths taken from where it runs,
/// and each file a redirection opens as a read or a write.
fn check_line(
    sb: &SandboxView,
    egress: &EgressView,
    rule: &ShellRule,
    name: &str,
    line: &str,
    user: &str,
) -> Result<LineReach, (Reason, String)> {
    let mut reach = LineReach::default();
    let ctx = shell::line::Context::new(
        line_start(sb),
        Some(user.to_owned()),
        shell::line::user_home,
    );
    let commands = shell::line::parse_line(line, &ctx)
        .map_err(|e| (Reason::Shell, format!("command line refused: {e}")))?;
    // What `git ls-files` lists is what the index tracks when the call is decided, unless
    // another git command of the line may change the index first: one that is not among
    // those that only read it.
    const READ_THE_INDEX: [&str; 11] = [
        "ls-files",
        "diff",
        "status",
        "log",
        "show",
        "rev-parse",
        "blame",
        "grep",
        "describe",
        "shortlog",
        "rev-list",
    ];
    let index_read = commands.iter().all(|c| {
        let git = c
            .argv
            .first()
            .is_some_and(|p| p.rsplit('/').next() == Some("git"));
        !git || c
            .argv
            .get(1)
            .is_some_and(|v| READ_THE_INDEX.contains(&v.as_str()))
    });
    // ripgrep's ignore files are read when the call is decided: unless every other command
    // of the line is one that writes no file, one of them may write an ignore file first.
    let ignore_files_hold = commands.iter().all(|c| {
        let program = c.argv.first().map(|p| p.rsplit('/').next().unwrap_or(p));
        c.writes.is_empty() && program.is_some_and(|p| WRITE_NO_FILE.contains(&p))
    });
    let mut indexes = super::tracked::Indexes::default();
    for c in &commands {
        if let Some(program) = c.argv.first() {
            if c.analyse {
                let mut a = shell::analyze(&c.argv)
                    .map_err(|e| (Reason::Shell, format!("command line refused: {e}")))?;
                if let Some(rules) = a.walk_filter.ripgrep.as_mut() {
                    rules.ignore_files &= ignore_files_hold;
                }
                for p in a
                    .reads
                    .iter_mut()
                    .chain(a.looked_at.iter_mut())
                    .chain(a.writes.iter_mut())
                    .chain(a.outputs.iter_mut())
                    .chain(a.recursive_roots.iter_mut())
                {
                    *p = c.cwd.join(&*p);
                }
                for into in &mut a.written_into {
                    into.dir = c.cwd.join(&into.dir);
                }
                let home = || shell::line::user_home(user);
                if a.patch_from_input {
                    take_patch_from_input(name, &mut a, c, &home)?;
                }
                if a.program_from_input {
                    check_program_from_input(sb, egress, name, &a, c, &home)?;
                }
                for text in &a.inline_programs {
                    inline_program::check(sb, egress, name, &a.program, text, &c.cwd, &home)?;
                }
                if let Some(found) = &c.found {
                    super::found_paths::take_found(
                        sb,
                        name,
                        &mut a,
                        found,
                        index_read,
                        &mut indexes,
                    )?;
                }
                reach.sends_out |= check_analysis(sb, egress, rule, name, &a, &c.cwd)?.sends_out;
            } else if !program_allowed(sb, rule, program, &c.cwd) {
                return Err(not_allowlisted(name, program));
            }
        }
        check_paths(sb, name, &c.reads, PathAccess::Read)?;
        check_paths(sb, name, &c.writes, PathAccess::Write)?;
    }
    Ok(reach)
}

/// The policy checks on an analysed command that runs in `cwd`.
pub(crate) fn check_analysis(
    sb: &SandboxView,
    egress: &EgressView,
    rule: &ShellRule,
    name: &str,
    a: &CommandAnalysis,
    cwd: &Path,
) -> Result<LineReach, (Reason, String)> {
    if !program_allowed(sb, rule, &a.program, cwd) {
        return Err(not_allowlisted(name, &a.program));
    }
    if !a.forbidden.is_empty() {
        return Err((
            Reason::Shell,
            format!(
                "`{name}`: `{}` is refused: {}",
                a.program,
                a.forbidden.join("; ")
            ),
        ));
    }
    for p in &a.recursive_roots {
        let real = resolve(sb, p)?;
        // A walk that lists names reads no protected file's contents; a protected
        // directory's entries are its contents.
        let reached = sb.protected_hit(&real).or_else(|| {
            sb.protected_reached_below(
                &real,
                a.walks_names_only,
                a.walks_skip_hidden,
                &a.walk_filter,
            )
        });
        if let Some(x) = reached {
            return Err((
                Reason::Shell,
                super::with_next(
                    &format!(
                        "`{name}`: recursive walk of `{}` reaches protected path `{}`",
                        p.display(),
                        x.display()
                    ),
                    "leave it out of the walk (`rg` skips hidden files; `grep -r` takes `--exclude=NAME`, `--exclude-dir=NAME` or `--include=GLOB`), or walk a directory that does not hold it",
                ),
            ));
        }
        if a.follows_symlinks {
            return Err((
                Reason::Shell,
                format!(
                    "`{name}`: a recursive walk that follows symbolic links (`{}`) may leave its root; walk without following links",
                    p.display()
                ),
            ));
        }
        // A walk of names needs the root readable; one that reads contents, the whole tree.
        // (What lies below was checked just above, hidden entries and names considered.)
        let access = if a.walks_names_only || a.walks_skip_hidden || !a.walk_filter.is_empty() {
            PathAccess::Read
        } else {
            PathAccess::Tree
        };
        sb.check(&p.to_string_lossy(), &real, access)
            .map_err(|m| (Reason::Sandbox, format!("`{name}`: {m}")))?;
    }
    for p in &a.reads {
        let real = resolve(sb, p)?;
        let raw = p.to_string_lossy();
        let checked = if a.looked_at.contains(p) {
            sb.check_metadata(&raw, &real)
        } else {
            sb.check(&raw, &real, PathAccess::Read)
        };
        checked.map_err(|m| (Reason::Sandbox, format!("`{name}`: {m}")))?;
    }
    check_writes(sb, name, a)?;
    archive::check_extractions(sb, name, &a.extractions, cwd)?;
    git_apply::check_patches(sb, name, &a.patches, cwd)?;
    check_urls(egress, name, &a.program, &a.urls)?;
    Ok(LineReach {
        sends_out: !a.urls.is_empty(),
    })
}

/// Each URL a command connects to, against the egress allowlist (`sandbox` denials, as a
/// `url` argument's destination is).
fn check_urls(
    egress: &EgressView,
    name: &str,
    program: &str,
    urls: &[String],
) -> Result<(), (Reason, String)> {
    for url in urls {
        let d = sandbox::parse_url(url)
            .map_err(|m| (Reason::Shell, format!("`{name}`: `{program}`: {m}")))?;
        if !egress.allows(&d) {
            return Err((
                Reason::Sandbox,
                super::with_next(
                    &format!(
                        "`{name}`: `{program}` would connect to {}:{}, which is not in the network egress allowlist",
                        d.host, d.port
                    ),
                    &egress.next_step(
                        &d,
                        "fetch only from hosts the policy allows, or ask the user to allow this one",
                    ),
                ),
            ));
        }
    }
    Ok(())
}

/// Each write of an analysed command: a destination written into that is a directory by
/// the entries it receives, a program's output by itself alone, each other path with what
/// it holds.
fn check_writes(sb: &SandboxView, name: &str, a: &CommandAnalysis) -> Result<(), (Reason, String)> {
    for p in &a.writes {
        let real = resolve(sb, p)?;
        let raw = p.to_string_lossy();
        let into = a.written_into.iter().find(|w| w.dir == *p);
        let checked = match into {
            Some(into) if real.is_dir() => {
                let entries: Vec<PathBuf> = into.names.iter().map(|n| p.join(n)).collect();
                check_paths(sb, name, &entries, PathAccess::Write)?;
                Ok(())
            }
            _ if a.outputs.contains(p) => sb.check_output(&raw, &real),
            _ => sb.check(&raw, &real, PathAccess::Write),
        };
        checked.map_err(|m| (Reason::Sandbox, format!("`{name}`: {m}")))?;
    }
    Ok(())
}

/// A path a program may write as its output, resolved and checked as one
/// ([`SandboxView::check_output`]; `sandbox` denials).
pub(super) fn check_output_path(
    sb: &SandboxView,
    name: &str,
    p: &Path,
) -> Result<(), (Reason, String)> {
    let real = resolve(sb, p)?;
    sb.check_output(&p.to_string_lossy(), &real)
        .map_err(|m| (Reason::Sandbox, format!("`{name}`: {m}")))
}

/// Each path resolved and checked against the sandbox for `access` (`sandbox` denials).
pub(super) fn check_paths(
    sb: &SandboxView,
    name: &str,
    paths: &[PathBuf],
    access: PathAccess,
) -> Result<(), (Reason, String)> {
    for p in paths {
        let real = resolve(sb, p)?;
        sb.check(&p.to_string_lossy(), &real, access)
            .map_err(|m| (Reason::Sandbox, format!("`{name}`: {m}")))?;
    }
    Ok(())
}
