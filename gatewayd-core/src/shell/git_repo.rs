//! The repository git finds from a directory, as the check may rely on it: for what `git
//! ls-files` lists (`crate::engine`'s `tracked.rs`) and for `"$(git rev-parse
//! --show-toplevel)"` ([`super::line`]).
use std::path::{Path, PathBuf};

/// A repository git finds: the directory that holds its `.git`, and its git directory (the
/// `.git` directory, or the one a `.git` file names: a linked work tree, a submodule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repository {
    pub(crate) top: PathBuf,
    pub(crate) git_dir: PathBuf,
    /// `.git` is a file naming the git directory.
    pub(crate) linked: bool,
}

/// The repository git finds from `cwd`: the first `.git` walking up from `cwd`'s real path.
/// `Ok(None)`: there is none (git finds none either). Err: a `.git` file that does not name
/// a git directory as `gitdir: PATH`.
pub(crate) fn find(cwd: &Path) -> Result<Option<Repository>, String> {
    let Ok(cwd) = std::fs::canonicalize(cwd) else {
        return Ok(None);
    };
    for top in cwd.ancestors() {
        let dot_git = top.join(".git");
        let Ok(meta) = std::fs::metadata(&dot_git) else {
            continue;
        };
        if meta.is_dir() {
            return Ok(Some(Repository {
                top: top.to_path_buf(),
                git_dir: dot_git,
                linked: false,
            }));
        }
        let text = std::fs::read_to_string(&dot_git)
            .map_err(|e| format!("`{}` cannot be read: {e}", dot_git.display()))?;
        let named = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("gitdir: "))
            .filter(|p| !p.is_empty())
            .ok_or_else(|| format!("`{}` does not name a git directory", dot_git.display()))?;
        return Ok(Some(Repository {
            top: top.to_path_buf(),
            git_dir: top.join(named),
            linked: true,
        }));
    }
    Ok(None)
}

impl Repository {
    /// Whether git's work tree is [`Repository::top`] for sure: `.git` is a directory of
    /// its own, and its config holds neither `worktree` nor `include` anywhere (a work tree
    /// elsewhere, or config from another file), with no `config.worktree` or `commondir`
    /// beside it. `GIT_DIR` and `GIT_WORK_TREE` in the environment are not known
    /// (docs/POLICY.md, Limits of the engine).
    pub(crate) fn plain(&self) -> bool {
        let config = std::fs::read(self.git_dir.join("config"))
            .unwrap_or_default()
            .to_ascii_lowercase();
        let says = |word: &[u8]| config.windows(word.len()).any(|w| w == word);
        let has = |file: &str| std::fs::symlink_metadata(self.git_dir.join(file)).is_ok();
        !self.linked
            && !says(b"worktree")
            && !says(b"include")
            && !has("config.worktree")
            && !has("commondir")
    }
}

/// The work tree of the repository git finds from `cwd`, where it is [`Repository::plain`].
pub(crate) fn work_tree(cwd: &Path) -> Option<PathBuf> {
    find(cwd).ok()?.filter(Repository::plain).map(|r| r.top)
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
        // A `.git` file (a linked work tree) names the git directory; not plain.
        let linked = top.join("linked");
        std::fs::create_dir(&linked).unwrap();
        std::fs::write(linked.join(".git"), "gitdir: ../.git/worktrees/x\n").unwrap();
        let r = find(&linked).unwrap().unwrap();
        assert_eq!(r.git_dir, linked.join("../.git/worktrees/x"));
        assert!(r.linked && work_tree(&linked).is_none());
        std::fs::write(linked.join(".git"), "nonsense\n").unwrap();
        assert!(find(&linked).is_err());
    }
}
