//! `gatewayd run`, phase 4: after the agent's end, in this order: the egress resolver stops,
//! the kernel's last events are read, what is left in the cgroup is killed, the gateway stops
//! (its socket directory goes), the session's kernel entries are removed (the programs stay,
//! pinned, for the next session), the limits the cgroup met are read, the confinement ends
//! (the cgroup is removed), every kernel record is submitted, the files left behind are
//! reported, and the session's end is recorded.
use std::os::unix::process::ExitStatusExt as _;

use serde_json::json;

use super::{
    RunError, RunOutcome, agent_process::SpawnError, prepare::Ctx, records::append,
    report_left_behind, start::Live,
};
use gatewayd_core::audit::{Decision, Entry};
use gatewayd_kernel::{kernel, session_limits};

/// Phase 4; see the module. `status` is the agent's end as phase 3 saw it.
pub(super) async fn teardown(
    ctx: &Ctx<'_>,
    live: Live,
    status: Result<std::process::ExitStatus, SpawnError>,
) -> Result<RunOutcome, RunError> {
    let Live {
        prepared,
        handle,
        kernel_task,
        resolving,
        proxy,
        gateway,
        canary,
        forwarder,
        landlock_reader,
        name_guard,
        fs_learn,
        denials,
        left,
        ..
    } = live;
    for task in [resolving, proxy].into_iter().flatten() {
        task.abort();
        let _ = task.await;
    }
    let dropped = handle.drain().await;
    let confinement = prepared.confinement;
    let kill = confinement.kill_all();
    if let Some(gw) = gateway {
        gw.stop().await;
    }
    if let Some(c) = canary {
        c.release();
    }
    drop(handle);
    // Nothing runs in the cgroup any more: the session's entries go; the programs stay.
    let entries = match kernel_task.await {
        Ok(ks) => ks.remove().map_err(|e| kernel::chain(&e)),
        Err(e) => Err(format!("the kernel task failed: {e}")),
    };
    let hits = confinement
        .report
        .cgroup
        .as_deref()
        .map(session_limits::Hits::read);
    let tier = confinement.report.tier;
    let removed = confinement.finish();
    drop(prepared.session_tmp);
    if let Some(reader) = landlock_reader {
        reader.finish().await;
    }
    for thread in [name_guard, fs_learn].into_iter().flatten() {
        // Its thread holds a sender of kernel records; nothing opens any more.
        let _ = tokio::task::spawn_blocking(move || thread.finish()).await;
    }
    // The kernel task and the Landlock reader dropped their senders when they ended:
    // everything they sent is submitted.
    let _ = forwarder.await;
    let left_behind = report_left_behind(&ctx.audit, &ctx.session, &left).await?;

    let status = status.map_err(|e| e.into_run_error(&ctx.program));
    let kernel_denials = denials.load(std::sync::atomic::Ordering::Relaxed);
    record_dropped(ctx, dropped).await?;
    let cleanup = kill
        .and(removed)
        .err()
        .map(|e| e.to_string())
        .or(entries.err());
    let exit_code = record_session_end(ctx, &status, kernel_denials, cleanup, hits).await?;
    status?;
    Ok(RunOutcome {
        exit_code,
        tier,
        kernel_denials,
        left_behind,
    })
}

/// The `session_end` record: the agent's exit code (128 + the signal that ended it; 127 when
/// it never ran), its error, the kernel denials counted, what cleanup failed and the limits
/// the cgroup met. Returns the exit code.
async fn record_session_end(
    ctx: &Ctx<'_>,
    status: &Result<std::process::ExitStatus, RunError>,
    kernel_denials: u64,
    cleanup: Option<String>,
    hits: Option<session_limits::Hits>,
) -> Result<i32, RunError> {
    let exit_code = match status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 127,
    };
    let detail = json!({
        "exit_code": exit_code,
        "error": status.as_ref().err().map(std::string::ToString::to_string),
        "kernel_denials": kernel_denials,
        "cleanup": cleanup,
        "limits_met": hits.filter(|h| h.any()).map(session_limits::Hits::describe),
    });
    let entry = Entry::gateway(&ctx.session, Decision::Info, "session_end", detail);
    append(&ctx.audit, entry).await?;
    Ok(exit_code)
}

/// Records how many kernel denials the session's event buffer had no room for, if any.
async fn record_dropped(ctx: &Ctx<'_>, dropped: u64) -> Result<(), RunError> {
    if dropped == 0 {
        return Ok(());
    }
    let detail = json!({
        "count": dropped,
        "message": "the kernel denied these but this session's event buffer was full, so they have no record of their own",
    });
    let entry = Entry::gateway(&ctx.session, Decision::Info, "events_dropped", detail);
    append(&ctx.audit, entry).await?;
    Ok(())
}
