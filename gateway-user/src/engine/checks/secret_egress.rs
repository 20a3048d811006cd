//! No secret leaves through a `sends_out` tool, and no credential appears in any tool's
//! arguments (`secret_egress`), in any encoding the secret set recognises. A `sends_out` call
//! is denied outright when a secret could not be loaded (`check_error`).
use super::{Ctx, Step};
use crate::{engine::Reason, policy::Label};

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let tool = cx.tool()?;
    let secrets = &cx.engine.secrets;
    let sends_out = tool.has(Label::SendsOut);
    if sends_out && !secrets.missing.is_empty() {
        let message = format!(
            "secret(s) {} could not be loaded, so what `{}` sends cannot be checked",
            secrets.missing.join(", "),
            tool.def.name
        );
        return Err(cx.deny(Reason::CheckError, message));
    }
    let set = if sends_out {
        &secrets.all
    } else {
        &secrets.creds
    };
    // The session's own secrets, on calls that send data out.
    let own = sends_out.then(|| cx.session.secrets());
    if let Some(secret) = cx
        .arg_texts()
        .iter()
        .find_map(|t| set.find(t).or_else(|| own?.find(t)))
    {
        return Err(cx.deny(
            Reason::SecretEgress,
            format!(
                "the arguments contain the registered secret `{secret}` (plain or encoded); secrets and credentials never leave through tools"
            ),
        ));
    }
    Ok(())
}
