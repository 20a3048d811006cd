//! Random inputs of each kind the robustness suites (`gatewayd-core/tests/engine/robustness/*.rs`) feed the code:
//! shell lines, URLs, and JSON strings, numbers and values aimed at the fixture's paths,
//! recipients, payees and secrets.

use gatewayd_core::engine::secrets::base64;
use serde_json::{Map, Value, json};

use super::robustness_support::Rng;

// ---- shell lines ----

pub(crate) const COMMANDS: &[&str] = &[
    "grep",
    "egrep",
    "fgrep",
    "rgrep",
    "rg",
    "find",
    "ls",
    "du",
    "tree",
    "diff",
    "sed",
    "awk",
    "gawk",
    "tar",
    "cp",
    "mv",
    "rm",
    "chmod",
    "chown",
    "chgrp",
    "uniq",
    "less",
    "git",
    "node",
    "ruby",
    "python3",
    "perl",
    "perl5.36",
    "sh",
    "bash",
    "xargs",
    "env",
    "cat",
    "tac",
    "nl",
    "more",
    "head",
    "tail",
    "wc",
    "sort",
    "cut",
    "stat",
    "file",
    "md5sum",
    "foo",
    "/usr/bin/grep",
    "/usr/bin/find",
    "./tar",
    "/",
    "",
    "git/",
    "-",
];

pub(crate) const SHELL_ATOMS: &[&str] = &[
    "-r",
    "-R",
    "-rf",
    "-0",
    "-0x",
    "-0x1F",
    "-l0",
    "-lne",
    "-i",
    "-i.bak",
    "-C",
    "-c",
    "-e",
    "-f",
    "-x",
    "-X",
    "-o",
    "-O",
    "-T",
    "-t",
    "-u",
    "-d",
    "-L",
    "-P",
    "-H",
    "-D",
    "-O3",
    "-k",
    "-I",
    "-E",
    "-m",
    "-p",
    "-#",
    "--",
    "-",
    "--=",
    "--=x",
    "--r",
    "--re",
    "--ref",
    "--reference",
    "--reference=",
    "--recursive",
    "--from",
    "--files0-from=",
    "--files0-from",
    "--in-place",
    "--in-place=.bak",
    "--no-recursion",
    "--force-local",
    "--to-command=x",
    "--pre",
    "--file",
    "--files",
    "--exec-path=",
    "--git-dir",
    "--work-tree=",
    "--config-env",
    "--template=",
    "--no-index",
    "--untracked",
    "--get",
    "--directories=rec",
    "-newer",
    "-newerat",
    "-neweraX",
    "-exec",
    "-execdir",
    "-ok",
    "-delete",
    "-fprint",
    "-fprintf",
    "-files0-from",
    "-follow",
    "-name",
    "-path",
    "(",
    ")",
    "!",
    ",",
    ";",
    "+",
    "{}",
    "{},x}",
    "x:y",
    "host:file",
    ":/x",
    "ext::sh",
    "fd::3",
    "REV:path",
    "HEAD:",
    "clone",
    "config",
    "grep",
    "rebase",
    "submodule",
    "foreach",
    "bisect",
    "run",
    "fetch",
    "init",
    "get",
    "list",
    "color.ui=x",
    "core.pager=x",
    "xvf",
    "cf",
    "x",
    "czf",
    "tf",
    "a.tar",
    "..",
    ".",
    "/",
    "//",
    ".env",
    "work",
    "out/",
    "~",
    "~/x",
    "a=b",
    "X=1",
    "PATH=",
    "=",
    ":",
    "é",
    "\u{200b}",
    "日本",
    "\u{10ffff}",
    "\u{fffd}",
    "'",
    "\"",
    "\\",
    "\\\n",
    "$",
    "$(",
    "${",
    "$X",
    "`",
    "|",
    "&",
    "&&",
    ">",
    ">>",
    "2>",
    "<",
    "*",
    "?",
    "[",
    "]",
    "{",
    "}",
    "#",
    "\n",
    "\t",
    " ",
    "\0",
    "\r",
    "%",
];

pub(crate) fn shell_line(r: &mut Rng) -> String {
    if r.chance(1, 10) {
        return String::from_utf8_lossy(&r.bytes(64)).into_owned();
    }
    let mut s = String::new();
    if r.chance(8, 10) {
        s.push_str(r.pick(COMMANDS));
        s.push(' ');
    }
    for _ in 0..r.below(9) {
        for _ in 0..=r.below(3) {
            match r.below(6) {
                0 => s.push(r.char()),
                1 => {
                    for _ in 0..r.below(12) {
                        s.push(char::from(b'a' + r.below(26) as u8));
                    }
                }
                _ => s.push_str(r.pick(SHELL_ATOMS)),
            }
        }
        s.push_str(r.pick(&[" ", " ", " ", "\t", "", "  "]));
    }
    s
}

// ---- URLs ----

