//! The session holds every scope the tool needs (`missing_scope`).
use super::{Ctx, Step};
use crate::engine::Reason;

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let tool = cx.tool()?;
    let s = cx.session;
    let missing: Vec<&str> = tool
        .def
        .scopes
        .iter()
        .filter(|x| !s.scopes.contains(*x))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        let message = format!(
            "tool `{}` needs scope(s) {}, which user `{}` does not hold in this session",
            tool.def.name,
            missing.join(", "),
            s.user
        );
        return Err(cx.deny(Reason::MissingScope, message));
    }
    Ok(())
}
