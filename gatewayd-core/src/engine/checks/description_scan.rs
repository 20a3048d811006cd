//! In strict mode, a tool whose description or schema looks poisoned is blocked
//! (`description_scan`); the suspicious text is not repeated to the model.
use super::{Ctx, Step};
use crate::{engine::Reason, policy::ScanMode};

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let tool = cx.tool()?;
    if cx.engine.policy.description_scan != ScanMode::Strict {
        return Ok(());
    }
    if let Some(f) = tool.findings.first() {
        let message = format!(
            "tool `{}` is blocked: its definition contains what looks like hidden instructions ({} in {}); the text is not repeated here",
            tool.def.name, f.kind, f.place
        );
        return Err(cx.deny(Reason::DescriptionScan, message));
    }
    Ok(())
}
