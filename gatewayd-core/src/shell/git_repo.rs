//! The work tree git finds from a directory, as the check may rely on it: for what `git
//! ls-files` lists (`crate::engine`'s `tracked.rs`) and for `"$(git rev-parse
//! --show-toplevel)"` ([`super::line`]). Only a repository git sees as this module does is
//! taken; any other gives `None`, and the line is judged as if git's answer were unknown.
use std::path::{Path, PathBuf};

/// The work tree of the repository git finds from `cwd` (canonical): the directory of the
/// first `.git` directory walking up from `cwd`'s real path. `None` where git could find or
/// use another one than this reads:
/// - the `.git` found is a file (a linked work tree, a submodule) or a symbolic link;
/// - its config holds `worktree` or `include` anywhere (a work tree elsewhere, or config
///   from another file), or the repository has a `config.worktree` or a `commondir`.
///
/// `GIT_DIR` and `GIT_WORK_TREE` in the environment are not known (docs/POLICY.md, Limits of
/// the engine).
pub(crate) fn work_tree(cwd: &Path) -> Option<PathBuf> {
    let cwd = std::fs::canonicalize(cwd).ok()?;
    let work_tree =
        cwd.ancestors()
            .find_map(|dir| match std::fs::symlink_metadata(dir.join(".git")) {
                Ok(m) => Some(m.is_dir().then(|| dir.to_path_buf())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(_) => Some(None),
            })??;
    let git_dir = work_tree.join(".git");
    let config = std::fs::read(git_dir.join("config"))
        .unwrap_or_default()
        .to_ascii_lowercase();
    let says = |word: &[u8]| config.windows(word.len()).any(|w| w == word);
    let has = |file: &str| std::fs::symlink_metadata(git_dir.join(file)).is_ok();
    if says(b"worktree") || says(b"include") || has("config.worktree") || has("commondir") {
        return None;
    }
    Some(work_tree)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatewayd_testkit::git::git;

    #[test]
    fn the_work_tree_git_finds() {
        let d = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(d.path()).unwrap();
        assert_eq!(work_tree(&top), None, "no repository");
        git(&top, &["init", "-q"]);
        std::fs::create_dir(top.join("src")).unwrap();
        assert_eq!(work_tree(&top.join("src")), Some(top.clone()));
        // A work tree elsewhere, or config from another file: not taken.
        git(&top, &["config", "core.worktree", "/"]);
        assert_eq!(work_tree(&top), None);
        git(&top, &["config", "--unset", "core.worktree"]);
        git(&top, &["config", "include.path", "other"]);
        assert_eq!(work_tree(&top), None);
        git(&top, &["config", "--remove-section", "include"]);
        assert_eq!(work_tree(&top), Some(top.clone()));
        // A `.git` file (a linked work tree) is not followed.
        let linked = top.join("linked");
        std::fs::create_dir(&linked).unwrap();
        std::fs::write(linked.join(".git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(work_tree(&linked), None);
    }
}
