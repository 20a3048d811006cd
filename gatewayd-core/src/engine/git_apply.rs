//! The files `git apply` writes ([`shell::AppliedPatch`]): the names its patch holds, read
//! when the call is decided, each checked as a write of itself (as a program's output is).
//! Without this, a patch the agent wrote in the workspace would change what the sandbox
//! keeps read-only (`.husky/pre-commit`, `.envrc`, `.claude/settings.json`), which the
//! user's own programs run later.
//!
//! The names are gathered cautiously rather than parsed as git parses them: every line that
//! may name a file (`diff --git`, `---`, `+++`, `rename from/to`, `copy from/to`), wherever
//! it stands, gives each name it may hold (a `diff --git` line split at each space, as names
//! with spaces are ambiguous there), and each is taken below where git runs and below the
//! top of its work tree (git takes a patch's names from the top when run in a
//! subdirectory). More names than git would write may be checked, never fewer. A quoted
//! name (git's C-style quoting, for bytes outside ASCII) is unquoted.
use std::{
    io::Read,
    path::{Path, PathBuf},
};

use super::{Reason, sandbox::SandboxView, shellcheck::check_output_path};
use crate::shell::AppliedPatch;

/// The largest patch read.
const MAX_PATCH_BYTES: u64 = 16 << 20;

/// A name a patch holds, and whether `-p` strips it (the names of `rename` and `copy` lines
/// are already without their `a/` and `b/`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Named {
    pub(super) name: PathBuf,
    pub(super) stripped: bool,
}

/// Checks each file `patches` would write, relative to `cwd`, the command's directory.
pub(super) fn check_patches(
    sb: &SandboxView,
    name: &str,
    patches: &[AppliedPatch],
    cwd: &Path,
) -> Result<(), (Reason, String)> {
    for patch in patches {
        let file = cwd.join(&patch.file);
        let refuse = |why: String| (Reason::Shell, format!("`{name}`: `git apply`: {why}"));
        let Ok(opened) = std::fs::File::open(&file) else {
            return Err(refuse(format!(
                "the patch `{}` is not there yet, so the files it changes are not known: apply it in a call of its own once it is written",
                file.display()
            )));
        };
        let mut text = Vec::new();
        opened
            .take(MAX_PATCH_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| refuse(format!("cannot read `{}`: {e}", file.display())))?;
        if text.len() as u64 > MAX_PATCH_BYTES {
            return Err(refuse(format!(
                "the patch `{}` is larger than {MAX_PATCH_BYTES} bytes",
                file.display()
            )));
        }
        let runs_in = cwd.join(&patch.runs_in);
        let mut bases = vec![runs_in.clone()];
        bases.extend(work_tree_top(&runs_in).filter(|top| *top != runs_in));
        for named in names(&text).map_err(refuse)? {
            let strip = if named.stripped { patch.strip } else { 0 };
            let Some(rel) = strip_components(&named.name, strip) else {
                continue;
            };
            let rel = match patch.directory.as_deref() {
                Some(directory) => directory.join(&rel),
                None => rel,
            };
            for base in &bases {
                check_output_path(sb, name, &base.join(&rel))?;
            }
        }
    }
    Ok(())
}

/// The top of the work tree `dir` is in: the nearest directory at or above it that holds
/// `.git`.
fn work_tree_top(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// `name` without its first `n` components; `None` when nothing is left. A name holding
/// `..` or starting at `/` is kept whole (git refuses it; checked as it stands).
fn strip_components(name: &Path, n: usize) -> Option<PathBuf> {
    let parts: Vec<_> = name.components().collect();
    if name.is_absolute()
        || parts
            .iter()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Some(name.to_path_buf());
    }
    (parts.len() > n).then(|| parts[n..].iter().collect())
}

