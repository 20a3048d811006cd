//! Where the programs the starter's shell tool lists are installed when that is outside the
//! system's trees: a toolchain in the home (pyenv, rustup, nvm) or a tool in `~/.local/bin`.
//! `gatewayd run` bounds the agent's reads to `sandbox.readable` in the kernel, so without
//! these the agent's `python3` or `cargo` is refused there (`Permission denied`) on a machine
//! that installs them so. `policy init` finds the programs on its `PATH`.
use std::path::{Path, PathBuf};

use super::Entry;

/// What `policy init` found of the starter's programs on this machine.
#[derive(Debug, Clone, Default)]
pub struct Toolchains {
    /// Each listed program as `PATH` finds it (its links not followed).
    pub programs: Vec<PathBuf>,
    /// rustup's home (`RUSTUP_HOME`, else `~/.rustup`), which its proxies (`cargo`, `rustc`
    /// in `~/.cargo/bin`, links to `rustup`) run the toolchains from.
    pub rustup_home: Option<PathBuf>,
    /// Local files and directories the environment points these programs at
    /// ([`paths_in_environment`]).
    pub environment: Vec<PathBuf>,
}

/// Variables by which the environment points the shell tool's programs at local files:
/// pip's package sources and certificate, and the CA bundles of TLS clients. Under
/// `gatewayd run` the agent's programs inherit them and fail when they cannot read what
/// they name (`pip install` stops at an unreadable `PIP_FIND_LINKS` directory).
pub const PATH_VARIABLES: &[&str] = &[
    "PIP_FIND_LINKS",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "CARGO_HTTP_CAINFO",
    "NPM_CONFIG_CAFILE",
    "npm_config_cafile",
];

