//! Programs given on the line, against a sandbox of real files in temporary directories.
use super::*;
use crate::policy::{Network, Sandbox};

struct Fixture {
    ws: PathBuf,
    home: PathBuf,
    elsewhere: PathBuf,
    sb: SandboxView,
    egress: EgressView,
    _dirs: [tempfile::TempDir; 3],
}

fn fixture() -> Fixture {
    let dirs = [(); 3].map(|()| tempfile::tempdir().unwrap());
    let [ws, home, elsewhere] = [0, 1, 2].map(|i| std::fs::canonicalize(dirs[i].path()).unwrap());
    for d in [
        ws.join("src"),
        ws.join(".git/hooks"),
        home.join(".ssh"),
        home.join(".aws"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    for f in [
        ws.join(".env"),
        ws.join("server.key"),
        home.join(".ssh/id_rsa"),
        elsewhere.join("notes.txt"),
    ] {
        std::fs::write(f, "secret").unwrap();
    }
    let sandbox: Sandbox = serde_json::from_value(serde_json::json!({
        "root": ws, "readable": [ws], "writable": [ws],
        "protected": [home.join(".ssh"), home.join(".aws"), home.join("keys"), ws.join(".env")],
        "protected_names": [".env", "id_rsa", "*.key"],
        "read_only": [ws.join(".git/hooks")]}))
    .unwrap();
    let network: Network = serde_json::from_value(serde_json::json!({
        "egress": [{"host": "pypi.org", "port": 443}, {"cidr": "192.0.2.0/24"}]}))
    .unwrap();
    Fixture {
        sb: SandboxView::new(&sandbox),
        egress: EgressView::new(&network),
        ws,
        home,
        elsewhere,
        _dirs: dirs,
    }
}

impl Fixture {
    fn check(&self, program: &str, text: &str) -> Result<(), (Reason, String)> {
        check(
            &self.sb,
            &self.egress,
            "shell",
            program,
            text,
            &self.ws,
            &|| Some(self.home.clone()),
        )
    }
}

#[test]
fn ordinary_programs_pass() {
    let f = fixture();
    for text in [
        "import json,sys; print(json.load(sys.stdin)['version'])",
        "print(10 / 3)",
        "import os; print(os.listdir('src'), sys.executable)",
        "import platform; print(platform.system())",
        "console.log(require('./package.json').name)",
        "print('docs: https://pypi.org/project/x')",
        "import re; print(re.sub(r'a/b', 'c', 'x'))",
        "print(d.key, '1.2.3', 'v1.2.3.4')",
        "open('src/out.txt', 'w').write('x')",
        "import pathlib; print(pathlib.Path('src').resolve())",
        "console.log(`${1 + 1}`)",
        "print(192.0.2.7)",
    ] {
        let r = f.check("python3", text);
        assert!(r.is_ok(), "{text}: {r:?}");
    }
    assert!(
        f.check("perl", "print join ',', map { $_ * 2 } 1..3")
            .is_ok()
    );
}

#[test]
fn programs_that_start_processes_or_connect_are_refused() {
    let f = fixture();
    for (program, text, named) in [
        ("python3", "import socket; s=socket.socket()", "socket"),
        ("python3", "import os; os.system('id')", "system"),
        ("python3", "__import__('os')", "__import__"),
        ("python3", "getattr(os, 'sys' + 'tem')('id')", "getattr"),
        (
            "python3",
            "import subprocess; subprocess.run(['id'])",
            "subprocess",
        ),
        (
            "node",
            "require('child_process').execSync('id')",
            "child_process",
        ),
        ("node", "fetch(u).then(r => r.text())", "fetch"),
        ("perl", "print `id`", "`"),
        ("perl", "open(F, '|id')", "open"),
        ("ruby", "puts %x(id)", "%x"),
        ("perl", "use IO::Socket::INET;", "Socket"),
        ("python3", "x = '://' ;__import__('os')", "__import__"),
        ("node", "x ://socket\nrequire('net')", "socket"),
        (
            "python3",
            "import asyncio; asyncio.create_subprocess_shell('id')",
            "create_subprocess_shell",
        ),
        (
            "python3",
            "[c for c in ().__class__.__subclasses__()]",
            "__subclasses__",
        ),
        ("ruby", "Kernel.instance_eval('x')", "instance_eval"),
    ] {
        let (reason, m) = f.check(program, text).unwrap_err();
        assert_eq!(reason, Reason::Shell, "{text}");
        assert!(m.contains(&format!("names `{named}`")), "{text}: {m}");
        assert!(m.contains("Next:"), "{m}");
    }
}

#[test]
fn urls_and_addresses_outside_the_egress_list_are_refused() {
    let f = fixture();
    for (text, says) in [
        (
            "print(1) # https://evil.example/x",
            "evil.example:443 is not in",
        ),
        (
            "u = f'https://{host}/x'",
            "characters a host name cannot have",
        ),
        ("u = 'ws://pypi.org/x'", "`ws:` URL"),
        ("u = 'http://pypi.org/x'", "pypi.org:80 is not in"),
        ("s.connect(('10.0.0.1', 4242))", "address 10.0.0.1"),
    ] {
        let (reason, m) = f.check("python3", text).unwrap_err();
        assert_eq!(reason, Reason::Sandbox, "{text}");
        assert!(m.contains(says), "{text}: {m}");
    }
}

#[test]
fn paths_the_sandbox_keeps_are_refused() {
    let f = fixture();
    let outside = f.elsewhere.join("notes.txt");
    for (text, says) in [
        (
            "print(open('.env').read())".to_owned(),
            "`.env` is the name",
        ),
        (
            "open(os.path.expanduser('~/.ssh/config'))".to_owned(),
            "`.ssh` is the name",
        ),
        (
            "open(os.path.expanduser('~/.aws'))".to_owned(),
            "`.aws` is the name",
        ),
        (
            "open(Path.home() / '.aws' / 'credentials')".to_owned(),
            "`.aws` is the name",
        ),
        (
            format!("open('{}/keys/a')", f.home.display()),
            "protected path",
        ),
        ("open('$HOME/keys/b')".to_owned(), "protected path"),
        ("open('~/keys')".to_owned(), "protected path"),
        ("open('keys/id_rsa')".to_owned(), "`id_rsa` is the name"),
        (
            "open('./server.key').read()".to_owned(),
            "sandbox.protected_names",
        ),
        (
            "open('.git/hooks/pre-commit', 'w')".to_owned(),
            "read-only path",
        ),
        (
            format!("print(open('{}').read())", outside.display()),
            "outside every",
        ),
        (
            format!("open('file://{}')", outside.display()),
            "outside every",
        ),
    ] {
        let (reason, m) = f.check("python3", &text).unwrap_err();
        assert_eq!(reason, Reason::Sandbox, "{text}");
        assert!(m.contains(says), "{text}: {m}");
    }
}
