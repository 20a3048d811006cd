//! The README's quickstarts and the user docs' examples, for the tests that run them as
//! written.

/// The lines of the README's fenced block opened with ```` ```sh TAG ````.
///
/// # Panics
/// When the README or the block is missing: the test that asked for it has nothing to run.
pub fn block(tag: &str) -> Vec<String> {
    doc_block("README.md", &format!("sh {tag}"))
}

/// The lines of the fenced block opened with ```` ```INFO ```` (such as `sh operations-audit`)
/// in `doc`, a path from the workspace's root (`docs/OPERATIONS.md`).
///
/// # Panics
/// When the document or the block is missing: the test that asked for it has nothing to run.
pub fn doc_block(doc: &str, info: &str) -> Vec<String> {
    let text = doc_text(doc);
    let fence = format!("```{info}\n");
    let start = text
        .find(&fence)
        .unwrap_or_else(|| panic!("{doc} has no `{info}` block"))
        + fence.len();
    let end = start + text[start..].find("```").expect("the block's end");
    text[start..end].lines().map(str::to_owned).collect()
}

/// A block's line without its trailing ` # ` comment.
pub fn command_of(line: &str) -> &str {
    line.split(" # ").next().unwrap_or(line).trim_end()
}

/// The commands of [`doc_block`]'s block: each line without its trailing comment.
///
/// # Panics
/// As [`doc_block`].
pub fn doc_commands(doc: &str, info: &str) -> Vec<String> {
    doc_block(doc, info)
        .iter()
        .map(|l| command_of(l).to_owned())
        .collect()
}

/// The text of `doc`, a path from the workspace's root.
///
/// # Panics
/// When the document cannot be read.
pub fn doc_text(doc: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(doc);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Where a quickstart line runs: a user's fresh home and project, with nothing of the
/// test's environment but `PATH`.
pub struct UserShell<'a> {
    /// The user's home (`HOME`).
    pub home: &'a std::path::Path,
    /// `PATH`.
    pub path: &'a str,
    /// The directory the line runs in.
    pub project: &'a std::path::Path,
}

impl UserShell<'_> {
    /// Runs `line` with `sh -c` after `prelude` (shell functions standing in for what the
    /// test cannot run as written), and returns its output; panics when it fails, with its
    /// output.
    ///
    /// # Panics
    /// When `sh` cannot start or the line exits with a failure.
    pub fn run(&self, prelude: &str, line: &str) -> String {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{prelude}{line}"))
            .env_clear()
            .env("HOME", self.home)
            .env("PATH", self.path)
            .env("LANG", "C.UTF-8")
            .env("DISABLE_AUTOUPDATER", "1")
            .current_dir(self.project)
            .output()
            .expect("sh");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "`{line}`: {text}");
        text
    }
}
