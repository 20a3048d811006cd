//! The real git, run in a test's directory.
use std::path::Path;

/// Runs `git ARGS` in `dir` (with an identity and `main` as the first branch's name, so
/// that it needs no config of the machine's); panics if git fails.
pub fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
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
        .unwrap_or_else(|e| panic!("git {args:?}: {e}"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `index` (git's index file) with the entry name `from` replaced by `to`, of the same
/// length, and its checksum made again (coreutils' `sha1sum`): an index written by hand,
/// with a path git itself would not add.
pub fn index_with_name(index: &[u8], from: &str, to: &str) -> Vec<u8> {
    use std::io::Write as _;
    assert_eq!(from.len(), to.len(), "names of the same length");
    let mut out = index.to_vec();
    let at = out
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .expect("the entry's name");
    out[at..at + to.len()].copy_from_slice(to.as_bytes());
    let body = out.len() - 20;
    let mut sha1sum = std::process::Command::new("sha1sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha1sum runs");
    let mut stdin = sha1sum.stdin.take().expect("stdin");
    stdin.write_all(&out[..body]).expect("write");
    drop(stdin);
    let hex = sha1sum.wait_with_output().expect("sha1sum").stdout;
    for (i, pair) in hex[..40].chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).expect("hex");
        out[body + i] = u8::from_str_radix(text, 16).expect("hex");
    }
    out
}