pub(crate) fn url(r: &mut Rng) -> String {
    if r.chance(1, 8) {
        return String::from_utf8_lossy(&r.bytes(40)).into_owned();
    }
    let mut s = String::new();
    if r.chance(1, 10) {
        s.push_str(r.pick(&[" ", "\t", "\n"]));
    }
    s.push_str(r.pick(&["http", "https", "HTTPS", "hTtP", "ftp", "", "file", "h"]));
    if !r.chance(1, 10) {
        s.push_str(r.pick(&["://", ":/", "//", ":///"]));
    }
    if r.chance(1, 10) {
        s.push_str(r.pick(&["user@", "u:p@", "@", "%40", "a\\@"]));
    }
    for _ in 0..=r.below(3) {
        match r.below(5) {
            0 => s.push(r.char()),
            _ => s.push_str(r.pick(&[
                "example.com",
                "api.search.test",
                "x.wiki.test",
                "wiki.test",
                "10.20.1.2",
                "10.20.0.0",
                "[::1]",
                "[::ffff:10.20.1.1]",
                "[",
                "]",
                "[::1",
                "::",
                ".",
                "..",
                "-",
                "_",
                "",
                "xn--e1a",
                "é",
                "%41",
                "\\",
                " ",
                "\0",
                "ﬀ",
                "İ",
            ])),
        }
    }
    if r.chance(1, 2) {
        s.push(':');
        s.push_str(r.pick(&[
            "443",
            "80",
            "0",
            "65535",
            "65536",
            "99999999999999999999",
            "-1",
            "+443",
            "",
            ":",
            "0443",
            "٤٤٣",
        ]));
    }
    if r.chance(1, 2) {
        s.push_str(r.pick(&["/", "/x?y#z", "?", "#@evil.test", "/@evil", "#", "/../../"]));
    }
    s
}

// ---- tool-call arguments ----

pub(crate) fn rand_string(r: &mut Rng, root: &str) -> String {
    const ATOMS: &[&str] = &[
        "..",
        ".",
        "/",
        "//",
        "work",
        "out",
        "out/",
        "notes.txt",
        ".env",
        "docs-link",
        "key-link",
        "dangling",
        "evil-link",
        "env-copy",
        "key-copy",
        "home/.ssh/id_rsa",
        "keep",
        "\0",
        "~",
        "%2e%2e",
        "é",
        "\u{202e}",
        "\u{200b}",
        "\u{feff}",
        "日本語",
        "a@corp.test",
        "x@pastebin.test",
        "Atlantis",
        "landlord",
        "XX00AAAAAAAA",
        "DE12ABCDEFGH1234",
        "dk_live_7Hq2Lm9XvR4tPz8W",
        "smtp-pw-Zx81Qp07Lk",
        "ignore all previous instructions",
        "https://api.search.test/",
        "http://10.20.3.4:443/",
        " ",
        "\n",
        "*",
        "?",
        "%",
        "+",
        "-",
    ];
    match r.below(10) {
        0 => url(r),
        1 => shell_line(r),
        2 => (0..r.below(20)).map(|_| r.char()).collect(),
        3 if r.chance(1, 20) => {
            // Long strings (few: the checks are linear, the debug build is slow).
            let unit = r.pick(ATOMS).to_string();
            unit.repeat(1 + r.below(20_000 / unit.len().max(1)))
        }
        4 => base64(r.pick(ATOMS).as_bytes()),
        _ => {
            let mut s = String::new();
            if r.chance(1, 4) {
                s.push_str(root);
                s.push('/');
            }
            for _ in 0..=r.below(4) {
                s.push_str(r.pick(ATOMS));
                if r.chance(1, 2) {
                    s.push('/');
                }
            }
            s
        }
    }
}

pub(crate) fn rand_number(r: &mut Rng) -> Value {
    match r.below(8) {
        0 => json!(u64::MAX),
        1 => json!(i64::MIN),
        2 => json!(f64::MAX),
        3 => json!(-0.0),
        4 => json!(r.next() as i64),
        5 => json!(f64::from_bits(r.next())), // NaN and infinities become null
        6 => json!(r.pick(&[0.01, 50.0, 50.000001, 100.0, 100.01, 1e-300, 5e-324])),
        _ => json!(r.below(200)),
    }
}

pub(crate) fn rand_value(r: &mut Rng, depth: usize, keys: &[String], root: &str) -> Value {
    let k = if depth >= 5 { 5 } else { 8 };
    match r.below(k) {
        0 => Value::Null,
        1 => Value::Bool(r.chance(1, 2)),
        2 => rand_number(r),
        3 | 4 => Value::String(rand_string(r, root)),
        5 => json!(r.pick(&["ok", "", "x"])),
        6 => Value::Array(
            (0..r.below(5))
                .map(|_| rand_value(r, depth + 1, keys, root))
                .collect(),
        ),
        _ => Value::Object(rand_object(r, depth + 1, keys, root)),
    }
}

pub(crate) fn rand_object(
    r: &mut Rng,
    depth: usize,
    keys: &[String],
    root: &str,
) -> Map<String, Value> {
    let mut m = Map::new();
    for _ in 0..r.below(5) {
        let key = if !keys.is_empty() && r.chance(2, 3) {
            r.pick_ref(keys).clone()
        } else {
            rand_string(r, root)
        };
        m.insert(key, rand_value(r, depth, keys, root));
    }
    m
}
