//! The files git's index tracks, for a command run on what `git ls-files` lists
//! ([`crate::shell::line::Found::tracked_from`]): the repository git finds from where
//! `git ls-files` runs, read with gitoxide's reader of the index (`gix-index`). Only a
//! repository git sees as this module does is read; any other gives `None`, and the check
//! then counts every file below the roots, as for `find`.
use std::{
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

/// The index of the repository git finds from `cwd`: the first `.git` directory walking up
/// from `cwd`'s real path. `None` where git could see other files than this reads:
/// - the `.git` found is a file (a linked work tree, a submodule) or a symbolic link;
/// - its config holds `worktree` or `include` anywhere (a work tree elsewhere, or config
///   from another file), or the repository has a `config.worktree` or a `commondir`;
/// - the index is sparse (it holds directories, not their files), of another hash than
///   SHA-1, larger than [`MAX_ENTRIES`] or cannot be read (a split index is read whole).
///
/// A repository without an index tracks nothing.
pub(super) fn tracked_files(cwd: &Path) -> Option<Tracked> {
    let cwd = std::fs::canonicalize(cwd).ok()?;
    let work_tree =
        cwd.ancestors()
            .find_map(|dir| match std::fs::symlink_metadata(dir.join(".git")) {
                Ok(m) => Some(m.is_dir().then(|| dir.to_path_buf())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(_) => Some(None),
            })??;
    let git_dir = work_tree.join(".git");
    let config = std::fs::read(git_dir.join("config")).unwrap_or_default();
    let config = config.to_ascii_lowercase();
    let says = |word: &[u8]| config.windows(word.len()).any(|w| w == word);
    if says(b"worktree")
        || says(b"include")
        || ["config.worktree", "commondir"]
            .iter()
            .any(|f| std::fs::symlink_metadata(git_dir.join(f)).is_ok())
    {
        return None;
    }
    let index = git_dir.join("index");
    if matches!(std::fs::symlink_metadata(&index), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
    {
        return Some(Tracked {
            work_tree,
            paths: Vec::new(),
        });
    }
    let options = gix_index::decode::Options::default();
    let file = gix_index::File::at(&index, gix_index::hash::Kind::Sha1, false, options).ok()?;
    if file.is_sparse() || file.entries().len() > MAX_ENTRIES {
        return None;
    }
    let paths = file
        .entries()
        .iter()
        .map(|e| PathBuf::from(std::ffi::OsStr::from_bytes(e.path(&file))))
        .collect();
    Some(Tracked { work_tree, paths })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs")
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn the_index_of_the_repository_git_finds() {
        let d = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(d.path()).unwrap();
        git(&top, &["init", "-q"]);
        assert!(
            tracked_files(&top).unwrap().paths.is_empty(),
            "no index yet"
        );
        std::fs::create_dir(top.join("src")).unwrap();
        for f in ["src/a.rs", "README.md", ".env"] {
            std::fs::write(top.join(f), "x").unwrap();
        }
        git(&top, &["add", "src/a.rs", "README.md"]);
        let t = tracked_files(&top.join("src")).unwrap();
        assert_eq!(t.work_tree, top);
        assert_eq!(t.paths, [PathBuf::from("README.md"), "src/a.rs".into()]);
        // A work tree elsewhere, or config from another file: not read.
        git(&top, &["config", "core.worktree", "/"]);
        assert!(tracked_files(&top).is_none());
        git(&top, &["config", "--unset", "core.worktree"]);
        git(&top, &["config", "include.path", "other"]);
        assert!(tracked_files(&top).is_none());
        git(&top, &["config", "--remove-section", "include"]);
        assert!(tracked_files(&top).is_some());
        // A split index is read whole (its shared part and its own).
        git(&top, &["update-index", "--split-index"]);
        std::fs::write(top.join("src/b.rs"), "x").unwrap();
        git(&top, &["add", "src/b.rs"]);
        assert_eq!(
            tracked_files(&top).unwrap().paths,
            [
                PathBuf::from("README.md"),
                "src/a.rs".into(),
                "src/b.rs".into()
            ]
        );
        // A `.git` file (a linked work tree) is not followed.
        let linked = top.join("linked");
        std::fs::create_dir(&linked).unwrap();
        std::fs::write(linked.join(".git"), "gitdir: /elsewhere\n").unwrap();
        assert!(tracked_files(&linked).is_none());
    }
}
