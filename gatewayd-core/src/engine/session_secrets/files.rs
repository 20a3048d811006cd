//! The protected files' values: the files below the protected paths, within the limits, and
//! what each parser takes from them (docs/POLICY.md, "Secrets a session starts with").
use std::{
    collections::HashSet,
    fs,
    io::Read,
    os::unix::fs::{MetadataExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use serde_json::Value;

use super::{Limits, StartSecrets, looks_like_credential_name, looks_like_token};

/// Public by design: never read (a public key sent out is not a leak).
fn is_public_file(p: &Path) -> bool {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    name.ends_with(".pub") || name.starts_with("known_hosts") || name.starts_with("authorized_keys")
}

/// What a walk of the protected paths saw of one path: its metadata as the walk took it
/// (following a link only for a protected path itself), `None` when it was absent.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    path: PathBuf,
    follow: bool,
    state: Option<(u64, u64, i64, i64, i64, i64, u64)>,
}

impl Seen {
    fn take(path: &Path, follow: bool) -> (Seen, Option<fs::Metadata>) {
        let meta = if follow {
            fs::metadata(path)
        } else {
            fs::symlink_metadata(path)
        }
        .ok();
        let state = meta.as_ref().map(|m| {
            (
                m.dev(),
                m.ino(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
                m.size(),
            )
        });
        let seen = Seen {
            path: path.to_path_buf(),
            follow,
            state,
        };
        (seen, meta)
    }
}

/// The protected files' values as one walk found them, and what that walk saw: while every
/// path it looked at is unchanged (same inode, times and size; an absent one still absent;
/// a directory's times change when an entry is added, removed or renamed), the values are
/// the same, and a new session takes them without reading a file.
#[derive(Debug, Clone, Default)]
pub struct FileSecrets {
    seen: Vec<Seen>,
    /// The values and notes.
    pub found: StartSecrets,
}

impl FileSecrets {
    /// Walks and reads the protected paths.
    pub fn read(protected: &[PathBuf], limits: &Limits) -> FileSecrets {
        let mut out = FileSecrets::default();
        let files = collect_files(protected, limits, &mut out.found.notes, &mut out.seen);
        read_files(files, limits, &mut out.found);
        out
    }

    /// Whether every path the walk looked at is as it was (one `stat` each, no read).
    pub fn is_current(&self) -> bool {
        self.seen
            .iter()
            .all(|s| Seen::take(&s.path, s.follow).0 == *s)
    }
}

/// The files below the protected paths, breadth first, within the limits; every path looked
/// at is noted in `seen`.
fn collect_files(
    protected: &[PathBuf],
    limits: &Limits,
    notes: &mut Vec<String>,
    seen_paths: &mut Vec<Seen>,
) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut seen = HashSet::new();
    let mut entries = 0usize;
    let mut queue: std::collections::VecDeque<(PathBuf, usize)> =
        protected.iter().map(|p| (p.clone(), 0)).collect();
    while let Some((p, depth)) = queue.pop_front() {
        // The protected path itself is followed if it is a symlink; entries below are not.
        let (seen_now, meta) = Seen::take(&p, depth == 0);
        seen_paths.push(seen_now);
        let Some(m) = meta else { continue };
        if !seen.insert((m.dev(), m.ino())) {
            continue;
        }
        if m.is_file() {
            if files.len() >= limits.files {
                notes.push(format!(
                    "more than {} protected files; the rest are not read",
                    limits.files
                ));
                break;
            }
            files.push(p);
        } else if m.is_dir() && depth < limits.depth {
            let Ok(rd) = fs::read_dir(&p) else {
                notes.push(format!("{}: cannot be listed", p.display()));
                continue;
            };
            for e in rd.flatten() {
                entries += 1;
                if entries > limits.entries {
                    notes.push(format!(
                        "more than {} entries below protected directories; the rest are not looked at",
                        limits.entries
                    ));
                    return files;
                }
                queue.push_back((e.path(), depth + 1));
            }
        }
    }
    files
}

/// Reads a regular file without blocking on a FIFO, at most `max + 1` bytes.
fn read_small(p: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(p)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut buf = Vec::new();
    f.take(max + 1).read_to_end(&mut buf)?;
    Ok(buf)
}

/// The values in the protected files (see the module's documentation).
pub fn from_files(protected: &[PathBuf], limits: &Limits, out: &mut StartSecrets) {
    let files = collect_files(protected, limits, &mut out.notes, &mut Vec::new());
    read_files(files, limits, out);
}

/// The values in `files`, within the limits.
fn read_files(files: Vec<PathBuf>, limits: &Limits, out: &mut StartSecrets) {
    let mut total = 0u64;
    for p in files {
        if is_public_file(&p) {
            continue;
        }
        let shown = p.display().to_string();
        let bytes = match read_small(&p, limits.file_bytes) {
            Ok(b) => b,
            Err(e) => {
                out.notes.push(format!("{shown}: cannot be read ({e})"));
                continue;
            }
        };
        if bytes.len() as u64 > limits.file_bytes {
            out.notes.push(format!(
                "{shown}: larger than {} bytes; not read",
                limits.file_bytes
            ));
            continue;
        }
        total += bytes.len() as u64;
        if total > limits.total_bytes {
            out.notes.push(format!(
                "more than {} bytes in protected files; the rest are not read",
                limits.total_bytes
            ));
            return;
        }
        let Ok(text) = String::from_utf8(bytes) else {
            out.notes.push(format!("{shown}: not UTF-8 text; not used"));
            continue;
        };
        for (name, value) in values_of_file(&shown, &text, limits) {
            out.push(name, &value, limits);
        }
    }
}

/// What one protected file holds, named `protected:PATH` (the whole file),
/// `protected:PATH:line N` (a PEM line), `protected:PATH:NAME` (an assignment) or
/// `protected:PATH:/POINTER` (a JSON value).
pub fn values_of_file(path: &str, text: &str, limits: &Limits) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let pem = pem_lines(text);
    // A file of certificates or public keys only is public.
    if pem.has_blocks && !pem.has_private {
        return out;
    }
    let trimmed = text.trim();
    if trimmed.len() <= limits.whole_file_bytes {
        out.push((format!("protected:{path}"), trimmed.to_owned()));
    }
    for (n, line) in pem.lines {
        out.push((format!("protected:{path}:line {n}"), line));
    }
    if trimmed.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
            json_values(path, "", &v, &mut out);
        }
    } else {
        for (key, value) in assignments(text) {
            if looks_like_credential_name(&key) || looks_like_token(&value) {
                out.push((format!("protected:{path}:{key}"), value));
            }
        }
    }
    out
}

