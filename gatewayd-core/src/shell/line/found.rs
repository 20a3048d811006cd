//! Commands that run on the paths another command finds: `find ROOTS … -exec COMMAND {} ;`
//! (or `+`), and `find ROOTS … | xargs COMMAND` (also `git ls-files`, and lines kept by
//! `grep`, `head`, `tail` or `sort` between them). The walk ([`super`]) checks `find` as
//! the walk of names it is, and COMMAND as a command of the line whose operand `{}` (or the
//! paths xargs appends) is each root: the check ([`crate::engine`]) then takes a read of a
//! root as a read of the files below it ([`Found`]), with the files find's `-name` tests
//! leave out skipped. What is not read that way (`-execdir`, `-ok`, `xargs -a FILE`, a
//! producer that is not a list of paths) is left to the analysis, which refuses programs
//! that run others.
use std::path::PathBuf;

use brush_parser::ast::{IoFileRedirectKind, IoFileRedirectTarget, IoRedirect};

use super::{Walk, runs_inner_commands, unanalysable, wrappers};
use crate::shell::{FileRule, ShellError, WalkFilter};

/// What a command's operands stand for: any path below these roots that passes the filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The roots (absolute), as the command's operands were written.
    pub roots: Vec<PathBuf>,
    /// The files the finding command leaves out, whatever directory they are in.
    pub filter: WalkFilter,
    /// The paths come to the command as xargs splits them (blanks, quotes and backslashes
    /// are separators or quoting): a name below a root that has one of those would become
    /// other paths, so the check looks for such names.
    pub split_by_xargs: bool,
}

/// `find … -exec …` cut in two: find's own words, and the commands it runs.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct FindExec {
    /// find without its `-exec` actions.
    pub(super) find: Vec<String>,
    /// Each `-exec`'s command, `{}` standing where the paths go.
    pub(super) commands: Vec<Vec<String>>,
    /// find's start points, as written (`.` when none is).
    pub(super) roots: Vec<String>,
    /// The files find's expression certainly leaves out.
    pub(super) filter: WalkFilter,
}

/// `argv` cut into find and its `-exec` commands, if it is `find` with `-exec`.
pub(super) fn find_exec(argv: &[String]) -> Result<Option<FindExec>, ShellError> {
    let name = argv[0].rsplit('/').next().unwrap_or(&argv[0]);
    if name != "find" || !argv.iter().any(|a| a == "-exec") {
        return Ok(None);
    }
    let (roots, expression_at) = start_points(argv);
    let mut find = argv[..expression_at].to_vec();
    let mut commands = Vec::new();
    let mut i = expression_at;
    while i < argv.len() {
        if argv[i] != "-exec" {
            find.push(argv[i].clone());
            i += 1;
            continue;
        }
        let end = argv[i + 1..]
            .iter()
            .position(|w| w == ";" || w == "+")
            .map(|at| i + 1 + at)
            .ok_or_else(|| unanalysable("`find -exec` without its `;` or `+`"))?;
        commands.push(exec_command(&argv[i + 1..end], &argv[end])?);
        i = end + 1;
    }
    // find runs an `-exec` on what the tests before it kept: the names tested before the
    // first one are the ones that filter every one.
    let first_exec = argv.iter().position(|a| a == "-exec").unwrap_or(argv.len());
    let filter = if find[expression_at..]
        .iter()
        .any(|w| BRANCHES.contains(&w.as_str()))
    {
        WalkFilter::default()
    } else {
        name_filter(&argv[expression_at..first_exec], &roots)
    };
    Ok(Some(FindExec {
        find,
        commands,
        roots,
        filter,
    }))
}

