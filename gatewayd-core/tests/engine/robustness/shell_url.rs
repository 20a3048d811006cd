//! Robustness of the shell-line and URL parsers: deterministic fuzzing (see
//! `robustness_support.rs`) of `shell::split`, `shell::analyze` and `sandbox::parse_url`. Each
//! target asserts "no panic" (the panicking input is reported) plus a few invariants that hold
//! by construction of the code.
use super::inputs as robustness_inputs;
use super::robustness_support;

use std::time::Instant;

use gatewayd_core::{engine::sandbox::parse_url, shell};
use robustness_inputs::*;
use robustness_support::*;

// ---- shell lines ----

fn shell_argv(r: &mut Rng) -> Vec<String> {
    let mut v = vec![r.pick(COMMANDS).to_string()];
    for _ in 0..r.below(10) {
        let mut w = String::new();
        for _ in 0..r.below(3) {
            if r.chance(1, 5) {
                w.push(r.char());
            } else {
                w.push_str(r.pick(SHELL_ATOMS));
            }
        }
        v.push(w);
    }
    v
}

#[test]
fn shell_split_and_analyze_never_panic() {
    let t = Instant::now();
    let mut r = Rng::new(1);
    let n = 6000;
    for _ in 0..n {
        let line = shell_line(&mut r);
        for through_shell in [false, true] {
            let argv = guard("shell::split", &(&line, through_shell), || {
                shell::split(&line, through_shell)
            });
            if let Ok(argv) = &argv {
                assert!(argv.iter().all(|w| !w.contains('\0')), "{line:?}");
                guard("shell::analyze", argv, || {
                    let _ = shell::analyze(argv);
                });
            }
            // Through a shell only refuses more: what it accepts reads the same without one.
            if through_shell && let Ok(words) = argv {
                assert_eq!(
                    shell::split(&line, false),
                    Ok(words),
                    "split differs with and without a shell: {line:?}"
                );
            }
        }
        let argv = shell_argv(&mut r);
        guard("shell::analyze", &argv, || {
            let _ = shell::analyze(&argv);
        });
    }
    report("shell", 2 * n, t);
}

// ---- URLs ----

#[test]
fn url_parsing_never_panics() {
    let t = Instant::now();
    let mut r = Rng::new(2);
    let n = 20_000;
    for _ in 0..n {
        let u = url(&mut r);
        if let Ok(d) = guard("parse_url", &u, || parse_url(&u)) {
            assert!(
                !d.host.is_empty()
                    && d.host.chars().all(|c| c.is_ascii_lowercase()
                        || c.is_ascii_digit()
                        || matches!(c, '.' | '-' | ':' | '_')),
                "{u:?} gave host {:?}",
                d.host
            );
        }
    }
    report("parse_url", n, t);
}
