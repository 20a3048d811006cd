//! The application named the session and its user (`check_error` if not).
use super::{Ctx, Step};
use crate::engine::Reason;

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    if cx.session.id.is_empty() || cx.session.user.is_empty() {
        return Err(cx.deny(
            Reason::CheckError,
            "no session: the application must name the session and its user",
        ));
    }
    Ok(())
}
