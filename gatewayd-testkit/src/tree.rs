//! The fixture tree: a workspace with a `.env`, a home with an SSH key and AWS credentials,
//! symlinks and hard links that lead out of the workspace, and the engine policy
//! (`fixtures/engine_policy.json`, `@ROOT@` standing for the tree's root) pointed at it.
use std::{fs, path::Path};

use serde_json::Value;

/// The engine suites' policy; `@ROOT@` stands for the fixture tree's root.
pub const ENGINE_POLICY: &str = include_str!("../fixtures/engine_policy.json");

/// [`ENGINE_POLICY`]'s file, for commands that take a policy path (`gatewayd test`).
pub const ENGINE_POLICY_PATH: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/engine_policy.json");

fn write(p: &Path, s: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, s).unwrap();
}

/// A private key (not a real one): its body lines are secrets of every session that starts
/// with the protected files' values (docs/POLICY.md, "Secrets a session starts with").
pub const ID_RSA: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\n\
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n\
QyNTUxOQAAACBkZXBsb3kta2V5LWZvci10ZXN0cy1vbmx5LW5vdC1yZWFsAAAAJAAAAAAA\n\
-----END OPENSSH PRIVATE KEY-----\n";

/// A public key: public by design, never a secret.
pub const ID_RSA_PUB: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRlcGxveS1rZXktZm9yLXRlc3Rz alice@work\n";

/// AWS credentials (the documented example keys).
pub const AWS_CREDENTIALS: &str = "[default]\n\
aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n\
aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n\
region = eu-north-1\n";

/// The directory tree every test sees.
pub fn make_tree(root: &Path) {
    write(
        &root.join("work/notes.txt"),
        "meeting notes: ship on friday\nTODO: call the bank\n",
    );
    write(&root.join("work/src/main.rs"), "fn main() { /* TODO */ }\n");
    write(
        &root.join("work/.env"),
        "DEPLOY_KEY=dk_live_7Hq2Lm9XvR4tPz8W\n",
    );
    for f in ["old.txt", "a.txt", "b.txt", "c.txt", "d.txt"] {
        write(&root.join("work/out").join(f), "x\n");
    }
    write(&root.join("work/out/keep/ledger.txt"), "do not touch\n");
    write(&root.join("home/.ssh/id_rsa"), ID_RSA);
    write(&root.join("home/.ssh/id_rsa.pub"), ID_RSA_PUB);
    write(&root.join("home/.aws/credentials"), AWS_CREDENTIALS);
    write(&root.join("docs/guide.md"), "# Guide\n");
    write(&root.join("outside/data.txt"), "not in the sandbox\n");
    std::os::unix::fs::symlink(root.join("docs"), root.join("work/docs-link")).unwrap();
    std::os::unix::fs::symlink(root.join("home/.ssh/id_rsa"), root.join("work/key-link")).unwrap();
    std::os::unix::fs::symlink(
        root.join("home/.ssh/id_rsa"),
        root.join("work/out/evil-link"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        root.join("home/.ssh/new_key"),
        root.join("work/out/dangling"),
    )
    .unwrap();
    fs::hard_link(root.join("work/.env"), root.join("work/env-copy")).unwrap();
    fs::hard_link(root.join("home/.ssh/id_rsa"), root.join("work/key-copy")).unwrap();
}

/// The fixture policy text pointed at `root`.
pub fn policy_value(root: &Path) -> Value {
    let text = ENGINE_POLICY.replace("@ROOT@", root.to_str().unwrap());
    serde_json::from_str(&text).unwrap()
}
