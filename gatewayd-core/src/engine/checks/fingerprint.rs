//! The tool's definition equals its pin (`rug_pull`): a definition registered at run time that
//! differs blocks the tool until a person re-pins it.
use super::{Ctx, Step};
use crate::engine::Reason;

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let tool = cx.tool()?;
    if tool.current != tool.pin {
        let message = format!(
            "tool `{}` changed since it was pinned (now {}, pinned {}); it is blocked until a person re-pins it",
            tool.def.name, tool.current, tool.pin
        );
        return Err(cx.deny(Reason::RugPull, message));
    }
    Ok(())
}