/// Every name the patch `text` may hold (see the module documentation). Err for a quoted
/// name that is not closed.
pub(super) fn names(text: &[u8]) -> Result<Vec<Named>, String> {
    let text = String::from_utf8_lossy(text);
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(rest) = line.strip_prefix("diff --git ") {
            for (i, _) in rest.match_indices(' ') {
                out.push(named(&rest[..i], true)?);
                out.push(named(&rest[i + 1..], true)?);
            }
        } else if let Some(rest) = line
            .strip_prefix("--- ")
            .or_else(|| line.strip_prefix("+++ "))
        {
            let name = rest.split('\t').next().unwrap_or(rest);
            if name != "/dev/null" {
                out.push(named(name, true)?);
            }
        } else if let Some(rest) = ["rename from ", "rename to ", "copy from ", "copy to "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
        {
            out.push(named(rest, false)?);
        }
    }
    out.retain(|n| !n.name.as_os_str().is_empty());
    Ok(out)
}

/// One name as the patch writes it, unquoted when git quoted it.
fn named(written: &str, stripped: bool) -> Result<Named, String> {
    let name = match written.strip_prefix('"') {
        Some(quoted) => unquote(quoted)?,
        None => written.to_owned(),
    };
    Ok(Named {
        name: PathBuf::from(name),
        stripped,
    })
}

/// git's C-style quoting (`"a\303\251 b\"c"`), its opening quote taken off; what follows the
/// closing quote is left out.
fn unquote(quoted: &str) -> Result<String, String> {
    let mut bytes = Vec::new();
    let mut chars = quoted.bytes();
    while let Some(b) = chars.next() {
        match b {
            b'"' => return Ok(String::from_utf8_lossy(&bytes).into_owned()),
            b'\\' => {
                let escaped = chars.next().ok_or("a quoted name ends in `\\`")?;
                let byte = match escaped {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'a' => 7,
                    b'b' => 8,
                    b'f' => 12,
                    b'r' => b'\r',
                    b'v' => 11,
                    b'0'..=b'7' => {
                        let mut value = u32::from(escaped - b'0');
                        for _ in 0..2 {
                            let digit =
                                chars.next().ok_or("a quoted name's octal escape is cut")?;
                            value = value * 8 + u32::from(digit.wrapping_sub(b'0') & 7);
                        }
                        u8::try_from(value)
                            .map_err(|_| "a quoted name's octal escape is too large")?
                    }
                    other => other,
                };
                bytes.push(byte);
            }
            other => bytes.push(other),
        }
    }
    Err(format!("a quoted name is not closed: `\"{quoted}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(String, bool)> {
        names(text.as_bytes())
            .expect("names")
            .into_iter()
            .map(|n| (n.name.display().to_string(), n.stripped))
            .collect()
    }

    #[test]
    fn every_name_a_patch_may_hold() {
        let patch = "\
diff --git a/src/lib.rs b/src/lib.rs
index 1..2 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1 +1 @@
-x
+y
diff --git a/old.sh b/.husky/pre-commit
similarity index 90%
rename from old.sh
rename to .husky/pre-commit
diff --git \"a/caf\\303\\251\" \"b/caf\\303\\251\"
--- /dev/null
+++ \"b/caf\\303\\251\"\t
";
        let got = found(patch);
        for want in [
            ("a/src/lib.rs", true),
            ("b/src/lib.rs", true),
            ("b/.husky/pre-commit", true),
            (".husky/pre-commit", false),
            ("old.sh", false),
            ("b/café", true),
        ] {
            assert!(
                got.contains(&(want.0.to_owned(), want.1)),
                "{want:?} in {got:?}"
            );
        }
        assert!(!got.iter().any(|(n, _)| n == "/dev/null"));
        assert!(names(b"+++ \"b/open").is_err());
    }

    #[test]
    fn names_are_stripped_as_git_apply_p_does() {
        assert_eq!(
            strip_components(Path::new("a/src/x"), 1),
            Some("src/x".into())
        );
        assert_eq!(
            strip_components(Path::new("a/src/x"), 0),
            Some("a/src/x".into())
        );
        assert_eq!(strip_components(Path::new("x"), 1), None);
        assert_eq!(
            strip_components(Path::new("a/../../x"), 1),
            Some("a/../../x".into())
        );
    }
}
