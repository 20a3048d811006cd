//! A command that runs on paths another command found (`find -exec`, `… | xargs`, `cat
//! $(find …)`, `… | while read -r f`; [`shell::line::Found`]): its read of a root is a read
//! of every file below that root that the finder keeps, checked as a recursive walk of the
//! root is. What a walk's check does not see is looked for below the root, because this
//! command opens each path itself: a symbolic link (the command follows it where the walk
//! would not), a file whose name is protected (`sandbox.protected_names`), and, when xargs
//! or the shell splits the paths, a name they would make other paths of. `rm` of the found
//! paths (`find -delete` is taken as `-exec rm -d {} +`) removes each path below a root
//! that the finder keeps: each is checked as a write. A program with no option table
//! (`| xargs black`, `-exec npx prettier --write {} +`) may write each path it is given as
//! its output: each file git's index tracks below a root (`git ls-files`), else each entry
//! the finder keeps, is checked as one (`SandboxView::check_output`). Any other command that
//! writes or walks the found paths is refused.
use std::path::{Path, PathBuf};

use super::{Reason, sandbox::SandboxView, tracked};
use crate::{
    policy::PathAccess,
    shell::{
        CommandAnalysis,
        line::{Found, splits_into_other_paths},
    },
};

/// Entries below a root looked at, at most, before the command is refused.
const MAX_ENTRIES: usize = 100_000;

/// Turns `a`'s reads of `found`'s roots into walks of them, or, for what `git ls-files`
/// lists where `index_read` (no other git command in the line may change the index first),
/// into reads of the files git's index tracks below them ([`tracked`], read once a line in
/// `indexes`); Err: the refusal.
pub(super) fn take_found(
    sb: &SandboxView,
    name: &str,
    a: &mut CommandAnalysis,
    found: &Found,
    index_read: bool,
    indexes: &mut tracked::Indexes,
) -> Result<(), (Reason, String)> {
    let is_root = |p: &PathBuf| found.roots.iter().any(|r| r == p);
    let refuse = |what: &str| {
        Err((
            Reason::Shell,
            format!(
                "`{name}`: `{}` {what} the paths it is given by `find -exec` or `xargs`; run it on the paths by name",
                a.program
            ),
        ))
    };
    if removes(&a.program) && a.writes.iter().any(is_root) {
        // `rm` of what was found (`find … -delete`, `-exec rm`, `| xargs rm`): each path it
        // would remove is a write of its own, and nothing is read or walked.
        a.writes.retain(|p| !is_root(p));
        a.reads.retain(|p| !is_root(p));
        a.recursive_roots.retain(|p| !is_root(p));
        for root in &found.roots {
            check_removals(sb, root, found)
                .map_err(|m| (Reason::Sandbox, format!("`{name}`: {m}")))?;
        }
        return Ok(());
    }
    // A program with no option table given the found paths (`| xargs black`, `-exec npx
    // prettier --write {} +`): each path it is given may be its output, checked as one.
    let written_roots: Vec<&PathBuf> = a.writes.iter().filter(|p| is_root(p)).collect();
    let outputs_found = written_roots.iter().all(|p| a.outputs.contains(p));
    if !written_roots.is_empty() && !outputs_found {
        return refuse("would change");
    }
    let rewrites = !written_roots.is_empty();
    // The paths found take their own names in a destination directory, not their roots':
    // the destination itself is the write.
    a.written_into.clear();
    if !a.recursive_roots.is_empty() {
        return refuse("would walk the trees below");
    }
    let (roots, reads): (Vec<PathBuf>, Vec<PathBuf>) = a.reads.drain(..).partition(is_root);
    a.reads = reads;
    // What git's index holds is read whether or not the line may change it first: the
    // paths it lists must stay inside the tree either way.
    let index = match found.tracked_from.as_deref() {
        Some(cwd) => indexes.of(cwd).map_err(|why| {
            (
                Reason::Shell,
                format!(
                    "`{name}`: what `git ls-files` would list cannot be known: git's index {why}"
                ),
            )
        })?,
        None => None,
    }
    .filter(|_| index_read);
    let mut walked = Vec::new();
    for root in roots {
        let in_index = index.and_then(|t| t.below(&root));
        if rewrites {
            check_outputs_found(sb, &root, found, in_index.as_ref())
                .map_err(|m| (Reason::Sandbox, format!("`{name}`: {m}")))?;
        }
        let below = if in_index.is_some() {
            // No walk's check follows: the root itself is checked here, and looked below
            // by its real path, as the protected paths are written.
            let shown = root.to_string_lossy();
            let real = sb.resolve_path(&shown).map_err(|m| (Reason::Sandbox, m))?;
            sb.check(&shown, &real, PathAccess::Read)
                .map_err(|m| (Reason::Sandbox, m))?;
            real.path
        } else {
            walked.push(root.clone());
            root
        };
        look_below(sb, &below, found, in_index.as_ref())
            .map_err(|m| (Reason::Shell, format!("`{name}`: {m}")))?;
    }
    a.recursive_roots = walked;
    a.walks_names_only = false;
    a.walks_skip_hidden = found.skips_hidden;
    a.walk_filter = found.filter.clone();
    Ok(())
}

