//! The two MCP methods the proxy changes: `tools/list` (each page filtered to the tools the
//! gateway accepted) and `tools/call` (refused calls answered with a tool error the model
//! can read; allowed calls' results redacted and, for untrusted tools, fenced).
use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::protocol::{Checked, Status, ToolStatus};
use gatewayd_core::engine::{ToolDefinition, Verdict};

/// The definition fields the gateway fingerprints, from one listed tool; a tool without a
/// string name, or with a description that is not a string, is refused (the whole listing
/// is then answered with an error, as a listing the gateway could not check).
pub(super) fn definition(tool: &Value) -> Result<ToolDefinition, String> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .ok_or("a listed tool without a string `name`")?;
    let description = match tool.get("description") {
        None => "",
        Some(d) => d
            .as_str()
            .ok_or_else(|| format!("tool `{name}`: `description` is not a string"))?,
    };
    Ok(ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(gatewayd_core::engine::fingerprint::default_schema),
    })
}

/// What the gateway said about one listed tool (`tools/register`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Withheld {
    pub(super) name: String,
    pub(super) status: String,
}

/// Keeps in a `tools/list` result only the tools whose registration was `accepted` (in
/// learn mode also those `not_in_policy`: their calls are learned); for
/// tools labelled untrusted, `outputSchema` is removed (their results come back as one
/// fenced text block, without structured content). Returns what was withheld.
pub(super) fn filter_listing(
    result: &mut Value,
    statuses: &[ToolStatus],
    untrusted: &BTreeSet<String>,
    learn: bool,
) -> Vec<Withheld> {
    let shown = |s: &Status| *s == Status::Accepted || (learn && *s == Status::NotInPolicy);
    let accepted: BTreeSet<&str> = statuses
        .iter()
        .filter(|s| shown(&s.status))
        .map(|s| s.name.as_str())
        .collect();
    let mut withheld: Vec<Withheld> = statuses
        .iter()
        .filter(|s| !shown(&s.status))
        .map(|s| Withheld {
            name: s.name.clone(),
            status: s.status.code().to_owned(),
        })
        .collect();
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
        return withheld;
    };
    tools.retain(|t| {
        let keep = t["name"].as_str().is_some_and(|n| accepted.contains(n));
        if !keep && !t["name"].is_string() {
            withheld.push(Withheld {
                name: String::new(),
                status: "no name".into(),
            });
        }
        keep
    });
    // A tool the policy does not list, shown in learn mode, is untrusted too.
    let unlisted: BTreeSet<&str> = statuses
        .iter()
        .filter(|s| s.status == Status::NotInPolicy)
        .map(|s| s.name.as_str())
        .collect();
    for t in tools.iter_mut() {
        if t["name"]
            .as_str()
            .is_some_and(|n| untrusted.contains(n) || unlisted.contains(n))
            && let Some(o) = t.as_object_mut()
        {
            o.remove("outputSchema");
        }
    }
    withheld
}

/// The result of a refused call: a tool error naming the decision, the reason code and the
/// gateway's message (written for the model). `modern`: the request came in a 2026-07-28
/// session, whose results carry `resultType`.
pub(super) fn refused(verdict: &Verdict, modern: bool) -> Value {
    let text = crate::backend::verdict_text(verdict);
    let mut r = json!({"content": [{"type": "text", "text": text}], "isError": true});
    if modern {
        r["resultType"] = json!("complete");
    }
    r
}

/// What the gateway is given of a tool's result (`call/output`): its text, when the result
/// is text only (the common case, fenced as one block for an untrusted tool); otherwise its
/// content and structured content as JSON.
pub(super) fn output_payload(result: &Value) -> Value {
    let content = result.get("content").cloned().unwrap_or(json!([]));
    let texts: Option<Vec<&str>> = content.as_array().and_then(|items| {
        items
            .iter()
            .map(|c| (c["type"] == "text").then(|| c["text"].as_str()).flatten())
            .collect()
    });
    match (texts, result.get("structuredContent")) {
        (Some(t), None) => Value::String(t.join("\n")),
        (_, s) => {
            let mut p = json!({"content": content});
            if let Some(s) = s {
                p["structuredContent"] = s.clone();
            }
            p
        }
    }
}

/// Whether a content item is binary: an image or audio (`data`), or an embedded resource
/// with a `blob`.
fn is_binary(item: &Value) -> bool {
    matches!(item["type"].as_str(), Some("image" | "audio")) && item.get("data").is_some()
        || item["type"] == "resource" && item.pointer("/resource/blob").is_some()
}

/// Takes the binary items out of a result's `content` (what is left is checked as the
/// tool's output): each with its place, in order.
pub(super) fn take_binary(result: &mut Value) -> Vec<(usize, Value)> {
    let Some(items) = result.get_mut("content").and_then(Value::as_array_mut) else {
        return Vec::new();
    };
    let (binary, rest): (Vec<_>, Vec<_>) = std::mem::take(items)
        .into_iter()
        .enumerate()
        .partition(|(_, c)| is_binary(c));
    *items = rest.into_iter().map(|(_, c)| c).collect();
    binary
}

