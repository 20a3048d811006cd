//! Commands that run on the paths another command finds: `find ROOTS … -exec COMMAND {} ;`
//! (or `+`) here, and the lists of paths a pipeline or a substitution hands on (`find … |
//! xargs COMMAND`, `cat $(git ls-files)`, `… | while read -r f`) in [`super::pipes`]. The
//! walk ([`super`]) checks `find` as the walk of names it is, and COMMAND as a command of
//! the line whose operand `{}` (or the paths xargs appends) is each root: the check
//! ([`crate::engine`]) then takes a read of a root as a read of the files below it
//! ([`Found`]), with the files find's `-name` tests leave out skipped. `-execdir` and `-ok`
//! are left to the analysis, which refuses them; xargs on any other input is refused by
//! the walk.
use std::path::PathBuf;

use super::{Walk, runs_inner_commands, unanalysable, wrappers};
use crate::shell::{FileRule, ShellError, WalkFilter};

/// What a command's operands stand for: any path below these roots that passes the filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The roots (absolute), as the command's operands were written.
    pub roots: Vec<PathBuf>,
    /// The files the finding command leaves out, whatever directory they are in.
    pub filter: WalkFilter,
    /// It leaves out what is hidden below the roots (a name that starts with a dot, or
    /// below one), as `rg` does without `--hidden`.
    pub skips_hidden: bool,
    /// The paths come to the command split into words, by xargs (blanks, quotes and
    /// backslashes are separators or quoting) or by the shell (`$(find …)` outside quotes:
    /// blanks separate, glob characters match): a name below a root that has one of those
    /// would become other paths, so the check looks for such names.
    pub split: bool,
    /// The paths are those git's index tracks below the roots (`git ls-files` without
    /// `--others`), in the repository git finds from this directory (where it ran). The
    /// check may then take the index's entries for the files below the roots.
    pub tracked_from: Option<PathBuf>,
}

/// Whether xargs (without `-0`) or the shell's splitting and globbing would not take `name`
/// as it is: a blank, quote, backslash or glob character, or a character `git ls-files`
/// prints quoted and escaped (a control character, one outside ASCII).
pub fn splits_into_other_paths(name: &str) -> bool {
    name.contains([' ', '\'', '"', '\\', '*', '?', '['])
        || name.chars().any(|c| c.is_control() || !c.is_ascii())
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

/// `argv` cut into find and its `-exec` commands, if it is `find` with `-exec` or
/// `-delete` (which removes what the tests before it kept, files and empty directories,
/// as `-exec rm -d {} +` would: the check then takes each path it would remove as a write).
pub(super) fn find_exec(argv: &[String]) -> Result<Option<FindExec>, ShellError> {
    let name = argv[0].rsplit('/').next().unwrap_or(&argv[0]);
    if name != "find" {
        return Ok(None);
    }
    if let Some(rewritten) = delete_as_exec(argv) {
        return find_exec(&rewritten);
    }
    if !argv.iter().any(|a| a == "-exec") {
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

/// find's `-delete` actions (outside an `-exec`'s words) as `-exec rm -d {} +`; `None` when
/// there is none.
fn delete_as_exec(argv: &[String]) -> Option<Vec<String>> {
    let mut out = Vec::with_capacity(argv.len() + 4);
    let mut in_exec = false;
    let mut deletes = false;
    for word in argv {
        match word.as_str() {
            "-exec" | "-execdir" | "-ok" | "-okdir" if !in_exec => in_exec = true,
            ";" | "+" if in_exec => in_exec = false,
            "-delete" if !in_exec => {
                deletes = true;
                out.extend(["-exec", "rm", "-d", "{}", "+"].map(String::from));
                continue;
            }
            _ => {}
        }
        out.push(word.clone());
    }
    deletes.then_some(out)
}

/// find's start points (after `-H -L -P -D … -O…`; `.` when none is written) and where
/// its expression starts.
pub(super) fn start_points(argv: &[String]) -> (Vec<String>, usize) {
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
            split: false,
            skips_hidden: false,
            tracked_from: None,
        };
        for command in &f.commands {
            for root in &f.roots {
                let argv = command
                    .iter()
                    .map(|w| if w == "{}" { root.clone() } else { w.clone() })
                    .collect();
                self.push_found(argv, Vec::new(), Vec::new(), found.clone())?;
            }
        }
        Ok(())
    }

    /// A command that runs on what `found` stands for, with the files its redirections
    /// open.
    pub(super) fn push_found(
        &mut self,
        argv: Vec<String>,
        reads: Vec<PathBuf>,
        writes: Vec<PathBuf>,
        found: Found,
    ) -> Result<(), ShellError> {
        if wrappers::is_builtin(&argv[0]) || runs_inner_commands(&argv) {
            return Err(unanalysable(format!(
                "`{}` run on found paths (give a program that reads them)",
                argv[0]
            )));
        }
        self.push(argv, reads, writes, true)?;
        if let Some(last) = self.out.last_mut() {
            last.found = Some(found);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{FileRule, find_exec, name_filter};

    fn words(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn find_delete_is_rm_of_what_the_tests_before_it_keep() {
        let f = find_exec(&words("find . -name *.pyc -delete"))
            .expect("read")
            .expect("a -delete");
        assert_eq!(f.find, words("find . -name *.pyc"));
        assert_eq!(f.commands, vec![words("rm -d {}")]);
        assert_eq!(f.filter.files, vec![(FileRule::Include, "*.pyc".into())]);
        // A `-delete` among an `-exec`'s words is that command's.
        let f = find_exec(&words("find . -exec echo -delete {} ;"))
            .expect("read")
            .expect("an -exec");
        assert_eq!(f.commands, vec![words("echo -delete {}")]);
        // Before the tests, it removes everything.
        let f = find_exec(&words("find src -delete -name *.rs"))
            .expect("read")
            .expect("a -delete");
        assert!(f.filter.files.is_empty());
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
}
