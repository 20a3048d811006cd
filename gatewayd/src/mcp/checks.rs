//! What the proxy decides itself, beside the engine's `tools/call` decisions: the URI of a
//! `resources/read` or `resources/subscribe` (a `file://` URI as a read of the agent's
//! sandbox, another scheme only when the server's `resource_schemes` lists it), a server's
//! `elicitation/create` (no form asking for a secret, a URL only inside the egress
//! allowlist), and where the texts a server sends lie in a message (each is checked as the
//! server's output).
use serde_json::Value;

use gatewayd_core::{
    engine::{
        Reason,
        sandbox::{EgressView, SandboxView, parse_url},
        with_next,
    },
    policy::PathAccess,
};

/// A refused message: the reason code and a message for the model ending in `Next:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) reason: Reason,
    pub(super) message: String,
}

impl Refusal {
    fn new(reason: Reason, what: &str, next: Option<&str>) -> Refusal {
        let next = next.or(reason.next_step()).unwrap_or("ask the user");
        Refusal {
            reason,
            message: with_next(what, next),
        }
    }
}

/// The scheme of a URI (lower-cased), if it has one.
fn scheme(uri: &str) -> Option<String> {
    let (s, _) = uri.split_once(':')?;
    let mut b = s.bytes();
    (b.next().is_some_and(|c| c.is_ascii_alphabetic())
        && b.all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c)))
    .then(|| s.to_ascii_lowercase())
}

/// A resource URI the client asks the server for: a `file://` URI is a read of the path by
/// the agent (the top-level sandbox: readable roots, protected paths and names, gatewayd's
/// own files); another scheme must be one the server's `resource_schemes` lists.
pub(super) fn resource_uri(
    uri: &str,
    sandbox: &SandboxView,
    schemes: &[String],
) -> Result<(), Refusal> {
    match scheme(uri).as_deref() {
        Some("file") => {
            let path = sandbox.resolve(uri).map_err(|e| {
                Refusal::new(
                    Reason::Sandbox,
                    &format!(
                        "resource `{uri}` does not name a local file the gateway can check: {e}"
                    ),
                    None,
                )
            })?;
            sandbox
                .check(uri, &path, PathAccess::Read)
                .map_err(|message| Refusal {
                    reason: Reason::Sandbox,
                    message,
                })
        }
        Some(s) if schemes.iter().any(|x| x == s) => Ok(()),
        Some(s) => Err(Refusal::new(
            Reason::Sandbox,
            &format!(
                "resource `{uri}`: the policy lets this server's clients read `file:` resources inside the sandbox and no `{s}:` resources (mcp_servers.NAME.resource_schemes)"
            ),
            Some("use a resource of a scheme the policy lists, or ask the user to allow this one"),
        )),
        None => Err(Refusal::new(
            Reason::ArgRule,
            &format!("resource `{uri}` is not an absolute URI"),
            None,
        )),
    }
}

/// Words that mark a form field (its name, title or description) or a form's message as
/// asking for a secret.
const SECRET_WORDS: [&str; 14] = [
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "api key",
    "apikey",
    "credential",
    "private key",
    "ssh key",
    "one-time code",
    "otp",
    "cvv",
    "card number",
];

/// The secret word a text contains (camelCase, `_` and `-` split into words), if any.
fn secret_word(text: &str) -> Option<&'static str> {
    let mut t = String::with_capacity(text.len() + 8);
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_uppercase() && prev_lower {
            t.push(' ');
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        t.extend(c.to_lowercase());
    }
    let words: Vec<&str> = t
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let joined = format!(" {} ", words.join(" "));
    SECRET_WORDS
        .iter()
        .copied()
        .find(|w| joined.contains(&format!(" {} ", w.replace('-', " "))))
}

/// A server's `elicitation/create`: URL mode (`mode: "url"`) may send the user only to a
/// destination the egress allowlist lets through; form mode (the default) may not ask for
/// a password, token, key or other credential (MCP forbids it; a server that asks is
/// phishing the user).
pub(super) fn elicitation(params: &Value, egress: &EgressView) -> Result<(), Refusal> {
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        let url = params.get("url").and_then(Value::as_str).unwrap_or("");
        let dest = parse_url(url).map_err(|e| {
            Refusal::new(
                Reason::Sandbox,
                &format!("the server's URL elicitation `{url}` was not passed to the user: {e}"),
                None,
            )
        })?;
        if !egress.allows(&dest) {
            return Err(Refusal::new(
                Reason::Sandbox,
                &format!(
                    "the server asked to send the user to `{url}`; {}:{} is not in the policy's egress allowlist, so the request was not passed on",
                    dest.host, dest.port
                ),
                Some(
                    "do not ask the user to open it; ask the user whether this site should be allowed",
                ),
            ));
        }
        return Ok(());
    }
    let message = params.get("message").and_then(Value::as_str).unwrap_or("");
    let props = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object);
    let fields = props.into_iter().flatten().flat_map(|(name, p)| {
        let texts = ["title", "description", "format"]
            .into_iter()
            .filter_map(|k| p.get(k).and_then(Value::as_str));
        std::iter::once(name.as_str())
            .chain(texts)
            .map(move |t| (name.as_str(), t))
    });
    let found = fields
        .chain(std::iter::once(("", message)))
        .find_map(|(field, t)| secret_word(t).map(|w| (field, w)));
    match found {
        None => Ok(()),
        Some((field, word)) => {
            let what = if field.is_empty() {
                "its message".to_owned()
            } else {
                format!("field `{field}`")
            };
            Err(Refusal::new(
                Reason::SecretEgress,
                &format!(
                    "the server asked the user for a secret through a form ({what} mentions `{word}`); MCP forms must not ask for passwords, tokens or keys, and the request was not shown to the user"
                ),
                Some(
                    "do not ask the user for it; ask the user to give such a secret to the tool out of band if it is needed",
                ),
            ))
        }
    }
}

