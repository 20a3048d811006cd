//! The files git's index tracks, for a command run on what `git ls-files` lists
//! ([`crate::shell::line::Found::tracked_from`]): the index of the repository git finds
//! from where `git ls-files` runs, read with gitoxide's reader of the index format
//! (`gix-index`), every entry a plain relative path. Where the work tree or the index may
//! not be what git sees, the check counts every file below the roots, as for `find`.
use crate::shell::git_repo;
use std::{
    collections::HashSet,
    os::unix::ffi::OsStrExt as _,
    path::{Path, PathBuf},
};

/// Entries of an index read, at most; a larger index is not read.
pub(super) const MAX_ENTRIES: usize = 100_000;

/// What git's index tracks: its work tree (canonical) and the paths of its entries,
/// relative to that work tree.
#[derive(Debug)]
pub(super) struct Tracked {
    pub(super) work_tree: PathBuf,
    pub(super) paths: Vec<PathBuf>,
}

/// What git's index tracks below one directory, relative to it: the files, and the
/// directories they are in.
#[derive(Debug, Default)]
pub(super) struct Below {
    pub(super) files: HashSet<PathBuf>,
    pub(super) dirs: HashSet<PathBuf>,
}

impl Tracked {
    /// What the index tracks below `root`; `None` when `root` is not in the work tree (or
    /// cannot be resolved).
    pub(super) fn below(&self, root: &Path) -> Option<Below> {
        let real = std::fs::canonicalize(root).ok()?;
        let prefix = real.strip_prefix(&self.work_tree).ok()?;
        let mut below = Below::default();
        for path in &self.paths {
            let Ok(rel) = path.strip_prefix(prefix) else {
                continue;
            };
            for dir in rel.ancestors().skip(1) {
                if dir.as_os_str().is_empty() || !below.dirs.insert(dir.to_path_buf()) {
                    break;
                }
            }
            below.files.insert(rel.to_path_buf());
        }
        Some(below)
    }
}

/// The indexes one line's lists of paths come from, by the directory `git ls-files` runs in:
/// each read once ([`tracked_files`]), however many commands run on what it lists
/// (`git ls-files src docs | xargs wc -l` is a command for each root).
#[derive(Debug, Default)]
pub(super) struct Indexes(Vec<(PathBuf, Result<Option<Tracked>, String>)>);

impl Indexes {
    /// [`tracked_files`] of `cwd`, read the first time it is asked for.
    pub(super) fn of(&mut self, cwd: &Path) -> Result<Option<&Tracked>, String> {
        let at = if let Some(at) = self.0.iter().position(|(c, _)| c == cwd) {
            at
        } else {
            self.0.push((cwd.to_path_buf(), tracked_files(cwd)));
            self.0.len() - 1
        };
        match &self.0[at].1 {
            Ok(tracked) => Ok(tracked.as_ref()),
            Err(why) => Err(why.clone()),
        }
    }
}

/// An index larger than this is not read.
const MAX_INDEX_BYTES: u64 = 256 << 20;

/// What `git ls-files` run in `cwd` lists, as far as the check can know it. `Ok(None)`: at
/// most files below `cwd` (no repository, whose `git ls-files` lists nothing; or one whose
/// work tree or index this does not read as git would: a linked work tree, a config that
/// names another, a sparse index, one of more than [`MAX_ENTRIES`]). `Ok(Some)`: what the
/// index tracks, in a [`Repository::plain`] repository. Err: why nothing can be known,
/// which refuses the line: an index that cannot be read (too large, another hash than
/// SHA-1, not an index), or one that holds a path that is not a plain relative one (`..`,
/// `/…`, `.git`; git adds none, but writing the index by hand can, and `git ls-files` then
/// prints it: `../../etc/passwd`).
pub(super) fn tracked_files(cwd: &Path) -> Result<Option<Tracked>, String> {
    let Some(repo) = git_repo::find(cwd)? else {
        return Ok(None);
    };
    let index = repo.git_dir.join("index");
    let size = match std::fs::metadata(&index) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(repo.plain().then(|| Tracked {
                work_tree: repo.top,
                paths: Vec::new(),
            }));
        }
        Err(e) => return Err(format!("`{}` cannot be read: {e}", index.display())),
    };
    if size > MAX_INDEX_BYTES {
        return Err(format!("`{}` is larger than 256 MiB", index.display()));
    }
    let options = gix_index::decode::Options::default();
    let file = gix_index::File::at(&index, gix_index::hash::Kind::Sha1, false, options)
        .map_err(|e| format!("`{}` cannot be read: {e}", index.display()))?;
    let mut paths = Vec::with_capacity(file.entries().len());
    for entry in file.entries() {
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(entry.path(&file)));
        if !is_plain_relative(&path) {
            return Err(format!(
                "`{}` holds the path `{}`, which is not a plain path inside the work tree",
                index.display(),
                path.display()
            ));
        }
        paths.push(path);
    }
    let trusted = repo.plain() && !file.is_sparse() && paths.len() <= MAX_ENTRIES;
    Ok(trusted.then_some(Tracked {
        work_tree: repo.top,
        paths,
    }))
}

