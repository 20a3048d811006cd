//! What the analysis of one command has found so far: the files it reads and writes, the
//! trees it walks, and its forbidden options. Every command family records into a
//! [`Findings`]; [`Findings::into_analysis`] turns it into the public [`CommandAnalysis`].
use std::path::{Path, PathBuf};

use super::{
    AppliedPatch, CommandAnalysis, Extraction, WalkFilter, WrittenInto,
    uri::{self, Uri},
};

/// The findings of one command, each path recorded once, in the order first seen.
pub(super) struct Findings {
    /// The command's name (the file name of argv\[0\]), the prefix of forbidden findings.
    command: String,
    reads: Vec<PathBuf>,
    looked_at: Vec<PathBuf>,
    writes: Vec<PathBuf>,
    outputs: Vec<PathBuf>,
    written_into: Vec<WrittenInto>,
    pub(super) extractions: Vec<Extraction>,
    pub(super) patches: Vec<AppliedPatch>,
    recursive_roots: Vec<PathBuf>,
    urls: Vec<String>,
    forbidden: Vec<String>,
    /// A walk may follow symbolic links out of its roots.
    pub(super) follows_symlinks: bool,
    /// The walks list names only (`CommandAnalysis::walks_names_only`).
    pub(super) names_only: bool,
    /// The walks skip hidden entries (`CommandAnalysis::walks_skip_hidden`).
    pub(super) skips_hidden: bool,
    /// What else the walks skip (`CommandAnalysis::walk_filter`).
    pub(super) walk_filter: WalkFilter,
    /// It reads its program from its input (`CommandAnalysis::program_from_input`).
    pub(super) program_from_input: bool,
    /// It reads a patch from its input (`CommandAnalysis::patch_from_input`).
    pub(super) patch_from_input: bool,
    /// The programs it is given as text (`CommandAnalysis::inline_programs`).
    pub(super) inline_programs: Vec<String>,
}

/// Adds `path` to `paths` unless it is there already.
fn push_unique(paths: &mut Vec<PathBuf>, path: &Path) {
    if !paths.iter().any(|p| p == path) {
        paths.push(path.to_path_buf());
    }
}

/// The devices every process has that hold nothing of the user's and keep nothing written
/// to them: the standard streams (by their `/dev` names, aliases of what the line's
/// redirections already give the command), the null, zero and full devices and the kernel's
/// random numbers. A path naming one of them names no file the sandbox needs to check
/// (`head -c 32 /dev/urandom`, `tee /dev/stderr`, `2>/dev/null`); the agent's own `/dev`
/// under `gatewayd run` has each of them (docs/KERNEL.md).
pub(crate) const STANDARD_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/fd/0",
    "/dev/fd/1",
    "/dev/fd/2",
];

/// Whether `path`, as written, is one of the [`STANDARD_DEVICES`].
pub(crate) fn is_standard_device(path: &str) -> bool {
    STANDARD_DEVICES.contains(&path)
}

/// `paths`, or the working directory `.` when there are none (what walkers default to).
pub(super) fn or_working_dir(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths
    }
}

impl Findings {
    /// Nothing found yet for the command named `command`.
    pub(super) fn new(command: &str) -> Findings {
        Findings {
            command: command.to_string(),
            reads: Vec::new(),
            looked_at: Vec::new(),
            writes: Vec::new(),
            outputs: Vec::new(),
            written_into: Vec::new(),
            extractions: Vec::new(),
            patches: Vec::new(),
            recursive_roots: Vec::new(),
            urls: Vec::new(),
            forbidden: Vec::new(),
            follows_symlinks: false,
            names_only: false,
            skips_hidden: false,
            walk_filter: WalkFilter::default(),
            program_from_input: false,
            patch_from_input: false,
            inline_programs: Vec::new(),
        }
    }

    /// The command's name (the file name of argv\[0\]).
    pub(super) fn command(&self) -> &str {
        &self.command
    }

    /// Whether `path`, a path the command opens, names a file: not empty, not `-`
    /// (stdin/stdout), not a [`STANDARD_DEVICES`] one (nothing is kept in them, and they
    /// hold nothing of the user's). A URI is forbidden:
    /// the command takes paths, and would open the URI as a relative path, not the file it
    /// names.
    fn names_file(&mut self, path: &Path) -> bool {
        let s = path.as_os_str();
        if s.is_empty() || s == "-" || is_standard_device(&path.to_string_lossy()) {
            return false;
        }
        let text = path.to_string_lossy();
        if uri::scheme(&text).is_some() {
            let why = format!(
                "is a URI, and `{}` takes paths (it would open it as a relative path): give \
                 the path itself",
                self.command
            );
            self.forbid(&text, &why);
            return false;
        }
        true
    }

    /// The command reads `path` (when it names a file).
    pub(super) fn read(&mut self, path: &Path) {
        if self.names_file(path) {
            push_unique(&mut self.reads, path);
        }
    }

