//! Whether ripgrep's walk reaches a path: asked of the `ignore` crate, ripgrep's own walker,
//! set as ripgrep sets it ([`RipgrepRules`]): hidden entries, the ignore files (`.gitignore`
//! in a git work tree, `.git/info/exclude`, `.ignore`, `.rgignore`, those of the parent
//! directories too) and the globs, which win over both. Git's global excludes file is left
//! out: it is the user's, whose may not be gatewayd's. The walk goes down only the
//! directories on the way to the path.
use std::path::{Path, PathBuf};

use ignore::{WalkBuilder, overrides::OverrideBuilder};

use crate::shell::RipgrepRules;

/// Whether a walk of `root` by these rules reaches `target`, a path below it; with
/// `skips_hidden`, hidden entries are left out unless a glob names them. Anything the
/// walker cannot read or build (a glob ripgrep would refuse) counts as reached.
pub(crate) fn reaches(
    root: &Path,
    target: &Path,
    skips_hidden: bool,
    rules: &RipgrepRules,
) -> bool {
    let mut globs = OverrideBuilder::new(root);
    for (glob, ignores_case) in &rules.globs {
        if globs.case_insensitive(*ignores_case).is_err() || globs.add(glob).is_err() {
            return true;
        }
    }
    let Ok(overrides) = globs.build() else {
        return true;
    };
    let on_the_way: PathBuf = target.to_path_buf();
    let mut walk = WalkBuilder::new(root);
    walk.hidden(skips_hidden)
        .parents(rules.ignore_files)
        .ignore(rules.ignore_files)
        .git_ignore(rules.ignore_files)
        .git_global(false)
        .git_exclude(rules.ignore_files)
        .require_git(true)
        .follow_links(false)
        .overrides(overrides)
        .filter_entry(move |e| on_the_way.starts_with(e.path()));
    if rules.ignore_files {
        walk.add_custom_ignore_filename(".rgignore");
    }
    for entry in walk.build() {
        match entry {
            Ok(e) if e.path() == target => return true,
            Ok(_) => {}
            Err(_) => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(ignore_files: bool, globs: &[&str]) -> RipgrepRules {
        RipgrepRules {
            ignore_files,
            globs: globs.iter().map(|g| ((*g).to_owned(), false)).collect(),
        }
    }

    #[test]
    fn ripgreps_walk_skips_what_git_ignores_unless_a_glob_names_it() {
        let d = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        gatewayd_testkit::git::git(&ws, &["init", "-q"]);
        std::fs::create_dir_all(ws.join("svc/deep")).unwrap();
        for f in [".env", "svc/.env", "svc/deep/key.pem", "notes.txt"] {
            std::fs::write(ws.join(f), "x").unwrap();
        }
        std::fs::write(ws.join(".gitignore"), ".env\n*.pem\n").unwrap();
        let reaches = |target: &str, hidden: bool, r: &RipgrepRules| {
            super::reaches(&ws, &ws.join(target), hidden, r)
        };
        let plain = rules(true, &[]);
        // Ignored by .gitignore, at any depth.
        for t in [".env", "svc/.env", "svc/deep/key.pem"] {
            assert!(!reaches(t, false, &plain), "{t}");
        }
        assert!(reaches("notes.txt", false, &plain));
        // Not ignored: reached with hidden entries shown, not without.
        std::fs::write(ws.join(".secret"), "x").unwrap();
        assert!(reaches(".secret", false, &plain));
        assert!(!reaches(".secret", true, &plain));
        // No ignore files (`--no-ignore`, `-u`): every file.
        assert!(reaches(".env", false, &rules(false, &[])));
        // A glob that names a file wins over hidden and ignored; one that does not leaves
        // it out; a negation leaves it out.
        assert!(reaches(".env", true, &rules(true, &[".env"])));
        assert!(reaches("svc/.env", true, &rules(true, &["*env"])));
        assert!(!reaches(".env", false, &rules(true, &["*.rs"])));
        assert!(!reaches("notes.txt", false, &rules(true, &["!*.txt"])));
        let ci = RipgrepRules {
            ignore_files: true,
            globs: vec![(".ENV".to_owned(), true)],
        };
        assert!(reaches(".env", true, &ci));
        // A negation in a deeper ignore file, and a glob ripgrep would refuse.
        std::fs::write(ws.join("svc/.gitignore"), "!.env\n").unwrap();
        assert!(reaches("svc/.env", false, &plain));
        assert!(reaches(".env", true, &rules(true, &["a{b"])));
        // `.ignore` and `.rgignore` too; and outside a git work tree, no .gitignore.
        std::fs::write(ws.join(".rgignore"), "notes.txt\n").unwrap();
        assert!(!reaches("notes.txt", false, &plain));
        std::fs::remove_dir_all(ws.join(".git")).unwrap();
        assert!(reaches(".env", false, &plain));
    }
}
