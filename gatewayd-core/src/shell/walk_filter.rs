//! Which files a recursive `grep` skips: `--include=GLOB` and `--exclude=GLOB` on a file's
//! base name, `--exclude-dir=GLOB` on a directory's, as GNU grep 3.8 applies them. The
//! engine asks it of each protected path below a walk's root, so that `grep -rn TODO .
//! --include='*.rs'` does not read the workspace's `.env`, and is not refused for it.
use std::path::{Component, Path};

/// Whether a `--include` or `--exclude` glob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRule {
    /// `--include=GLOB`: only files whose base name matches.
    Include,
    /// `--exclude=GLOB`: not those.
    Exclude,
}

/// A walk's filter; the default skips nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalkFilter {
    /// `--include` and `--exclude` globs, in the order given.
    pub files: Vec<(FileRule, String)>,
    /// `--exclude-dir` globs.
    pub dirs: Vec<String>,
    /// Names of directories right below the root whose whole trees are left out (find's
    /// `-not -path './NAME/*'`).
    pub top_dirs: Vec<String>,
    /// The walk is ripgrep's: what it skips is what ripgrep's own walker (the `ignore`
    /// crate) skips under these rules, which the engine asks that crate.
    pub ripgrep: Option<RipgrepRules>,
}

/// What ripgrep's walk skips besides hidden entries: the files its ignore files name, and
/// what its globs (`-g`, `--iglob`) leave out. A glob that matches a path makes ripgrep
/// read it even when hidden or ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RipgrepRules {
    /// It reads the ignore files (`.gitignore`, git's excludes, `.ignore`, `.rgignore`):
    /// no `--no-ignore*` and no `-u`.
    pub ignore_files: bool,
    /// `-g`/`--glob` and `--iglob` values in order, each with whether it ignores case.
    pub globs: Vec<(String, bool)>,
}

impl Default for RipgrepRules {
    /// ripgrep's defaults: ignore files read, no glob.
    fn default() -> RipgrepRules {
        RipgrepRules {
            ignore_files: true,
            globs: Vec::new(),
        }
    }
}

impl WalkFilter {
    /// Whether it skips nothing.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && self.dirs.is_empty()
            && self.top_dirs.is_empty()
            && self.ripgrep.is_none()
    }

    /// Its globs compiled once, for the many paths of a walk. `None` when one of them cannot
    /// be matched as fnmatch does ([`fnmatch_brackets`], or a pattern the glob crate
    /// rejects: `--include='[[:alpha:]]*'`): such a filter skips nothing, as if it were not
    /// there.
    pub fn matcher(&self) -> Option<Matcher<'_>> {
        let compile = |g: &String| fnmatch_brackets(g).and_then(|g| glob::Pattern::new(&g).ok());
        Some(Matcher {
            files: self
                .files
                .iter()
                .map(|(rule, g)| Some((*rule, compile(g)?)))
                .collect::<Option<_>>()?,
            dirs: self.dirs.iter().map(compile).collect::<Option<_>>()?,
            top_dirs: &self.top_dirs,
        })
    }

    /// [`Matcher::skips`], for one path; nothing for a filter with no [`WalkFilter::matcher`].
    pub fn skips(&self, rel: &Path, is_dir: bool) -> bool {
        self.matcher().is_some_and(|m| m.skips(rel, is_dir))
    }
}

/// A [`WalkFilter`] with its globs compiled.
pub struct Matcher<'a> {
    files: Vec<(FileRule, glob::Pattern)>,
    dirs: Vec<glob::Pattern>,
    top_dirs: &'a [String],
}

impl Matcher<'_> {
    /// Whether the walk skips `rel` (a path below its root, no `..`), a directory when
    /// `is_dir`: a directory on the way, or `rel` itself if it is one, matches an
    /// `--exclude-dir`; or it lies below a [`WalkFilter::top_dirs`] one; or `rel` is a file
    /// the `--include`/`--exclude` rules leave out.
    pub fn skips(&self, rel: &Path, is_dir: bool) -> bool {
        let names = normal_names(rel);
        let Some((last, parents)) = names.split_last() else {
            return false;
        };
        if names.len() > 1 && self.top_dirs.contains(&names[0]) {
            return true;
        }
        let dirs = if is_dir { &names[..] } else { parents };
        if dirs.iter().any(|d| self.dirs.iter().any(|g| matches(g, d))) {
            return true;
        }
        !is_dir && self.skips_file(last)
    }

    /// Whether the walk skips everything below the directory `rel` (a path below its root):
    /// it or a directory on the way matches an `--exclude-dir`, or it is below a
    /// [`WalkFilter::top_dirs`] one.
    pub fn skips_below(&self, rel: &Path) -> bool {
        let names = normal_names(rel);
        names.first().is_some_and(|f| self.top_dirs.contains(f))
            || names
                .iter()
                .any(|d| self.dirs.iter().any(|g| matches(g, d)))
    }

    /// GNU grep: the last rule whose glob matches the name decides; if none does, the file
    /// is skipped only when the first rule is an `--include`.
    fn skips_file(&self, name: &str) -> bool {
        match self.files.iter().rev().find(|(_, g)| matches(g, name)) {
            Some((rule, _)) => *rule == FileRule::Exclude,
            None => self
                .files
                .first()
                .is_some_and(|(rule, _)| *rule == FileRule::Include),
        }
    }
}