struct Pem {
    has_blocks: bool,
    has_private: bool,
    /// (line number, text) of the body lines of private-key blocks.
    lines: Vec<(usize, String)>,
}

/// The base64 body lines of PEM private-key blocks (`-----BEGIN … PRIVATE KEY-----`).
fn pem_lines(text: &str) -> Pem {
    let mut pem = Pem {
        has_blocks: false,
        has_private: false,
        lines: Vec::new(),
    };
    let mut in_private = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(label) = line.strip_prefix("-----BEGIN ") {
            pem.has_blocks = true;
            in_private = label.contains("PRIVATE KEY");
            pem.has_private |= in_private;
        } else if line.starts_with("-----END ") {
            in_private = false;
        } else if in_private && !line.contains(':') && !line.is_empty() {
            pem.lines.push((i + 1, line.to_owned()));
        }
    }
    pem
}

/// `NAME=VALUE` (optionally `export NAME=VALUE`), `name = value` (INI) and `name: value`
/// (YAML) lines; comments and sections skipped, surrounding quotes removed.
fn assignments(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';', '[']) {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let split = match (line.find('='), line.find(": ")) {
            (Some(e), Some(c)) if c < e => Some((c, 2)),
            (Some(e), _) => Some((e, 1)),
            (None, Some(c)) => Some((c, 2)),
            (None, None) => line.strip_suffix(':').map(|_| (line.len() - 1, 1)),
        };
        let Some((at, len)) = split else { continue };
        let key = line[..at].trim();
        let valid_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_key {
            continue;
        }
        let mut value = line[at + len..].trim();
        let quoted = value.len() >= 2
            && ((value.starts_with('"') && value.ends_with('"'))
                || (value.starts_with('\'') && value.ends_with('\'')));
        if quoted {
            value = &value[1..value.len() - 1];
        } else if let Some(i) = value.find(" #") {
            value = value[..i].trim_end();
        }
        out.push((key.to_owned(), value.to_owned()));
    }
    out
}