    /// The command writes, deletes or changes `path` (when it names a file).
    pub(super) fn write(&mut self, path: &Path) {
        if self.names_file(path) {
            push_unique(&mut self.writes, path);
        }
    }

    /// The command writes `names` into `dir` when `dir` is a directory, and `dir` itself
    /// otherwise (cp and mv's destination).
    pub(super) fn write_into(&mut self, dir: &Path, names: Vec<PathBuf>) {
        if self.names_file(dir) {
            push_unique(&mut self.writes, dir);
            self.written_into.push(WrittenInto {
                dir: dir.to_path_buf(),
                names,
            });
        }
    }

    /// The command walks the tree at `path` recursively, which is also a read.
    pub(super) fn walk(&mut self, path: &Path) {
        if self.names_file(path) {
            push_unique(&mut self.reads, path);
            push_unique(&mut self.recursive_roots, path);
        }
    }

    /// The command reads `word`, an argument it may take as a URI as well as a path (an
    /// interpreter's script arguments, git's repository URLs, any argument of a command
    /// nobody knows): a local `file://` URI is read as the path it names, another URI is
    /// no file, `file://host/...` is forbidden; any other word is read as `path` (the word
    /// under the command's `-C` directory, if any).
    pub(super) fn read_argument(&mut self, word: &str, path: &Path) {
        if let Some(path) = self.file_of_argument(word, path) {
            self.read(&path);
        }
    }

    /// [`Findings::read_argument`] for a word that may also be the command's output (an
    /// argument of a program nobody knows: `go build -o FILE`): a write of the path itself
    /// ([`CommandAnalysis::outputs`]).
    pub(super) fn read_and_output_argument(&mut self, word: &str, path: &Path) {
        let Some(path) = self.file_of_argument(word, path) else {
            return;
        };
        self.read(&path);
        if self.names_file(&path) {
            push_unique(&mut self.writes, &path);
            push_unique(&mut self.outputs, &path);
        }
    }

    /// The file an argument that may be a URI names: `path` for a plain word, the path of a
    /// local `file://` URI, none for another URI; a `file://host/…` one is forbidden.
    fn file_of_argument(&mut self, word: &str, path: &Path) -> Option<PathBuf> {
        match uri::parse(word) {
            Ok(None) => Some(path.to_path_buf()),
            Ok(Some(Uri::File(path))) => Some(path),
            Ok(Some(Uri::Other(_))) => None,
            Err(e) => {
                self.forbid(word, &e.to_string());
                None
            }
        }
    }

    /// [`Findings::read_argument`] for a word whose file, if it names one, the command only
    /// looks at ([`Findings::look_at`]): `test`'s operands, which may be any string.
    pub(super) fn look_at_argument(&mut self, word: &str, path: &Path) {
        match uri::parse(word) {
            Ok(None) => self.look_at(path),
            Ok(Some(Uri::File(path))) => self.look_at(&path),
            Ok(Some(Uri::Other(_))) | Err(_) => {}
        }
    }

    /// The command connects to `url` (already `http://` or `https://`).
    pub(super) fn url(&mut self, url: &str) {
        if !self.urls.iter().any(|u| u == url) {
            self.urls.push(url.to_owned());
        }
    }

    /// [`Findings::walk`] when `recursive`, else [`Findings::read`].
    pub(super) fn read_or_walk(&mut self, path: &Path, recursive: bool) {
        if recursive {
            self.walk(path);
        } else {
            self.read(path);
        }
    }

    /// The command looks at `path`'s name and metadata, opening no file for its contents
    /// (a directory is listed): a read the checks may let through for a protected file.
    pub(super) fn look_at(&mut self, path: &Path) {
        if self.names_file(path) {
            push_unique(&mut self.reads, path);
            push_unique(&mut self.looked_at, path);
        }
    }

    /// `what` (an option, a subcommand or the command itself) is forbidden because `why`.
    /// Recorded as `command what: why`, or `command: why` for the command itself.
    pub(super) fn forbid(&mut self, what: &str, why: &str) {
        let finding = if what == self.command {
            format!("{what}: {why}")
        } else {
            format!("{} {what}: {why}", self.command)
        };
        if !self.forbidden.contains(&finding) {
            self.forbidden.push(finding);
        }
    }

    /// The public analysis of `program` (argv\[0\] as written).
    pub(super) fn into_analysis(self, program: &str) -> CommandAnalysis {
        CommandAnalysis {
            program: program.to_string(),
            reads: self.reads,
            looked_at: self.looked_at,
            writes: self.writes,
            outputs: self.outputs,
            written_into: self.written_into,
            extractions: self.extractions,
            patches: self.patches,
            recursive_roots: self.recursive_roots,
            urls: self.urls,
            forbidden: self.forbidden,
            follows_symlinks: self.follows_symlinks,
            walks_names_only: self.names_only,
            walks_skip_hidden: self.skips_hidden,
            walk_filter: self.walk_filter,
            program_from_input: self.program_from_input,
            patch_from_input: self.patch_from_input,
            inline_programs: self.inline_programs,
        }
    }
}
