//! No secret leaves through a `sends_out` tool, and no credential appears in any tool's
//! arguments (`secret_egress`), in any form the egress matcher sees through
//! ([`secrets::find_in_call`]: normalised, decoded, as a fragment, split across the arguments
//! of the call or, for `sends_out` calls, across the session's recent egress calls). A
//! `sends_out` call is denied outright when a secret could not be loaded (`check_error`).
//!
//! [`remember`] is the state update: an allowed `sends_out` call's texts join the session's
//! egress window. [`scrub_text`] keeps secrets, disguised too, out of messages and records.
use std::borrow::Cow;

use super::{Ctx, Step};
use crate::{
    engine::{
        Engine, Reason, Session, ToolCall, Verdict,
        registry::Tool,
        secrets::{self, EgressWindow, Match},
        with_next,
    },
    policy::Label,
};

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let tool = cx.tool()?;
    let store = &cx.engine.secrets;
    let sends_out = cx.sends_out()?;
    if sends_out && !store.missing.is_empty() {
        let message = with_next(
            &format!(
                "secret(s) {} could not be loaded, so what `{}` sends cannot be checked",
                store.missing.join(", "),
                tool.def.name
            ),
            "nothing was sent; ask the user to make the secret(s) loadable",
        );
        return Err(cx.deny(Reason::CheckError, message));
    }
    // A `sends_out` call: the engine's secrets and credentials and the session's own
    // secrets, joined with the session's recent egress. Any other call: credentials alone,
    // within the call.
    let empty = EgressWindow::new();
    let (sets, window) = if sends_out {
        (
            vec![&store.all, cx.session.secrets()],
            cx.session.egress_window(),
        )
    } else {
        (vec![&store.creds], &empty)
    };
    if sets.iter().all(|s| s.is_empty()) {
        return Ok(());
    }
    let owned = secrets::egress_texts(&cx.call.arguments);
    let texts: Vec<&str> = owned.iter().map(AsRef::as_ref).collect();
    if let Some(m) = secrets::find_in_call(&sets, &texts, window) {
        return Err(cx.deny(Reason::SecretEgress, m.message()));
    }
    Ok(())
}

/// After an allowed call of a `sends_out` tool: its argument texts join the session's egress
/// window, so a secret split across this call and a later one is found.
pub(in crate::engine) fn remember(s: &mut Session, tool: &Tool, call: &ToolCall) {
    if tool.has(Label::SendsOut) {
        let owned = secrets::egress_texts(&call.arguments);
        let texts: Vec<&str> = owned.iter().map(AsRef::as_ref).collect();
        s.remember_egress(&texts);
    }
}

/// `text` (a verdict's message, a tool's name, a session id) as a model or an audit record
/// may see it: the exact forms of every secret replaced by `[REDACTED:name]`; then, when
/// `deep`, if the matcher still finds a secret in it (encoded, disguised, a fragment: a path
/// or a URL quoted in a denial can hold one), the whole text is withheld.
/// Whether a message of `reason` can quote the model's text beyond names: such a message is
/// scrubbed deeply (encodings, fragments), others for the exact values. An allow message names
/// the registered tool, a `secret_egress` message is made of names, and a `not_allowlisted`
/// message's one quote (the tool name asked for) is scrubbed deeply where it is made.
pub(in crate::engine) fn message_quotes_arguments(reason: Reason) -> bool {
    !matches!(
        reason,
        Reason::Allowed | Reason::SecretEgress | Reason::NotAllowlisted
    )
}

pub(in crate::engine) fn scrub_text<'t>(
    engine: &Engine,
    s: &Session,
    text: &'t str,
    deep: bool,
) -> Cow<'t, str> {
    let all = &engine.secrets.all;
    let exact = match all.scrub(text) {
        Cow::Borrowed(t) => s.secrets().scrub(t),
        Cow::Owned(t) => Cow::Owned(s.secrets().scrub(&t).into_owned()),
    };
    if !deep {
        return exact;
    }
    match secrets::find_in_call(&[all, s.secrets()], &[&exact], &EgressWindow::new()) {
        None => exact,
        Some(Match {
            secret: Some(name),
            encoding,
        }) => Cow::Owned(format!(
            "[withheld: it holds the registered secret `{name}` ({encoding})]"
        )),
        Some(_) => Cow::Owned("[withheld: it cannot be checked for secrets]".to_owned()),
    }
}

/// A refusal's message scrubbed as [`scrub_text`] does for its reason; a message the scrub
/// changed (a secret replaced, or the whole text withheld) gets its reason's next step again.
/// A `not_allowlisted` message is left as it is: its one quote, the tool name asked for, was
/// scrubbed deeply where the message was made, and the rest is the policy's tool list.
pub(in crate::engine) fn scrub_verdict(engine: &Engine, s: &Session, v: &mut Verdict) {
    if v.reason == Reason::NotAllowlisted {
        return;
    }
    let deep = message_quotes_arguments(v.reason);
    if let Cow::Owned(scrubbed) = scrub_text(engine, s, &v.message, deep) {
        v.message = scrubbed;
        v.add_next();
    }
}
