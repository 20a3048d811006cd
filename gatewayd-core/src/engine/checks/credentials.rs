//! The credentials the tool needs are available (`check_error`). Checked before the approval,
//! so that an approval is never spent on a call that cannot run. [`inject`] hands them to the
//! handler of an allowed call.
use super::{Ctx, Step};
use crate::engine::{Credentials, Engine, Reason, registry::Tool, with_next};

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let tool = cx.tool()?;
    for c in &tool.def.credentials {
        if cx.engine.secrets.credential(c).is_none() {
            let message = with_next(
                &format!("credential `{c}` for `{}` is not available", tool.def.name),
                &format!("nothing ran; ask the user to provide credential `{c}`"),
            );
            return Err(cx.deny(Reason::CheckError, message));
        }
    }
    Ok(())
}

/// The credentials `tool` lists, with their values.
pub(in crate::engine) fn inject(engine: &Engine, tool: &Tool) -> Credentials {
    let mut creds = Credentials::default();
    for c in &tool.def.credentials {
        if let Some(v) = engine.secrets.credential(c) {
            creds.0.insert(c.clone(), v.to_owned());
        }
    }
    creds
}