/// What below `root` the command would open that a walk's check misses: a link the filter
/// keeps that leads where it may not read, a file of a protected name, or a name xargs or
/// the shell would split. With `tracked` (what `git ls-files` lists), only what git's index
/// tracks is looked at, and as no walk's check follows, a tracked file inside a protected
/// path is refused here, and a directory git tracks files in that is a link now is checked
/// as a walk of where it leads.
fn look_below(
    sb: &SandboxView,
    root: &Path,
    found: &Found,
    tracked: Option<&tracked::Below>,
) -> Result<(), String> {
    // A filter whose globs cannot be read skips nothing.
    let matcher = found.filter.matcher();
    let visit = |path: &Path, rel: &Path, kind: std::fs::FileType| -> Result<bool, String> {
        if let Some(t) = tracked {
            if kind.is_symlink() && t.dirs.contains(rel) {
                let target = sb.resolve_path(&path.to_string_lossy())?;
                sb.check(&path.to_string_lossy(), &target, PathAccess::Tree)?;
                return Ok(false);
            }
            let listed = if kind.is_dir() { &t.dirs } else { &t.files };
            if !listed.contains(rel) {
                return Ok(false);
            }
        }
        // A directory's name is in the path of what is found below it; a file's only
        // if the filter keeps it.
        let kept = match &matcher {
            Some(m) if kind.is_dir() => !m.skips_below(rel),
            Some(m) => !m.skips(rel, false),
            None => true,
        };
        if !kept {
            return Ok(false);
        }
        if found.split && splits_into_other_paths(&name_of(path)) {
            return Err(split_name(path));
        }
        if kind.is_dir() {
            return Ok(true);
        }
        if let Some(pattern) = sb.protected_name(path) {
            let (why, instead) = if tracked.is_some() {
                (
                    "is tracked by git, so `git ls-files` would list it",
                    "list narrower paths (`git ls-files src`, `git ls-files '*.py'`)",
                )
            } else {
                (
                    "would be among the paths",
                    "leave it out of what is found (`-not -name`)",
                )
            };
            return Err(format!(
                "`{}` {why}, and its name matches protected name `{pattern}` (sandbox.protected_names); {instead}",
                path.display()
            ));
        }
        if kind.is_symlink() {
            let target = sb.resolve_path(&path.to_string_lossy())?;
            sb.check(&path.to_string_lossy(), &target, PathAccess::Read)?;
        } else if tracked.is_some()
            && let Some(x) = sb.protected_by_path(path)
        {
            return Err(format!(
                "`{}` is tracked by git, so `git ls-files` would list it, and it is inside protected path `{}`; protected paths are never readable or writable through tools; list narrower paths (`git ls-files src`)",
                path.display(),
                x.display()
            ));
        }
        Ok(false)
    };
    entries_below(
        root,
        found.skips_hidden,
        "the command runs on them; find",
        visit,
    )
}

