//! The Kubernetes manifests of `deploy/kubernetes/` (docs/FLEET.md, "On a cluster"): every
//! one validates against the Kubernetes API's schemas, offline (`kubernetes-validate` from
//! `PyPI`, strict, in a network namespace with no network), and a broken copy does not; the
//! `DaemonSet` keeps exactly the systemd unit's capabilities and writable paths; the policy's
//! `ConfigMap` is the packaged example policy, valid, and mounted so that its updates reach
//! the daemon's reload.
use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn manifests() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("deploy/kubernetes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    assert!(v.len() >= 4, "manifests: {v:?}");
    v
}

/// The venv `cargo xtask setup` makes (`kubernetes-validate`, `PyYAML`).
fn venv_bin(name: &str) -> PathBuf {
    let python = std::env::var_os("GATEWAYD_MCP_PYTHON").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/gatewayd/venv/bin/python"),
        PathBuf::from,
    );
    let p = python.with_file_name(name);
    assert!(
        p.exists(),
        "{} is missing; `cargo xtask setup` installs it",
        p.display()
    );
    p
}

/// `kubernetes-validate --strict FILES` with no network at all (a network namespace of its
/// own, holding only a loopback that is down): only the schemas the package bundles.
fn validate(files: &[PathBuf]) -> Output {
    Command::new("unshare")
        .arg("--net")
        .arg(venv_bin("kubernetes-validate"))
        .arg("--strict")
        .args(files)
        .output()
        .unwrap()
}

/// The documents of a YAML file, parsed by `PyYAML`.
fn yaml(file: &Path) -> Vec<Value> {
    let out = Command::new(venv_bin("python"))
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn kind(kind: &str, name: &str) -> Value {
    manifests()
        .iter()
        .flat_map(|f| yaml(f))
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in deploy/kubernetes"))
}

/// The value of `key=` in the systemd unit (continuation lines are not used there).
fn unit_value(key: &str) -> String {
    let unit = std::fs::read_to_string(repo().join("packaging/gatewayd.service")).unwrap();
    let prefix = format!("{key}=");
    let lines: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .collect();
    assert_eq!(lines.len(), 1, "{key}= in the unit: {lines:?}");
    lines[0].to_owned()
}

fn set<'a>(items: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    items.into_iter().map(str::to_owned).collect()
}

#[test]
fn every_manifest_validates_offline_and_a_broken_copy_does_not() {
    let files = manifests();
    let out = validate(&files);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let docs: usize = files.iter().map(|f| yaml(f).len()).sum();
    assert_eq!(
        said.matches(" passed for resource ").count(),
        docs,
        "{said}"
    );
    // The same validator refuses a wrong type and a misspelled field (strict).
    let ds = std::fs::read_to_string(repo().join("deploy/kubernetes/daemonset.yaml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (from, to, error) in [
        (
            "hostPID: true",
            "hostPID: \"yes\"",
            "hostPID: 'yes' is not of type 'boolean'",
        ),
        (
            "mountPropagation:",
            "mountPropogation:",
            "'mountPropogation' was unexpected",
        ),
    ] {
        assert!(ds.contains(from));
        let broken = dir.path().join("daemonset.yaml");
        std::fs::write(&broken, ds.replacen(from, to, 1)).unwrap();
        let out = validate(&[broken]);
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{to}: {said}");
        assert!(said.contains(error), "{said}");
    }
}

#[test]
fn the_daemonset_keeps_exactly_the_capabilities_and_writable_paths_of_the_systemd_unit() {
    let ds = kind("DaemonSet", "gatewayd");
    let pod = &ds["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    let unit_caps = unit_value("CapabilityBoundingSet");
    let unit_caps = set(unit_caps
        .split_whitespace()
        .map(|c| c.strip_prefix("CAP_").unwrap()));
    let added = set(sc["capabilities"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap()));
    assert_eq!(added, unit_caps);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(sc["privileged"], false);
    assert_eq!(unit_value("NoNewPrivileges"), "yes");
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(unit_value("ProtectSystem"), "strict");
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    // Writable: exactly the unit's ReadWritePaths= (`-`: may be missing), each the node's.
    let unit_rw = unit_value("ReadWritePaths");
    let unit_rw = set(unit_rw
        .split_whitespace()
        .map(|p| p.trim_start_matches('-')));
    let mounts = c["volumeMounts"].as_array().unwrap();
    let writable: Vec<&Value> = mounts.iter().filter(|m| m["readOnly"] != true).collect();
    assert_eq!(
        set(writable.iter().map(|m| m["mountPath"].as_str().unwrap())),
        unit_rw
    );
    for m in writable {
        let vol = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap();
        assert_eq!(vol["hostPath"]["path"], m["mountPath"], "{vol}");
    }
    // The command is the unit's, on the same paths.
    let exec = unit_value("ExecStart");
    let unit_args: Vec<&str> = exec.split_whitespace().collect();
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(unit_args[0], c["command"][0]);
    assert_eq!(unit_args[1], args[0]);
    for flag in ["--policy", "--socket", "--audit"] {
        let of = |v: &[&str]| v[v.iter().position(|a| *a == flag).unwrap() + 1].to_owned();
        assert_eq!(of(&unit_args), of(&args), "{flag}");
    }
    assert_eq!(pod["hostPID"], true);
    assert_eq!(pod["automountServiceAccountToken"], false);
}

#[test]
fn the_policy_configmap_is_the_example_policy_mounted_as_a_directory_that_reloads() {
    let cm = kind("ConfigMap", "gatewayd-policy");
    let text = cm["data"]["policy.json"].as_str().unwrap();
    let ours: Value = serde_json::from_str(text).unwrap();
    let example: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("policies/example.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        ours, example,
        "the ConfigMap's policy is policies/example.json"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.json");
    std::fs::write(&file, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args(["policy", "validate"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Mounted as the directory of --policy, no subPath: the kubelet then updates it by the
    // `..data` symlink swap, which the daemon's watch follows (tests/daemon/reload.rs).
    let ds = kind("DaemonSet", "gatewayd");
    let pod = &ds["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let vol = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["configMap"]["name"] == "gatewayd-policy")
        .unwrap();
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == vol["name"])
        .unwrap();
    assert!(mount.get("subPath").is_none(), "{mount}");
    let args = c["args"].as_array().unwrap();
    let at = args.iter().position(|a| a == "--policy").unwrap();
    assert_eq!(
        args[at + 1].as_str().unwrap(),
        format!("{}/policy.json", mount["mountPath"].as_str().unwrap())
    );
    assert!(!args.iter().any(|a| a == "--no-watch"));
    // Export goes to the collector's Service of collector.yaml.
    let svc = kind("Service", "otel-collector");
    let port = svc["spec"]["ports"][0]["port"].as_u64().unwrap();
    let target = format!(
        "otlp:http://{}.{}.svc:{port}",
        svc["metadata"]["name"].as_str().unwrap(),
        svc["metadata"]["namespace"].as_str().unwrap()
    );
    assert!(args.iter().any(|a| *a == target.as_str()), "{args:?}");
}