/// `rel`'s names, without `.` and `..`.
fn normal_names(rel: &Path) -> Vec<String> {
    rel.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// `fnmatch(glob, name, 0)`: `*` and `?` match any character, a leading dot included.
fn matches(glob: &glob::Pattern, name: &str) -> bool {
    glob.matches_with(
        name,
        glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: false,
            require_literal_leading_dot: false,
        },
    )
}

/// `pattern`'s bracket expressions (fnmatch's and bash's) in the glob crate's syntax: `[^…]`
/// is `[!…]`. `None` when it holds a character class, equivalence class or collating symbol
/// (`[[:lower:]]`), which the glob crate would take character by character.
pub(crate) fn fnmatch_brackets(pattern: &str) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '[' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        // A `]` right after `[`, `[!` or `[^` is one of the set's characters.
        let mut j = i + 1;
        if matches!(chars.get(j), Some('!' | '^')) {
            j += 1;
        }
        if chars.get(j) == Some(&']') {
            j += 1;
        }
        let Some(close) = chars[j.min(chars.len())..].iter().position(|c| *c == ']') else {
            out.push('[');
            i += 1;
            continue;
        };
        let inner: String = chars[i + 1..j + close].iter().collect();
        if ["[:", "[=", "[."].iter().any(|c| inner.contains(c)) {
            return None;
        }
        out.push('[');
        match inner.strip_prefix('^') {
            Some(rest) => {
                out.push('!');
                out.push_str(rest);
            }
            None => out.push_str(&inner),
        }
        out.push(']');
        i = j + close + 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::{FileRule::*, WalkFilter};
    use std::path::Path;

    fn filter(files: &[(super::FileRule, &str)], dirs: &[&str]) -> WalkFilter {
        WalkFilter {
            files: files.iter().map(|(r, g)| (*r, (*g).to_owned())).collect(),
            dirs: dirs.iter().map(|d| (*d).to_owned()).collect(),
            top_dirs: Vec::new(),
            ripgrep: None,
        }
    }

    #[test]
    fn grep_skips_files_as_gnu_grep_does() {
        let skips = |f: &WalkFilter, p: &str, dir: bool| f.skips(Path::new(p), dir);
        let none = WalkFilter::default();
        assert!(!skips(&none, ".env", false));
        let rs = filter(&[(Include, "*.rs")], &[]);
        assert!(skips(&rs, ".env", false));
        assert!(skips(&rs, "sub/.env", false));
        assert!(!skips(&rs, "src/main.rs", false));
        assert!(
            !skips(&rs, ".ssh", true),
            "--include does not skip directories"
        );
        let env = filter(&[(Exclude, ".env*")], &[]);
        assert!(skips(&env, "app/.env.local", false));
        assert!(!skips(&env, "a.txt", false));
        // The last matching rule decides; none matching: skipped if the first is --include.
        let both = filter(&[(Exclude, "*.env"), (Include, "*")], &[]);
        assert!(!skips(&both, "a.env", false));
        let both = filter(&[(Include, "*"), (Exclude, ".env")], &[]);
        assert!(skips(&both, ".env", false));
        assert!(!skips(&both, "x", false));
        let git = filter(&[], &[".git", "node_*"]);
        assert!(skips(&git, ".git/config", false));
        assert!(skips(&git, ".git", true));
        assert!(skips(&git, "node_modules/x/.env", false));
        assert!(!skips(&git, "src/.env", false));
        let top = WalkFilter {
            top_dirs: vec!["node_modules".into()],
            ..WalkFilter::default()
        };
        assert!(skips(&top, "node_modules/x/.env", false));
        assert!(
            !skips(&top, "node_modules", true),
            "the directory itself is found"
        );
        assert!(!skips(&top, "src/node_modules/.env", false));
        let below = |f: &WalkFilter, p: &str| {
            f.matcher()
                .expect("globs it reads")
                .skips_below(Path::new(p))
        };
        assert!(below(&top, "node_modules"));
        assert!(!below(&top, "src/node_modules"));
        assert!(below(&git, "a/.git"));
        assert!(!below(&git, "a"));
        // A glob the check cannot match as fnmatch does: nothing is skipped.
        for unreadable in ["[", "[[:alpha:]]*", ".[[:lower:]]nv"] {
            assert!(
                !skips(&filter(&[(Include, unreadable)], &[]), ".env", false),
                "{unreadable}"
            );
        }
        // fnmatch's `[^…]` negates, as `[!…]`.
        assert!(!skips(&filter(&[(Include, ".[^x]nv")], &[]), ".env", false));
        assert!(skips(&filter(&[(Exclude, ".[^x]nv")], &[]), ".env", false));
    }
}