/// String values of a JSON document whose key looks like a credential or whose value looks
/// like a token; PEM private keys inside them give their lines too.
fn json_values(path: &str, at: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match x {
                    Value::String(s) if looks_like_credential_name(k) || looks_like_token(s) => {
                        out.push((format!("protected:{path}:{here}"), s.clone()));
                        for (n, line) in pem_lines(s).lines {
                            out.push((format!("protected:{path}:{here} line {n}"), line));
                        }
                    }
                    _ => json_values(path, &here, x, out),
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                json_values(path, &format!("{at}/{i}"), x, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::{super::LIMITS, *};
    fn values(text: &str) -> Vec<String> {
        values_of_file("/p", text, &LIMITS)
            .into_iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect()
    }

    #[test]
    fn dotenv_takes_credentials_and_tokens_not_settings() {
        let v = values(
            "# comment\nexport DEPLOY_KEY=dk_live_7Hq2Lm9XvR4tPz8W\nNODE_ENV=production\n\
             DB_PASSWORD=\"hunter2-hunter2\"\nSESSION=a1b2c3d4e5f6a7b8c9 # note\nSHORT_TOKEN=abc\n",
        );
        assert!(
            v.contains(&"protected:/p:DEPLOY_KEY=dk_live_7Hq2Lm9XvR4tPz8W".to_owned()),
            "{v:?}"
        );
        assert!(
            v.contains(&"protected:/p:DB_PASSWORD=hunter2-hunter2".to_owned()),
            "{v:?}"
        );
        assert!(
            v.contains(&"protected:/p:SESSION=a1b2c3d4e5f6a7b8c9".to_owned()),
            "{v:?}"
        );
        assert!(!v.iter().any(|x| x.ends_with("=production")), "{v:?}");
        // the whole (short) file too; StartSecrets drops what is under 8 characters
        assert!(v[0].starts_with("protected:/p=# comment"), "{v:?}");
    }

    #[test]
    fn aws_credentials_and_yaml() {
        let v = values(
            "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n\
             aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nregion = us-east-1\n",
        );
        assert!(v.contains(&"protected:/p:aws_access_key_id=AKIAIOSFODNN7EXAMPLE".to_owned()));
        assert!(
            v.contains(
                &"protected:/p:aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
                    .to_owned()
            )
        );
        assert!(
            !v.iter()
                .any(|x| x.contains("us-east-1") && x.contains(":region"))
        );
        let v = values("github.com:\n    oauth_token: gho_16C7e42F292c6912E7710c838347Ae178B4a\n");
        assert!(
            v.contains(
                &"protected:/p:oauth_token=gho_16C7e42F292c6912E7710c838347Ae178B4a".to_owned()
            ),
            "{v:?}"
        );
    }

    #[test]
    fn pem_private_key_lines_but_not_public_files() {
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACB2\n-----END OPENSSH PRIVATE KEY-----\n";
        let v = values(key);
        assert!(v.contains(&"protected:/p:line 2=b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW".to_owned()), "{v:?}");
        assert!(
            v.contains(&"protected:/p:line 3=QyNTUxOQAAACB2".to_owned()),
            "{v:?}"
        );
        let cert =
            "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----\n";
        assert!(values(cert).is_empty());
    }

    #[test]
    fn service_account_json() {
        let sa = r#"{"type": "service_account", "private_key_id": "0123456789abcdef0123",
            "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n",
            "client_email": "bot@project.iam.example"}"#;
        let v = values(sa);
        assert!(
            v.iter()
                .any(|x| x == "protected:/p:/private_key_id=0123456789abcdef0123"),
            "{v:?}"
        );
        assert!(
            v.iter()
                .any(|x| x == "protected:/p:/private_key line 2=MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
            "{v:?}"
        );
        assert!(!v.iter().any(|x| x.contains(":/client_email=")), "{v:?}");
    }

    #[test]
    fn files_are_walked_within_limits() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("a/key"), "tok_0123456789abcdef").unwrap();
        fs::write(
            root.join("a/key.pub"),
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 me",
        )
        .unwrap();
        fs::write(root.join("a/b/big"), "x".repeat(70 * 1024)).unwrap();
        fs::write(
            root.join("a/bin"),
            [0xff, 0xfe, 0x00, 0x41, 0x42, 0x43, 0x44, 0x45],
        )
        .unwrap();
        let mut out = StartSecrets::default();
        from_files(&[root.join("a")], &LIMITS, &mut out);
        let names: Vec<&str> = out.secrets.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(out.secrets.len(), 1, "{names:?}");
        assert_eq!(out.secrets[0].1, "tok_0123456789abcdef");
        assert!(
            out.notes
                .iter()
                .any(|n| n.contains("big") && n.contains("larger")),
            "{:?}",
            out.notes
        );
        assert!(
            out.notes.iter().any(|n| n.contains("not UTF-8")),
            "{:?}",
            out.notes
        );
        // depth 1: only the directory's own entries
        let mut out = StartSecrets::default();
        let shallow = Limits { depth: 1, ..LIMITS };
        fs::write(root.join("a/b/deep"), "tok_deep_0123456789").unwrap();
        from_files(&[root.join("a")], &shallow, &mut out);
        assert!(!out.secrets.iter().any(|(_, v)| v.contains("deep")));
    }

    #[test]
    fn a_read_stays_current_until_a_path_it_saw_changes() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        fs::create_dir_all(root.join("ssh")).unwrap();
        fs::write(root.join("ssh/id"), "tok_0123456789abcdef").unwrap();
        let protected = [root.join("ssh"), root.join(".env")];
        let first = FileSecrets::read(&protected, &LIMITS);
        assert_eq!(first.found.secrets.len(), 1);
        assert!(first.is_current(), "nothing changed");
        // The same size, other content: the file's times change.
        std::thread::sleep(std::time::Duration::from_millis(10));
        fs::write(root.join("ssh/id"), "tok_9876543210fedcba").unwrap();
        assert!(!first.is_current(), "a file changed");
        let second = FileSecrets::read(&protected, &LIMITS);
        assert_eq!(second.found.secrets[0].1, "tok_9876543210fedcba");
        fs::write(root.join("ssh/new"), "tok_new_0123456789ab").unwrap();
        assert!(
            !second.is_current(),
            "an entry was added to a protected directory"
        );
        let third = FileSecrets::read(&protected, &LIMITS);
        fs::write(root.join(".env"), "API_KEY=tok_env_0123456789").unwrap();
        assert!(
            !third.is_current(),
            "a protected path that was absent appeared"
        );
        let fourth = FileSecrets::read(&protected, &LIMITS);
        assert!(
            fourth
                .found
                .secrets
                .iter()
                .any(|(_, v)| v == "tok_env_0123456789")
        );
    }
}