/// Visits each entry below `root` (hidden ones left out with `skips_hidden`), looking into
/// a directory when `visit` says so, up to [`MAX_ENTRIES`]; `why` ends the refusal past
/// that ("… entries below ROOT to check before {why} in a narrower directory").
fn entries_below(
    root: &Path,
    skips_hidden: bool,
    why: &str,
    mut visit: impl FnMut(&Path, &Path, std::fs::FileType) -> Result<bool, String>,
) -> Result<(), String> {
    let mut dirs = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(format!(
                    "more than {MAX_ENTRIES} entries below `{}` to check before {why} in a narrower directory",
                    root.display()
                ));
            }
            if skips_hidden && entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap_or(&path);
            if visit(&path, rel, kind)? {
                dirs.push(path);
            }
        }
    }
    Ok(())
}

/// Whether `program` is `rm`.
fn removes(program: &str) -> bool {
    program.rsplit('/').next() == Some("rm")
}

/// What `rm` run on the paths found below `root` removes: each entry find's name tests keep
/// (`-name` tests a directory's name too), and the root itself when its name passes them
/// (find tests it too; `.` it never removes, but what is below it), each checked as a write
/// (a directory with all below it, as `rm -r` takes it). Directories are looked into
/// whether kept or not, but for the trees the filter leaves out.
fn check_removals(sb: &SandboxView, root: &Path, found: &Found) -> Result<(), String> {
    let check = |path: &Path| -> Result<(), String> {
        let shown = path.to_string_lossy();
        let real = sb.resolve_path(&shown)?;
        sb.check(&shown, &real, PathAccess::Write)
    };
    each_found(root, found, "they are removed; remove", check)
}

/// What a program with no option table may write when run on the paths found below `root`
/// (its outputs, [`SandboxView::check_output`]): each file git's index tracks there, with
/// `tracked`, else each entry find's name tests keep, as [`check_removals`] finds them.
fn check_outputs_found(
    sb: &SandboxView,
    root: &Path,
    found: &Found,
    tracked: Option<&tracked::Below>,
) -> Result<(), String> {
    let check = |path: &Path| -> Result<(), String> {
        let shown = path.to_string_lossy();
        let real = sb.resolve_path(&shown)?;
        sb.check_output(&shown, &real)
    };
    match tracked {
        Some(t) => {
            let matcher = found.filter.matcher();
            let kept = |rel: &&PathBuf| matcher.as_ref().is_none_or(|m| !m.skips(rel, false));
            t.files
                .iter()
                .filter(kept)
                .try_for_each(|rel| check(&root.join(rel)))
        }
        None => each_found(root, found, "they are given to it; run it", check),
    }
}

/// Runs `check` on each path below `root` that the finder keeps, and on the root itself when
/// its name passes find's name tests (`.` it never yields alone); `why` ends the refusal of
/// a tree too large to look through.
fn each_found(
    root: &Path,
    found: &Found,
    why: &str,
    check: impl Fn(&Path) -> Result<(), String>,
) -> Result<(), String> {
    let matcher = found.filter.matcher();
    let kept = |rel: &Path| matcher.as_ref().is_none_or(|m| !m.skips(rel, false));
    // The root's name as written (`Path::file_name` would skip a last `.`).
    let written = root.to_string_lossy();
    let root_name = written.rsplit('/').next().unwrap_or(".");
    if root_name != "." && kept(Path::new(root_name)) {
        check(root)?;
    }
    entries_below(root, found.skips_hidden, why, |path, rel, kind| {
        if found.split && splits_into_other_paths(&name_of(path)) {
            return Err(split_name(path));
        }
        if kept(rel) {
            check(path)?;
        }
        Ok(kind.is_dir() && matcher.as_ref().is_none_or(|m| !m.skips_below(rel)))
    })
}

/// The last name of `path`, as text.
fn name_of(path: &Path) -> std::borrow::Cow<'_, str> {
    path.file_name().unwrap_or_default().to_string_lossy()
}

fn split_name(path: &Path) -> String {
    format!(
        "`{}` has a blank, quote, backslash, glob character or a character outside ASCII in its name, which xargs or the shell would split, unquote or glob into other paths; use `find … -print0 | xargs -0`",
        path.display()
    )
}
