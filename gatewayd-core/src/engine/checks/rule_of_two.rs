//! The Rule of Two: a session that has seen untrusted content and read private data may not
//! send data out (`trifecta` in `deny` mode, a `trifecta` hold reason in `hold` mode). The
//! legs are marked by [`mark_legs`] when a call is allowed (the untrusted leg when untrusted
//! output is seen: see the untrusted-echo check).
use super::{Ctx, Step};
use crate::{
    engine::{Reason, Session, registry::Tool},
    policy::{Label, TrifectaMode},
};

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let tool = cx.tool()?;
    let legs = cx.session.legs();
    if cx.sends_out()? && legs.untrusted && (legs.private || tool.has(Label::ReadsPrivate)) {
        let msg = "Rule of Two: this session has seen untrusted content and read private data, so it may not send data out";
        match cx.engine.policy.trifecta {
            TrifectaMode::Deny => {
                return Err(cx.deny(Reason::Trifecta, msg));
            }
            TrifectaMode::Hold => cx.hold.push("trifecta".to_owned()),
        }
    }
    Ok(())
}

/// An allowed call marks the legs its tool's labels name: `untrusted_output`, `reads_private`,
/// `sends_out`.
pub(in crate::engine) fn mark_legs(s: &mut Session, tool: &Tool) {
    // Its output is about to be seen: set before the tool runs, so a call decided before the
    // output is reported (the daemon's `call/decide`, then `call/output`) already counts it.
    if tool.has(Label::UntrustedOutput) {
        s.mark_untrusted();
    }
    if tool.has(Label::ReadsPrivate) {
        s.mark_private();
    }
    if tool.has(Label::SendsOut) {
        s.mark_egress();
    }
}