/// find's start points (after `-H -L -P -D … -O…`; `.` when none is written) and where
/// its expression starts.
fn start_points(argv: &[String]) -> (Vec<String>, usize) {
    let mut i = 1;
    while let Some(a) = argv.get(i) {
        match a.as_str() {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            _ if a.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let start = i;
    while argv
        .get(i)
        .is_some_and(|a| !a.starts_with('-') && !matches!(a.as_str(), "(" | "!" | ")" | ","))
    {
        i += 1;
    }
    let roots = if i == start {
        vec![".".to_owned()]
    } else {
        argv[start..i].to_vec()
    };
    (roots, i)
}

/// One `-exec`'s words up to its terminator: `{}` stands alone (find also replaces it inside
/// a word, which would make paths the check does not see), and with `+` it is last.
fn exec_command(words: &[String], terminator: &str) -> Result<Vec<String>, ShellError> {
    if words.is_empty() || words[0] == "{}" {
        return Err(unanalysable(
            "`find -exec` that runs no program, or the found file itself",
        ));
    }
    if let Some(w) = words.iter().find(|w| *w != "{}" && w.contains("{}")) {
        return Err(unanalysable(format!(
            "`{w}` in `find -exec` (find replaces `{{}}` inside a word; give `{{}}` as a word of its own)"
        )));
    }
    if terminator == "+" && words.last().is_none_or(|w| w != "{}") {
        return Err(unanalysable("`find -exec … +` whose `{}` is not last"));
    }
    Ok(words.to_vec())
}

/// find's operators that make an expression other than tests joined by "and" (`!` and
/// `-not` only turn the test after them around).
const BRANCHES: &[&str] = &["-o", "-or", "(", ")", ","];

/// The files find's expression leaves out for certain, below `roots` (as written): with
/// only tests joined by "and" (no [`BRANCHES`]), each `-name GLOB` must match a found
/// path's base name, and none of those after `!` or `-not` may; `-not -path '*/NAME/*'`
/// leaves out the trees of directories named NAME, and `-not -path 'ROOT/NAME/*'` the tree
/// of ROOT's NAME. Anything else keeps every file (an empty filter).
pub(super) fn name_filter(expression: &[String], roots: &[String]) -> WalkFilter {
    let mut filter = WalkFilter::default();
    if expression.iter().any(|w| BRANCHES.contains(&w.as_str())) {
        return filter;
    }
    for (i, w) in expression.windows(2).enumerate() {
        let negated = i > 0 && matches!(expression[i - 1].as_str(), "!" | "-not");
        match (w[0].as_str(), negated) {
            // Several `-name`s must all match; keeping a file that matches any keeps more.
            ("-name", false) => filter.files.push((FileRule::Include, w[1].clone())),
            ("-name", true) => filter.files.push((FileRule::Exclude, w[1].clone())),
            ("-path" | "-wholename", true) => excluded_tree(&w[1], roots, &mut filter),
            _ => {}
        }
    }
    filter
}

/// `-not -path PATTERN` of the forms `*/NAME/*` and `ROOT/NAME/*` (NAME plain), as the
/// filter's directories; any other pattern leaves nothing out.
fn excluded_tree(pattern: &str, roots: &[String], filter: &mut WalkFilter) {
    let plain = |n: &str| !n.is_empty() && !n.contains(['*', '?', '[', '\\', '/']);
    let Some(head) = pattern.strip_suffix("/*") else {
        return;
    };
    let Some((root, name)) = head.rsplit_once('/') else {
        return;
    };
    if !plain(name) {
        return;
    }
    if root == "*" {
        filter.dirs.push(name.to_owned());
    } else if roots.iter().all(|r| r.trim_end_matches('/') == root) {
        filter.top_dirs.push(name.to_owned());
    }
}

/// What a command of a pipeline writes to the next, when it is a list of paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PathList {
    /// The paths: below these roots, the filter's files left out.
    pub(super) found: Found,
    /// Ended by NUL bytes (`find -print0`, `git ls-files -z`), not newlines.
    pub(super) nul: bool,
}

/// The list of paths `argv` (run in `cwd`) writes, if it is one: `find` printing what it
/// finds, `git ls-files`, or a filter that keeps some of the lines of `before` (`grep`,
/// `head`, `tail`, `sort` without files).
pub(super) fn path_list(
    argv: &[String],
    cwd: &std::path::Path,
    before: Option<&PathList>,
) -> Option<PathList> {
    let list = |roots: Vec<String>, filter, nul| {
        Some(PathList {
            found: Found {
                roots: roots.iter().map(|r| cwd.join(r)).collect(),
                filter,
                split_by_xargs: false,
            },
            nul,
        })
    };
    match argv[0].as_str() {
        "find" => {
            let (roots, at) = start_points(argv);
            let expression = &argv[at..];
            let nul = expression.iter().any(|w| w == "-print0");
            let prints_else = expression
                .iter()
                .any(|w| find_action(w) && w != "-print0" && (w != "-print" || nul));
            let filter = name_filter(expression, &roots);
            (!prints_else).then(|| list(roots, filter, nul)).flatten()
        }
        "git" if argv.get(1).is_some_and(|v| v == "ls-files") => {
            let (options, paths): (Vec<&String>, Vec<&String>) =
                argv[2..].iter().partition(|w| w.starts_with('-'));
            let known = [
                "-z",
                "-c",
                "--cached",
                "-m",
                "--modified",
                "-o",
                "--others",
                "--exclude-standard",
                "-d",
                "--deleted",
                "--",
            ];
            let plain = |p: &&String| !p.contains(['*', '?', '[', '\\']) && !p.starts_with(':');
            if !options.iter().all(|o| known.contains(&o.as_str())) || !paths.iter().all(plain) {
                return None;
            }
            let nul = options.iter().any(|o| *o == "-z");
            let roots: Vec<String> = paths.into_iter().cloned().collect();
            let roots = if roots.is_empty() {
                vec![".".to_owned()]
            } else {
                roots
            };
            list(roots, WalkFilter::default(), nul)
        }
        "grep" | "head" | "tail" | "sort" if keeps_lines(argv) => {
            before.filter(|b| !b.nul).cloned()
        }
        _ => None,
    }
}

/// Whether a simple command with `redirects` reads its standard input from the pipe (no
/// redirection of descriptor 0, here-documents included), and writes to the pipe only its
/// own standard output (no redirection but of descriptor 2 to a file: `2>/dev/null`, not
/// `2>&1`).
pub(super) fn stdio(redirects: &[IoRedirect]) -> (bool, bool) {
    use IoFileRedirectKind::{DuplicateInput, Read, ReadAndWrite};
    let input_is_pipe = redirects.iter().all(|r| match r {
        IoRedirect::File(fd, kind, _) => {
            // A redirection without a number is of descriptor 0 when it reads, else 1.
            let reads = matches!(kind, Read | ReadAndWrite | DuplicateInput);
            fd.map_or(!reads, |n| n != 0)
        }
        IoRedirect::HereDocument(fd, _) | IoRedirect::HereString(fd, _) => fd.unwrap_or(0) != 0,
        IoRedirect::OutputAndError(..) => true,
    });
    let output_is_pipe = redirects.iter().all(|r| {
        matches!(
            r,
            IoRedirect::File(
                Some(2),
                IoFileRedirectKind::Write
                    | IoFileRedirectKind::Append
                    | IoFileRedirectKind::Clobber,
                IoFileRedirectTarget::Filename(_)
            )
        )
    });
    (input_is_pipe, output_is_pipe)
}

/// Whether `w` is one of find's actions (what it does with a path other than test it).
fn find_action(w: &str) -> bool {
    w.starts_with("-print")
        || w.starts_with("-fprint")
        || w.starts_with("-exec")
        || w.starts_with("-ok")
        || matches!(w, "-ls" | "-fls" | "-delete" | "-quit")
}

/// `grep PATTERN`, `head -n N`, `tail -N`, `sort -u`, …: each line it writes is a whole
/// line it read (no file operand, no option that writes parts or counts).
fn keeps_lines(argv: &[String]) -> bool {
    let args = &argv[1..];
    match argv[0].as_str() {
        "grep" => {
            let flags = [
                "-v",
                "-i",
                "-E",
                "-F",
                "-w",
                "-x",
                "--invert-match",
                "--ignore-case",
            ];
            let (options, operands): (Vec<&String>, Vec<&String>) =
                args.iter().partition(|a| a.starts_with('-'));
            options.iter().all(|o| flags.contains(&o.as_str())) && operands.len() == 1
        }
        "head" | "tail" => match args {
            [] => true,
            [n] => n
                .strip_prefix("-n")
                .or_else(|| n.strip_prefix('-'))
                .is_some_and(is_count),
            [o, n] => o == "-n" && is_count(n),
            _ => false,
        },
        _ => args
            .iter()
            .all(|a| ["-u", "-r", "-n", "-V", "-f"].contains(&a.as_str())),
    }
}

fn is_count(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
}

/// `xargs [OPTIONS] [COMMAND…]` on `list`: COMMAND with each root where the paths go (at
/// the end, or for `-I R`'s R), and what the paths stand for. `None` for an option it does
/// not read (`-a FILE`, `-E`, `-p`, …) or a NUL mode that is not the list's.
pub(super) fn xargs(args: &[String], list: &PathList) -> Option<Vec<(Vec<String>, Found)>> {
    let mut i = 0;
    let (mut nul, mut replace) = (false, None);
    while let Some(a) = args.get(i) {
        let value_next = ["-n", "-P", "-L", "-s", "-I"].contains(&a.as_str());
        match a.as_str() {
            "-0" | "--null" => nul = true,
            "-r" | "--no-run-if-empty" | "-t" | "--verbose" | "-x" | "--exit" => {}
            "-I" => replace = Some(args.get(i + 1)?.clone()),
            _ if value_next => {
                if !is_count(args.get(i + 1)?) {
                    return None;
                }
            }
            _ if a.starts_with("-I") => replace = Some(a[2..].to_owned()),
            _ if a.starts_with("--replace=") => replace = Some(a[10..].to_owned()),
            _ if ["-n", "-P", "-L", "-s"].iter().any(|o| a.starts_with(o)) && is_count(&a[2..]) => {
            }
            _ if ["--max-args=", "--max-procs=", "--max-lines="]
                .iter()
                .any(|o| a.strip_prefix(o).is_some_and(is_count)) => {}
            _ if a.starts_with('-') => return None,
            _ => break,
        }
        i += if value_next { 2 } else { 1 };
    }
    if nul != list.nul {
        return None;
    }
    let command: Vec<String> = match &args[i..] {
        [] => vec!["echo".to_owned()],
        rest => rest.to_vec(),
    };
    let found = Found {
        split_by_xargs: !nul,
        ..list.found.clone()
    };
    let mut out = Vec::new();
    for root in &found.roots {
        let root = root.to_string_lossy().into_owned();
        let argv = match &replace {
            Some(r) if command.iter().any(|w| w != r && w.contains(r.as_str())) => return None,
            Some(r) => command
                .iter()
                .map(|w| if w == r { root.clone() } else { w.clone() })
                .collect(),
            None => command.iter().cloned().chain([root]).collect(),
        };
        out.push((argv, found.clone()));
    }
    Some(out)
}

impl Walk {
    /// `find … -exec COMMAND …`: find as the walk of names it is, then each COMMAND once
    /// for each root, the root standing for `{}` ([`found`]).
    pub(super) fn find_exec(
        &mut self,
        f: FindExec,
        reads: Vec<PathBuf>,
        writes: Vec<PathBuf>,
    ) -> Result<(), ShellError> {
        self.push(f.find, reads, writes, true)?;
        let found = Found {
            roots: f.roots.iter().map(|r| self.ctx.cwd.join(r)).collect(),
            filter: f.filter,
            split_by_xargs: false,
        };
        for command in &f.commands {
            for root in &f.roots {
                let argv = command
                    .iter()
                    .map(|w| if w == "{}" { root.clone() } else { w.clone() })
                    .collect();
                self.push_found(argv, found.clone())?;
            }
        }
        Ok(())
    }

    /// A command that runs on what `found` stands for.
    pub(super) fn push_found(&mut self, argv: Vec<String>, found: Found) -> Result<(), ShellError> {
        if wrappers::is_builtin(&argv[0]) || runs_inner_commands(&argv) {
            return Err(unanalysable(format!(
                "`{}` run on found paths (give a program that reads them)",
                argv[0]
            )));
        }
        self.push(argv, Vec::new(), Vec::new(), true)?;
        if let Some(last) = self.out.last_mut() {
            last.found = Some(found);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::{FileRule, find_exec, name_filter};
    use crate::shell::line::tests::{cmds, refused};

    fn words(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn find_exec_is_cut_into_find_and_its_commands() {
        let f = find_exec(&words("find src -name *.rs -exec grep -l x {} ;"))
            .expect("read")
            .expect("find -exec");
        assert_eq!(f.find, words("find src -name *.rs"));
        assert_eq!(f.commands, [words("grep -l x {}")]);
        assert_eq!(f.roots, ["src"]);
        assert_eq!(f.filter.files, [(FileRule::Include, "*.rs".to_owned())]);
        let f = find_exec(&words("find -L a b -type f -exec wc -l {} + -print"))
            .expect("read")
            .expect("find -exec");
        assert_eq!(f.find, words("find -L a b -type f -print"));
        assert_eq!(f.roots, ["a", "b"]);
        assert!(f.filter.is_empty());
        let f = find_exec(&words("find -exec cat {} ;"))
            .expect("read")
            .expect("find -exec");
        assert_eq!(f.roots, ["."]);
        // An `-exec` before the `-name` runs on every file.
        let f = find_exec(&words("find . -exec cat {} ; -name *.rs"))
            .expect("read")
            .expect("find -exec");
        assert!(f.filter.is_empty());
        let f = find_exec(&words("find . -name *.rs -exec cat {} ; -o -print"))
            .expect("read")
            .expect("find -exec");
        assert!(f.filter.is_empty());
        assert_eq!(find_exec(&words("find . -name x")).expect("read"), None);
        assert_eq!(find_exec(&words("ls -exec")).expect("read"), None);
        for refused in [
            "find . -exec cat {}",
            "find . -exec {} ;",
            "find . -exec ;",
            "find . -exec cp {} {}.bak ;",
            "find . -exec cat {} x +",
        ] {
            assert!(find_exec(&words(refused)).is_err(), "{refused}");
        }
    }

    #[test]
    fn only_names_that_must_match_filter() {
        let dot = || vec![".".to_owned()];
        assert!(name_filter(&words("-name *.rs -o -name .env"), &dot()).is_empty());
        assert!(name_filter(&words("-name *.js ( -o )"), &dot()).is_empty());
        assert!(name_filter(&words("-iname *.rs"), &dot()).is_empty());
        let f = name_filter(&words("! -name *.rs"), &dot());
        assert_eq!(f.files, [(FileRule::Exclude, "*.rs".to_owned())]);
        let f = name_filter(
            &words("-name *.js -not -path ./node_modules/* ! -name *.min.js ! -path */.git/*"),
            &dot(),
        );
        assert_eq!(
            f.files,
            [
                (FileRule::Include, "*.js".to_owned()),
                (FileRule::Exclude, "*.min.js".to_owned())
            ]
        );
        assert_eq!(
            (f.top_dirs, f.dirs),
            (vec!["node_modules".to_owned()], vec![".git".to_owned()])
        );
        // `./x/*` leaves out a tree only below the root `.`; other patterns nothing.
        for (expression, roots) in [
            ("-not -path ./node_modules/*", vec!["src".to_owned()]),
            ("-not -path */node_*/*", dot()),
            ("-not -path *node_modules*", dot()),
            ("-path ./node_modules/*", dot()),
        ] {
            assert!(
                name_filter(&words(expression), &roots).is_empty(),
                "{expression}"
            );
        }
        let f = name_filter(&words("-type f -name *.py -name t*"), &dot());
        assert_eq!(f.files.len(), 2);
    }

    #[test]
    fn commands_on_found_paths_stand_for_the_roots() {
        let c = cmds("find src -name '*.rs' -exec grep -l x {} \\;");
        assert_eq!(c[0].argv, ["find", "src", "-name", "*.rs"]);
        assert_eq!(c[1].argv, ["grep", "-l", "x", "src"]);
        let found = c[1].found.as_ref().expect("found paths");
        assert_eq!(found.roots, [PathBuf::from("/work/src")]);
        assert!(!found.split_by_xargs && !found.filter.is_empty());
        let c = cmds("find . -type f | grep -v test | xargs wc -l");
        assert_eq!(c[3].argv, ["wc", "-l", "/work/."]);
        assert!(c[3].found.as_ref().is_some_and(|f| f.split_by_xargs));
        let c = cmds("find src 2>/dev/null | xargs wc -l 2>&1");
        assert!(c[2].found.is_some(), "{c:?}");
        let c = cmds("git ls-files -z src | xargs -0 -n 10 cat");
        assert_eq!(c[2].argv, ["cat", "/work/src"]);
        assert!(c[2].found.as_ref().is_some_and(|f| !f.split_by_xargs));
        let c = cmds("find . -name '*.py' | xargs -I{} cp {} /tmp/out");
        assert_eq!(c[2].argv, ["cp", "/work/.", "/tmp/out"]);
        // Not lists of paths, or not read: xargs is left to the analysis (which refuses it).
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
            let c = cmds(line);
            let x = c.iter().find(|c| c.argv[0] == "xargs").expect("xargs");
            assert!(x.analyse && x.found.is_none(), "{line}: {c:?}");
        }
        assert!(refused("find . -exec cd {} \\;").contains("found paths"));
        assert!(refused("find . | xargs bash -c true").contains("found paths"));
    }
}