/// A path of names only (no `/` at the start, no `.`, `..` or `.git`, in any case), as git
/// itself would add to its index.
fn is_plain_relative(path: &Path) -> bool {
    path.components().all(|c| match c {
        std::path::Component::Normal(name) => !name.eq_ignore_ascii_case(".git"),
        _ => false,
    }) && !path.as_os_str().is_empty()
        && !path.as_os_str().as_bytes().contains(&b'\0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatewayd_testkit::git::{git, index_with_name};

    fn tracked(cwd: &Path) -> Tracked {
        tracked_files(cwd)
            .expect("the index is read")
            .expect("a plain repository")
    }

    #[test]
    fn the_index_of_the_repository_git_finds() {
        let d = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(d.path()).unwrap();
        assert!(matches!(tracked_files(&top), Ok(None)), "no repository");
        git(&top, &["init", "-q"]);
        assert!(tracked(&top).paths.is_empty(), "no index yet");
        std::fs::create_dir(top.join("src")).unwrap();
        for f in ["src/a.rs", "README.md", ".env"] {
            std::fs::write(top.join(f), "x").unwrap();
        }
        git(&top, &["add", "src/a.rs", "README.md"]);
        let t = tracked(&top.join("src"));
        assert_eq!(t.work_tree, top);
        assert_eq!(t.paths, [PathBuf::from("README.md"), "src/a.rs".into()]);
        // A split index is read whole (its shared part and its own).
        git(&top, &["update-index", "--split-index"]);
        std::fs::write(top.join("src/b.rs"), "x").unwrap();
        git(&top, &["add", "src/b.rs"]);
        assert_eq!(
            tracked(&top).paths,
            [
                PathBuf::from("README.md"),
                "src/a.rs".into(),
                "src/b.rs".into()
            ]
        );
        // Where git could see another work tree, the index is read but not relied on.
        git(&top, &["config", "core.worktree", "/"]);
        assert!(matches!(tracked_files(&top), Ok(None)));
    }

    #[test]
    fn an_index_written_by_hand_with_a_path_out_of_the_tree_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(d.path()).unwrap();
        git(&top, &["init", "-q"]);
        std::fs::write(top.join("aaaaaaaaaaaaaaaa"), "x").unwrap();
        git(&top, &["add", "aaaaaaaaaaaaaaaa"]);
        let index = top.join(".git/index");
        let clean = std::fs::read(&index).unwrap();
        for (path, bad) in [
            ("../../etc/passwd", true),
            ("src/../../xyz.rs", true),
            ("/etc/aaaaaaaaaaa", true),
            (".GIT/aaaaaaaaaaa", true),
            ("./aaaaaaaaaaaaaa", true),
            ("src/bbbbbbbbb.rs", false),
        ] {
            std::fs::write(&index, index_with_name(&clean, "aaaaaaaaaaaaaaaa", path)).unwrap();
            assert_eq!(tracked_files(&top).is_err(), bad, "{path}");
        }
        std::fs::write(&index, b"not an index").unwrap();
        assert!(tracked_files(&top).is_err());
    }
}