/// The absolute local paths that exist among the values of [`PATH_VARIABLES`] in `vars`
/// (each value a list split at blanks, and at `:` for `SSL_CERT_DIR`; a `file://` URL is
/// its path; other URLs are no paths).
pub fn paths_in_environment(vars: impl IntoIterator<Item = (String, String)>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for (name, value) in vars {
        if !PATH_VARIABLES.contains(&name.as_str()) {
            continue;
        }
        let words = value
            .split(|c: char| c.is_whitespace() || (c == ':' && name == "SSL_CERT_DIR"))
            .map(|w| w.strip_prefix("file://").unwrap_or(w));
        for w in words.filter(|w| w.starts_with('/')) {
            let p = PathBuf::from(w);
            if p.exists() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

const INSTALLED: &str = "where a program the shell tool may run is installed (found on PATH here): the program and the toolchain it runs";
const RUSTUP_HOME: &str = "rustup's toolchains, which its proxies on PATH (`cargo`, `rustc`) run";
const NAMED: &str = "named by the environment for these programs (pip's PIP_FIND_LINKS, PIP_CERT, a TLS client's CA bundle: docs/POLICY.md, \"Host profiles\")";

impl Toolchains {
    /// The readable entries these programs need beyond `covered` (what the starter makes
    /// readable already), each tree once; `home` is the user's.
    pub fn entries(&self, home: &Path, covered: &[PathBuf]) -> Vec<Entry> {
        let mut out: Vec<Entry> = Vec::new();
        let mut add = |tree: PathBuf, reason: &'static str| {
            let under = |p: &PathBuf| tree.starts_with(p);
            let listed = out.iter().any(|e| under(&PathBuf::from(&e.value)));
            if !covered.iter().any(under) && !listed {
                out.push(Entry {
                    kind: "readable",
                    value: tree.display().to_string(),
                    reason,
                });
            }
        };
        for found in &self.programs {
            let real = std::fs::canonicalize(found).ok();
            for at in std::iter::once(found).chain(real.as_ref()) {
                if let Some(tree) = install_tree(at, home) {
                    add(tree, INSTALLED);
                }
            }
            let proxy = real
                .as_ref()
                .and_then(|r| r.file_name())
                .is_some_and(|n| n == "rustup");
            if let Some(rustup) = self.rustup_home.as_ref().filter(|_| proxy) {
                add(rustup.clone(), RUSTUP_HOME);
            }
        }
        for p in &self.environment {
            add(p.clone(), NAMED);
        }
        out
    }
}

/// The tree a program at `path` is installed in: the directory above its `bin` (or pyenv's
/// `shims`), which holds what the program runs (`~/.pyenv`, `~/.cargo`,
/// `~/.nvm/versions/node/v20`); its own directory when that would be the home, one of its
/// ancestors or the home's `.local`, which hold other programs' files.
pub fn install_tree(path: &Path, home: &Path) -> Option<PathBuf> {
    let dir = path.parent()?;
    let shared = |t: &Path| home.starts_with(t) || t == home.join(".local");
    let above = dir
        .parent()
        .filter(|_| dir.file_name().is_some_and(|n| n == "bin" || n == "shims"));
    match above {
        Some(tree) if !shared(tree) => Some(tree.to_path_buf()),
        _ if !shared(dir) => Some(dir.to_path_buf()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_installed_in_the_tree_above_its_bin() {
        let home = Path::new("/home/u");
        for (program, tree) in [
            ("/home/u/.pyenv/shims/python3", Some("/home/u/.pyenv")),
            ("/home/u/.cargo/bin/cargo", Some("/home/u/.cargo")),
            (
                "/home/u/.nvm/versions/node/v20/bin/node",
                Some("/home/u/.nvm/versions/node/v20"),
            ),
            ("/home/u/.local/bin/uv", Some("/home/u/.local/bin")),
            ("/home/u/bin/tool", Some("/home/u/bin")),
            ("/opt/go/bin/go", Some("/opt/go")),
            ("/home/u/tool", None),
            ("/bin/tool", Some("/bin")),
            ("/tool", None),
        ] {
            assert_eq!(
                install_tree(Path::new(program), home),
                tree.map(PathBuf::from),
                "{program}"
            );
        }
    }

    #[test]
    fn links_are_followed_covered_trees_left_out_and_rustup_adds_its_home() {
        let d = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(d.path()).unwrap();
        let mk = |p: &str| {
            let p = home.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
            p
        };
        let link = |at: &str, to: &str| {
            let at = home.join(at);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(to, &at).unwrap();
            at
        };
        mk(".cargo/bin/rustup");
        mk(".local/share/pipx/venvs/tool/bin/tool");
        mk("usr-like/bin/jq");
        std::fs::create_dir_all(home.join(".rustup")).unwrap();
        let found = Toolchains {
            programs: vec![
                link(".cargo/bin/cargo", "rustup"),
                link(".local/bin/tool", "../share/pipx/venvs/tool/bin/tool"),
                home.join("usr-like/bin/jq"),
                mk(".pyenv/shims/python3"),
                mk(".pyenv/shims/pip"),
            ],
            rustup_home: Some(home.join(".rustup")),
            environment: vec![home.join("wheels"), home.join(".pyenv/shims/pip")],
        };
        let covered = [home.join("usr-like")];
        let got: Vec<(String, &str)> = found
            .entries(&home, &covered)
            .into_iter()
            .map(|e| (e.value, e.reason))
            .collect();
        let h = |p: &str| home.join(p).display().to_string();
        assert_eq!(
            got,
            [
                (h(".cargo"), INSTALLED),
                (h(".rustup"), RUSTUP_HOME),
                (h(".local/bin"), INSTALLED),
                (h(".local/share/pipx/venvs/tool"), INSTALLED),
                (h(".pyenv"), INSTALLED),
                (h("wheels"), NAMED),
            ]
        );
        // Without the proxy's link to rustup, no rustup home.
        let plain = Toolchains {
            programs: vec![mk(".cargo/bin/rustc")],
            rustup_home: Some(home.join(".rustup")),
            environment: Vec::new(),
        };
        let values: Vec<String> = plain
            .entries(&home, &[])
            .into_iter()
            .map(|e| e.value)
            .collect();
        assert_eq!(values, [h(".cargo")]);
    }

    #[test]
    fn the_environment_names_local_paths_for_pip_and_tls_clients() {
        let d = tempfile::tempdir().unwrap();
        let (wheels, ca, certs) = (
            d.path().join("w"),
            d.path().join("ca.pem"),
            d.path().join("c"),
        );
        std::fs::create_dir_all(&wheels).unwrap();
        std::fs::create_dir_all(&certs).unwrap();
        std::fs::write(&ca, "").unwrap();
        let var = |n: &str, v: String| (n.to_string(), v);
        let got = paths_in_environment([
            var(
                "PIP_FIND_LINKS",
                format!("{} https://x.test/simple /absent", wheels.display()),
            ),
            var("PIP_INDEX_URL", format!("file://{}", wheels.display())),
            var("SSL_CERT_FILE", ca.display().to_string()),
            var("SSL_CERT_DIR", format!("{}:/absent", certs.display())),
            var("PATH", "/usr/bin".into()),
            var("HOME", d.path().display().to_string()),
        ]);
        assert_eq!(got, [wheels, ca, certs]);
    }
}
