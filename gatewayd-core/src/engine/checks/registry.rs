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
        // The one text of the model's in this message, scrubbed here as deeply as a message
        // that quotes arguments (the tool list is the policy's own).
        let name: String = cx.call.tool.chars().take(100).collect();
        let name = super::secret_egress::scrub_text(cx.engine, cx.session, &name, true);
        let list = &cx.engine.tool_list;
        // Room for the next step too, which the refusal adds (one allocation, not three).
        let mut message = String::with_capacity(name.len() + list.len() + 200);
        message.push_str("tool `");
        message.push_str(&name);
        message.push_str("` is not in the registry; registered tools: ");
        message.push_str(list);
        Err(cx.deny(Reason::NotAllowlisted, message))
    }
}
