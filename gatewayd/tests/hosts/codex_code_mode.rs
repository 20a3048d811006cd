//! Codex's code mode, the tool mode of the newest models in its catalog: the model writes a
//! JavaScript script (`exec`) whose `tools.NAME(...)` calls are the tool calls. Observed with
//! Codex 0.171: `exec` itself sends no hook event, and each call the script makes sends the
//! `PreToolUse` the same call made directly would (`Bash` for `exec_command`, `apply_patch`),
//! and a call the hook denies throws in the script, which ends. So the gateway decides each
//! call of a script as it decides the model's own.
use serde_json::{Value, json};

use crate::harness::{CODEX_MODEL, Host, KEY, Mode, World, loopback_only, report};

/// A model of Codex's catalog (`models.json` in `home`) that works in code mode.
fn code_mode_model(home: &std::path::Path) -> String {
    let text = std::fs::read_to_string(home.join(".codex/models.json")).unwrap();
    let catalog: Value = serde_json::from_str(&text).unwrap();
    let models = catalog["models"].as_array().unwrap();
    let model = models
        .iter()
        .find(|m| m["tool_mode"] == "code_mode_only" && m["visibility"] == "list");
    model.and_then(|m| m["slug"].as_str()).unwrap().to_owned()
}

/// A script's read of the README works in every mode; its read of the home's key works
/// bare and is refused by the hook, whose reason reaches the model.
#[test]
fn each_call_of_a_code_mode_script_is_decided() {
    loopback_only();
    let Some(program) = Host::Codex.program() else {
        return;
    };
    for mode in [Mode::Bare, Mode::Hooks] {
        let home = World::dir_for("code-mode", Host::Codex, mode).join("home");
        let steps = [
            json!({"code": "const r = await tools.exec_command({cmd: 'cat README.md'});\ntext(r);"}),
            json!({"code": format!(
                "const r = await tools.exec_command({{cmd: 'cat {}/.ssh/id_rsa'}});\ntext(r);",
                home.display()
            )}),
        ];
        let w = World::new("code-mode", Host::Codex, mode, program.clone(), &steps);
        let config = w.home.join(".codex/config.toml");
        let model = code_mode_model(&w.home);
        let text = std::fs::read_to_string(&config).unwrap();
        let text = text.replace(&format!("\"{CODEX_MODEL}\""), &format!("\"{model}\""));
        std::fs::write(&config, text).unwrap();
        let run = w.run();
        let told = |i: usize| run.results.get(i).cloned().unwrap_or_default();
        let key_read = told(1).contains(KEY);
        report(&format!(
            "codex code mode ({model}) {mode:?}: README read {}, key read {key_read}",
            told(0).contains("A small project")
        ));
        assert!(told(0).contains("A small project"), "{}", run.describe());
        if mode == Mode::Bare {
            assert!(
                key_read,
                "bare, the script reads the key\n{}",
                run.describe()
            );
        } else {
            assert!(
                !key_read,
                "the hook let the key through\n{}",
                run.describe()
            );
            assert!(told(1).contains("gatewayd refused"), "{}", run.describe());
        }
    }
}
