//! The package managers an agent runs, under `gatewayd run` with the starter policy of this
//! machine (`gatewayd policy init`, as a user makes it): a Python virtual environment
//! installs a local wheel with pip, and npm installs a local package tarball, both offline,
//! each first shown working bare. This machine's own `python3`, `pip` and `npm` are used,
//! wherever `PATH` finds them (here: pyenv's in the home, which the starter makes readable).
//! Each part the starter adds for them is then taken out, and the install fails: the
//! session's npm cache (`agent.env`) and the distribution's version file pip reads.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// A wheel of one module, `gwdemo`, made by hand (a wheel is a zip with its metadata).
const MAKE_WHEEL: &str = r#"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1] + "/gwdemo-1.0-py3-none-any.whl", "w") as z:
    z.writestr("gwdemo.py", "VALUE = 'wheel-ok'\n")
    z.writestr("gwdemo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: gwdemo\nVersion: 1.0\n")
    z.writestr("gwdemo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("gwdemo-1.0.dist-info/RECORD", "")
"#;

/// The agent's work: a venv with the wheel, an npm project with the tarball; one line each.
const SCRIPT: &str = r#"
rm -rf venv node_modules package-lock.json
echo '{"name": "app", "version": "1.0.0"}' > package.json
python3 -m venv venv >/dev/null 2>&1 && venv/bin/pip install -q --no-index --find-links wheels gwdemo >pip.log 2>&1
echo "pip $(venv/bin/python -c 'import gwdemo; print(gwdemo.VALUE)' 2>/dev/null || echo fail)"
npm install --offline --no-audit --no-fund ./pkg/gwpkg-1.0.0.tgz >npm.log 2>&1
echo "npm $(node -e 'console.log(require("gwpkg"))' 2>/dev/null || echo fail)"
"#;

struct Project {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    starter: PathBuf,
}

/// The workspace with its wheel and tarball (made bare), and the starter for it.
fn project() -> Project {
    // Out of `/tmp`: the session's own `/tmp` is writable as a whole, and the home's
    // caches must not be.
    let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let (ws, home) = (root.join("ws"), root.join("home"));
    for d in [ws.join("wheels"), ws.join("pkg"), home.clone()] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let made = Command::new("python3")
        .args(["-c", MAKE_WHEEL])
        .arg(ws.join("wheels"))
        .status()
        .expect("python3");
    assert!(made.success(), "the wheel");
    std::fs::write(
        ws.join("pkg/package.json"),
        r#"{"name": "gwpkg", "version": "1.0.0", "main": "index.js"}"#,
    )
    .expect("package.json");
    std::fs::write(ws.join("pkg/index.js"), "module.exports = 'npm-ok';\n").expect("index.js");
    let packed = Command::new("npm")
        .args(["pack", "--silent"])
        .current_dir(ws.join("pkg"))
        .output()
        .expect("npm pack");
    assert!(packed.status.success(), "npm pack: {packed:?}");
    let starter = root.join("starter.json");
    let out = gatewayd_testkit::starter::policy_init(&crate::gatewayd(), &starter, &ws, &home)
        .expect("policy init");
    assert!(out.status.success(), "{out:?}");
    Project {
        _dir: dir,
        ws,
        home,
        starter,
    }
}

fn results(out: &Output) -> (String, String) {
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |what: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{what} ")))
            .unwrap_or("no line")
            .to_owned()
    };
    (get("pip"), get("npm"))
}

impl Project {
    fn bare(&self) -> Output {
        Command::new("sh")
            .args(["-c", SCRIPT])
            .current_dir(&self.ws)
            .env("HOME", &self.home)
            .output()
            .expect("sh")
    }

    /// The script under `gatewayd run` with `policy` (the starter, changed by `edit`).
    fn under(&self, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> Output {
        let mut p: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&self.starter).expect("starter"))
                .expect("json");
        edit(&mut p);
        let policy = self
            .ws
            .parent()
            .expect("a parent")
            .join(format!("{name}.json"));
        std::fs::write(&policy, p.to_string()).expect("policy");
        let audit = policy.with_extension("jsonl");
        let out = Command::new(crate::gatewayd())
            .args(["run", "--user", "root", "--policy"])
            .arg(&policy)
            .arg("--audit")
            .arg(&audit)
            .args(["--", "sh", "-c", SCRIPT])
            .current_dir(&self.ws)
            .env("HOME", &self.home)
            .output()
            .expect("gatewayd run");
        eprintln!(
            "{name}: {out:?}\npip.log: {}\nnpm.log: {}",
            std::fs::read_to_string(self.ws.join("pip.log")).unwrap_or_default(),
            std::fs::read_to_string(self.ws.join("npm.log")).unwrap_or_default()
        );
        out
    }
}

#[test]
fn pip_and_npm_install_under_the_starter_and_fail_without_what_it_adds() {
    let p = project();
    let ok = ("wheel-ok".to_owned(), "npm-ok".to_owned());
    assert_eq!(results(&p.bare()), ok, "bare");
    assert_eq!(
        results(&p.under("starter", |_| {})),
        ok,
        "under the starter"
    );

    let without_cache = p.under("no-session-cache", |v| {
        v["agent"]["env"]
            .as_object_mut()
            .expect("agent.env")
            .remove("npm_config_cache");
    });
    assert_eq!(results(&without_cache).1, "fail", "npm without its cache");

    // pip reads it on Debian, which the project's machines run.
    let debian = Path::new("/etc/debian_version");
    let without_version = p.under("no-debian-version", |v| {
        let readable = v["sandbox"]["readable"].as_array_mut().expect("readable");
        readable.retain(|r| r.as_str() != debian.to_str());
    });
    assert_eq!(
        results(&without_version).0,
        "fail",
        "pip without the distribution's version"
    );
}