/// Puts the binary items back after the checked output, as they came: at their places when
/// the text items are still the tool's own, after it when the output became one text (a
/// fenced or withheld one). A result that had only binary items gets no empty text.
pub(super) fn put_binary(result: &mut Value, binary: Vec<(usize, Value)>) {
    if binary.is_empty() {
        return;
    }
    let Some(items) = result.get_mut("content").and_then(Value::as_array_mut) else {
        return;
    };
    if binary.len() == binary.last().map_or(0, |(i, _)| i + 1) {
        // Binary only: the empty text the check made of nothing is dropped.
        items.retain(|c| c["text"].as_str().is_some_and(|t| !t.trim().is_empty()));
    }
    for (at, item) in binary {
        let at = at.min(items.len());
        items.insert(at, item);
    }
}

/// Puts the gateway's answer to `call/output` back into the tool's result: a text (redacted,
/// or fenced for an untrusted tool) becomes the only content; a redacted payload replaces
/// content and structured content.
pub(super) fn apply_output(result: &mut Value, answer: &Checked) {
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    match answer.output.as_ref() {
        Some(Value::String(text)) => {
            obj.insert("content".into(), json!([{"type": "text", "text": text}]));
            obj.remove("structuredContent");
        }
        Some(Value::Object(p)) => {
            if let Some(c) = p.get("content") {
                obj.insert("content".into(), c.clone());
            }
            match p.get("structuredContent") {
                Some(s) => {
                    obj.insert("structuredContent".into(), s.clone());
                }
                None => {
                    obj.remove("structuredContent");
                }
            }
        }
        _ => {
            obj.insert(
                "content".into(),
                json!([{"type": "text", "text": "[gatewayd: the tool's output was withheld]"}]),
            );
            obj.remove("structuredContent");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_keeps_accepted_tools_only() {
        let mut r = json!({"tools": [
            {"name": "a", "outputSchema": {"type": "object"}},
            {"name": "b"}, {"name": "c"}, {"description": "nameless"}],
            "nextCursor": "p2"});
        let status = |name: &str, status: Status| ToolStatus {
            name: name.into(),
            status,
        };
        let statuses = vec![
            status("a", Status::Accepted),
            status(
                "b",
                Status::RugPull {
                    pinned: "sha256:a".into(),
                    got: "sha256:b".into(),
                },
            ),
            status("c", Status::NotInPolicy),
        ];
        let untrusted = BTreeSet::from(["a".to_owned()]);
        let w = filter_listing(&mut r, &statuses, &untrusted, false);
        assert_eq!(r["tools"], json!([{"name": "a"}]));
        assert_eq!(r["nextCursor"], "p2");
        assert_eq!(w.len(), 3, "{w:?}");
        assert_eq!(w[0].status, "rug_pull");
        // Learn mode shows the tools the policy does not list; a rug pull stays withheld.
        // Its results are fenced: no structured output.
        let mut r = json!({"tools": [{"name": "a"}, {"name": "b"},
            {"name": "c", "outputSchema": {"type": "object"}}]});
        let w = filter_listing(&mut r, &statuses, &untrusted, true);
        assert_eq!(r["tools"], json!([{"name": "a"}, {"name": "c"}]));
        assert_eq!(w.len(), 1, "{w:?}");
    }

    #[test]
    fn refusals_are_tool_errors() {
        let d = Verdict {
            decision: gatewayd_core::engine::Decision::Deny,
            reason: gatewayd_core::engine::Reason::Sandbox,
            message: "protected".into(),
            matched_rules: Vec::new(),
            hold_reasons: Vec::new(),
            approval_id: None,
            would_deny: None,
        };
        let r = refused(&d, true);
        assert_eq!(r["isError"], true);
        assert_eq!(r["resultType"], "complete");
        assert!(
            r["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("`sandbox`")
        );
        assert!(refused(&d, false).get("resultType").is_none());
    }

    #[test]
    fn text_results_are_sent_as_text() {
        let r = json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        assert_eq!(output_payload(&r), json!("a\nb"));
        let r = json!({"content": [{"type": "image", "data": "x"}]});
        assert!(output_payload(&r).is_object());
        let r = json!({"content": [{"type": "text", "text": "a"}], "structuredContent": {"a": 1}});
        assert_eq!(output_payload(&r)["structuredContent"], json!({"a": 1}));
    }

    fn checked(output: Option<Value>) -> Checked {
        Checked {
            output,
            error: None,
            legs: gatewayd_core::engine::Legs::default(),
        }
    }

    #[test]
    fn outputs_are_put_back() {
        let mut r = json!({"content": [{"type": "text", "text": "raw"}],
                           "structuredContent": {"x": 1}, "isError": false});
        apply_output(
            &mut r,
            &checked(Some(json!("<untrusted-output>raw</untrusted-output>"))),
        );
        assert_eq!(
            r["content"][0]["text"],
            "<untrusted-output>raw</untrusted-output>"
        );
        assert!(r.get("structuredContent").is_none());
        assert_eq!(r["isError"], false);
        let mut r = json!({"content": [{"type": "text", "text": "pw"}]});
        apply_output(
            &mut r,
            &checked(Some(
                json!({"content": [{"type": "text", "text": "[REDACTED:pw]"}]}),
            )),
        );
        assert_eq!(r["content"][0]["text"], "[REDACTED:pw]");
        let mut r = json!({"content": []});
        apply_output(&mut r, &checked(None));
        assert!(
            r["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("withheld")
        );
    }
}
