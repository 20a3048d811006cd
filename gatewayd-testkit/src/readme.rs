//! The README's quickstarts, for the tests that run them as written.

/// The lines of the README's fenced block opened with ```` ```sh TAG ````.
///
/// # Panics
/// When the README or the block is missing: the test that asked for it has nothing to run.
pub fn block(tag: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let fence = format!("```sh {tag}\n");
    let start = readme
        .find(&fence)
        .unwrap_or_else(|| panic!("README.md has no `{tag}` block"))
        + fence.len();
    let end = start + readme[start..].find("```").expect("the block's end");
    readme[start..end].lines().map(str::to_owned).collect()
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
