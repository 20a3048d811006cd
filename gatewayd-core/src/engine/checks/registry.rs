//! The tool is in the registry (`not_allowlisted`; the message lists the registered tools).
use super::{Ctx, Step};
use crate::engine::Reason;

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let Some(tools) = cx.tools else {
        return Err(cx.deny(Reason::CheckError, "registry lock poisoned"));
    };
    if let Some(tool) = tools.get(&cx.call.tool) {
        cx.tool = Some(tool);
        Ok(())
    } else {
        let message = format!(
            "tool `{}` is not in the registry; registered tools: {}",
            cx.call.tool.chars().take(100).collect::<String>(),
            cx.engine.tool_list
        );
        Err(cx.deny(Reason::NotAllowlisted, message))
    }
}
