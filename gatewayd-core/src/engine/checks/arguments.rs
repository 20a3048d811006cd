//! The arguments: a JSON object, valid against the tool's input schema, and every argument
//! rule holds (`arg_rule`). Path values are resolved and checked against the sandbox, URLs
//! against the egress allowlist (`sandbox`), command lines against the shell rule (`shell`).
//! A path's canonical form replaces its value: rules and the handler see that.
use serde_json::Value;

use super::{Ctx, Step, arg_ref};
use crate::{
    engine::{Engine, Reason, Verdict, args, sandbox, shellcheck, with_next},
    policy::PathAccess,
    shell::RipgrepRules,
};

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let tool = cx.tool()?;
    if !cx.args.is_object() {
        return Err(cx.deny(Reason::ArgRule, "arguments must be a JSON object"));
    }
    if let Err(m) = args::schema_check(&tool.def, &cx.args, "arguments") {
        return Err(cx.deny(Reason::ArgRule, m));
    }
    // Canonical forms of path values: (argument, array index, value).
    let mut canon: Vec<(&str, Option<usize>, Value)> = Vec::new();
    let mut reach = shellcheck::LineReach::default();
    let search = search_rules(&cx.args);
    for (arg, c) in &tool.args {
        let Some(v) = arg_ref(&cx.args, arg) else {
            if c.rule.required {
                return Err(cx.deny(Reason::ArgRule, format!("`{arg}` is required")));
            }
            continue;
        };
        // An array: every element is checked (an empty one has nothing to check).
        match v {
            Value::Array(a) => {
                for (i, item) in a.iter().enumerate() {
                    if let Some(n) = check_value(
                        cx.engine,
                        &cx.session.user,
                        arg,
                        c,
                        item,
                        &search,
                        &mut reach,
                    )? {
                        canon.push((arg, Some(i), n));
                    }
                }
            }
            x => {
                if let Some(n) =
                    check_value(cx.engine, &cx.session.user, arg, c, x, &search, &mut reach)?
                {
                    canon.push((arg, None, n));
                }
            }
        }
    }
    cx.line_sends_out |= reach.sends_out;
    if !canon.is_empty() {
        let a = cx.args.to_mut();
        for (k, i, n) in canon {
            let slot = arg_mut(a, k).and_then(|v| match i {
                Some(i) => v.get_mut(i),
                None => Some(v),
            });
            if let Some(slot) = slot {
                *slot = n;
            }
        }
    }
    Ok(())
}

/// The ripgrep rules of a call whose path is a [`PathAccess::Search`]: ripgrep's defaults,
/// and the globs of its `glob` argument, one a line (the hook writes Claude Code's Grep
/// `glob` so).
fn search_rules(args: &Value) -> RipgrepRules {
    let text = args.get("glob").and_then(Value::as_str).unwrap_or_default();
    RipgrepRules {
        globs: (text.lines().filter(|g| !g.is_empty()))
            .map(|g| (g.to_owned(), false))
            .collect(),
        ..RipgrepRules::default()
    }
}

/// One argument value (one element of an array); for a path, returns its canonical form,
/// which replaces the value. `user` is the session's (a shell line's `~` is its home);
/// `search` are the call's ripgrep rules ([`search_rules`]).
fn check_value(
    engine: &Engine,
    user: &str,
    arg: &str,
    c: &args::CArg,
    v: &Value,
    search: &RipgrepRules,
    reach: &mut shellcheck::LineReach,
) -> Result<Option<Value>, Verdict> {
    use Reason as R;
    if let Some(access) = c.rule.path {
        let raw = v
            .as_str()
            .ok_or_else(|| Verdict::deny(R::ArgRule, format!("`{arg}` must be a path string")))?
            .to_owned();
        let real = engine.sandbox.resolve(&raw).map_err(|m| {
            Verdict::deny(R::Sandbox, format!("`{arg}`: path cannot be resolved: {m}"))
        })?;
        let checked = if access == PathAccess::Search {
            engine.sandbox.check_search(&raw, &real, search.clone())
        } else {
            engine.sandbox.check(&raw, &real, access)
        };
        checked.map_err(|m| Verdict::deny(R::Sandbox, format!("`{arg}`: {m}")))?;
        let real = Value::String(real.to_string_lossy().into_owned());
        c.check_scalar(arg, &real)
            .map_err(|m| Verdict::deny(R::ArgRule, m))?;
        return Ok(Some(real));
    } else if c.rule.url {
        let raw = v
            .as_str()
            .ok_or_else(|| Verdict::deny(R::ArgRule, format!("`{arg}` must be a URL string")))?;
        let d = sandbox::parse_url(raw)
            .map_err(|m| Verdict::deny(R::ArgRule, format!("`{arg}`: {m}")))?;
        if !engine.egress.allows(&d) {
            return Err(Verdict::deny(
                R::Sandbox,
                with_next(
                    &format!(
                        "`{arg}`: destination {}:{} is not in the network egress allowlist",
                        d.host, d.port
                    ),
                    &engine.egress.next_step(
                        &d,
                        "use a destination the policy allows, or ask the user to allow this one",
                    ),
                ),
            ));
        }
    } else if let Some(rule) = &c.rule.shell {
        let line = v.as_str().ok_or_else(|| {
            Verdict::deny(R::ArgRule, format!("`{arg}` must be a command string"))
        })?;
        let line_reach = shellcheck::check(&engine.sandbox, &engine.egress, rule, arg, line, user)
            .map_err(|(r, m)| Verdict::deny(r, m))?;
        reach.sends_out |= line_reach.sends_out;
    }
    c.check_scalar(arg, v)
        .map_err(|m| Verdict::deny(R::ArgRule, m))?;
    Ok(None)
}

/// Like [`arg_ref`], for writing.
fn arg_mut<'a>(args: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    if key.starts_with('/') {
        args.pointer_mut(key)
    } else {
        args.get_mut(key)
    }
}