/// JSON pointers to the texts in a message from the server that the model may read: the
/// `text` of content blocks (`type: "text"`) and of resource contents (beside a `uri`),
/// every `statusMessage` and `systemPrompt`, a prompt's `description` and an error's
/// `message`. `_meta` and `inputRequests` (decided as requests) are not searched.
pub(super) fn text_slots(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = ["/result/description", "/error/message"]
        .into_iter()
        .filter(|p| v.pointer(p).is_some_and(Value::is_string))
        .map(str::to_owned)
        .collect();
    walk(v, String::new(), &mut out);
    out
}

fn walk(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                let is_text = k == "text"
                    && x.is_string()
                    && (o.get("type").and_then(Value::as_str) == Some("text")
                        || o.contains_key("uri"));
                if is_text
                    || (matches!(k.as_str(), "statusMessage" | "systemPrompt") && x.is_string())
                {
                    out.push(here);
                } else if k != "_meta" && k != "inputRequests" {
                    walk(x, here, out);
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use gatewayd_core::policy::{Network, Sandbox};

    fn sandbox(dir: &std::path::Path) -> SandboxView {
        SandboxView::new(&Sandbox {
            readable: vec![dir.to_owned()],
            protected: vec![dir.join("secret")],
            ..Sandbox::default()
        })
    }

    #[test]
    fn resource_uris_are_decided() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        std::fs::create_dir(dir.path().join("secret")).unwrap();
        let sb = sandbox(dir.path());
        let schemes = vec!["demo".to_owned()];
        let inside = format!("file://{}/a.txt", dir.path().display());
        assert_eq!(resource_uri(&inside, &sb, &schemes), Ok(()));
        assert_eq!(resource_uri("demo://resource/1", &sb, &schemes), Ok(()));
        for (uri, reason) in [
            ("file:///etc/hostname".to_owned(), Reason::Sandbox),
            (
                format!("file://{}/secret/x", dir.path().display()),
                Reason::Sandbox,
            ),
            ("https://example.com/".to_owned(), Reason::Sandbox),
            ("demo-not".to_owned(), Reason::ArgRule),
        ] {
            let r = resource_uri(&uri, &sb, &schemes).unwrap_err();
            assert_eq!(r.reason, reason, "{uri}");
            assert!(r.message.contains("Next: "), "{}", r.message);
        }
    }

    #[test]
    fn elicitations_are_decided() {
        let egress = EgressView::new(&Network {
            egress: serde_json::from_value(json!([{"host": "ok.example"}])).unwrap(),
            ..Network::default()
        });
        let form = |props: Value, message: &str| {
            json!({"mode": "form", "message": message,
                   "requestedSchema": {"type": "object", "properties": props}})
        };
        let ok = form(
            json!({"name": {"type": "string"}, "age": {"type": "number"}}),
            "Who?",
        );
        assert_eq!(elicitation(&ok, &egress), Ok(()));
        for bad in [
            form(json!({"password": {"type": "string"}}), "Log in"),
            form(
                json!({"x": {"type": "string", "title": "GitHub API key"}}),
                "Hi",
            ),
            form(json!({"githubToken": {"type": "string"}}), "Hi"),
            form(
                json!({"value": {"type": "string"}}),
                "Enter your passphrase",
            ),
        ] {
            let r = elicitation(&bad, &egress).unwrap_err();
            assert_eq!(r.reason, Reason::SecretEgress, "{bad}");
            assert!(r.message.contains("Next: "));
        }
        let url = |u: &str| json!({"mode": "url", "url": u, "elicitationId": "1", "message": "m"});
        assert_eq!(elicitation(&url("https://ok.example/x"), &egress), Ok(()));
        let r = elicitation(&url("https://evil.example/x"), &egress).unwrap_err();
        assert_eq!(r.reason, Reason::Sandbox);
        assert!(elicitation(&url("javascript:alert(1)"), &egress).is_err());
    }

    #[test]
    fn texts_are_found() {
        let v = json!({"result": {"description": "d", "messages": [
            {"role": "user", "content": {"type": "text", "text": "t"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "x", "text": "r"}}},
            {"role": "user", "content": {"type": "image", "data": "AAA"}}],
            "task": {"statusMessage": "s"}, "_meta": {"text": "m"}}});
        assert_eq!(
            text_slots(&v),
            vec![
                "/result/description",
                "/result/messages/0/content/text",
                "/result/messages/1/content/resource/text",
                "/result/task/statusMessage"
            ]
        );
        let e = json!({"error": {"code": 1, "message": "m"}});
        assert_eq!(text_slots(&e), vec!["/error/message"]);
    }
}
