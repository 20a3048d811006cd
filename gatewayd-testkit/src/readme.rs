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
