//! Kernel denials, aggregated so a flood cannot fill the audit log: per kind (the program's
//! hook, the reason and the object denied), the first denial of each window is recorded in
//! full, the others of that window are counted, and one `denials_aggregated` record gives the
//! count when the window ends. Nothing is lost from the counts: every denial is either a
//! record of its own or counted in exactly one `denials_aggregated` record. At most
//! [`MAX_KINDS`] kinds have windows open at once; a denial of a kind beyond them is counted
//! under the kind `(hook, reason, *)`.
use std::collections::HashMap;

use serde_json::{Value, json};

use super::{Decision, Entry};

/// How long a window is, in ms.
pub const WINDOW_MS: u64 = 1000;
/// Kinds with a window open at once, at most.
pub const MAX_KINDS: usize = 1024;

/// What a denial is of: its program, its reason, the object it names; and whether it was a
/// refusal or a learn mode's `would_deny` (counted apart, each summary says which).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Kind {
    decision: Decision,
    session: String,
    hook: String,
    reason: String,
    object: String,
}

#[derive(Debug)]
struct Window {
    started_ms: u64,
    counted: u64,
    /// What the first denial's detail says of the session (`session_cgroup_id`, `cgroup_id`),
    /// repeated in the window's summary.
    ids: serde_json::Map<String, Value>,
}

impl Window {
    fn new(first: &Entry, now_ms: u64) -> Window {
        let ids = ["session_cgroup_id", "cgroup_id"]
            .iter()
            .filter_map(|k| Some(((*k).to_owned(), first.detail.get(*k)?.clone())))
            .collect();
        Window {
            started_ms: now_ms,
            counted: 0,
            ids,
        }
    }
}

/// The aggregation state of one stream of kernel records.
#[derive(Debug, Default)]
pub struct Aggregator {
    open: HashMap<Kind, Window>,
}

impl Aggregator {
    /// A new aggregator with no window open.
    pub fn new() -> Aggregator {
        Aggregator::default()
    }

    /// Offers a kernel denial at `now_ms`. Returns what to record now: the denial itself when
    /// it is the first of its kind in its window (after the summary of that kind's previous
    /// window, when it had one), nothing when it is counted.
    pub fn offer(&mut self, entry: Entry, now_ms: u64) -> Vec<Entry> {
        let mut kind = kind_of(&entry);
        if !self.open.contains_key(&kind) && self.open.len() >= MAX_KINDS {
            kind.object = "*".into();
        }
        match self.open.get_mut(&kind) {
            Some(w) if now_ms.saturating_sub(w.started_ms) < WINDOW_MS => {
                w.counted += 1;
                Vec::new()
            }
            Some(w) => {
                let ended = std::mem::replace(w, Window::new(&entry, now_ms));
                let mut out: Vec<Entry> = summary(&kind, &ended).into_iter().collect();
                out.push(entry);
                out
            }
            None => {
                self.open.insert(kind, Window::new(&entry, now_ms));
                vec![entry]
            }
        }
    }

    /// The summaries of the windows that have ended by `now_ms` (those that counted any);
    /// their kinds are closed.
    pub fn due(&mut self, now_ms: u64) -> Vec<Entry> {
        let ended: Vec<Kind> = self
            .open
            .iter()
            .filter(|(_, w)| now_ms.saturating_sub(w.started_ms) >= WINDOW_MS)
            .map(|(k, _)| k.clone())
            .collect();
        self.close(ended)
    }

    /// The summaries of every open window (at the end of the stream).
    pub fn flush(&mut self) -> Vec<Entry> {
        let all: Vec<Kind> = self.open.keys().cloned().collect();
        self.close(all)
    }

    fn close(&mut self, kinds: Vec<Kind>) -> Vec<Entry> {
        let mut out: Vec<(u64, Entry)> = kinds
            .into_iter()
            .filter_map(|k| {
                let w = self.open.remove(&k)?;
                Some((w.started_ms, summary(&k, &w)?))
            })
            .collect();
        out.sort_by_key(|(started, _)| *started);
        out.into_iter().map(|(_, e)| e).collect()
    }
}

/// An [`Aggregator`] on the monotonic clock, with the tick that closes its windows: the one
/// loop shape of `gatewayd run`'s and `gatewayd mcp`'s kernel-record forwarders (offer each
/// record, record what [`Timed::window_end`] returns, [`Timed::flush`] at the end). Made
/// inside a tokio runtime.
#[derive(Debug)]
pub struct Timed {
    aggregator: Aggregator,
    started: std::time::Instant,
    tick: tokio::time::Interval,
}

impl Timed {
    /// No window open; the first tick is a window from now.
    pub fn new() -> Timed {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(WINDOW_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Timed {
            aggregator: Aggregator::new(),
            started: std::time::Instant::now(),
            tick,
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// [`Aggregator::offer`], now.
    pub fn offer(&mut self, entry: Entry) -> Vec<Entry> {
        let now = self.now_ms();
        self.aggregator.offer(entry, now)
    }

    /// Waits for the next tick; then the summaries of the windows that have ended.
    pub async fn window_end(&mut self) -> Vec<Entry> {
        self.tick.tick().await;
        let now = self.now_ms();
        self.aggregator.due(now)
    }

    /// [`Aggregator::flush`].
    pub fn flush(&mut self) -> Vec<Entry> {
        self.aggregator.flush()
    }
}

impl Default for Timed {
    fn default() -> Timed {
        Timed::new()
    }
}

/// The `denials_aggregated` record of a window that counted any.
fn summary(kind: &Kind, w: &Window) -> Option<Entry> {
    if w.counted == 0 {
        return None;
    }
    let mut detail = json!({
        "reason": kind.reason,
        "object": kind.object,
        "count": w.counted,
        "window_ms": WINDOW_MS,
        "message": format!(
            "{} more denials of this kind within {} ms of the first, which has a record of its own; counted, not recorded one by one",
            w.counted, WINDOW_MS
        ),
    });
    if let Some(d) = detail.as_object_mut() {
        d.extend(w.ids.clone());
    }
    let mut e = Entry::kernel(&kind.session, &kind.hook, "denials_aggregated", detail);
    e.decision = kind.decision;
    Some(e)
}

/// The kind of a kernel record: its hook, its reason and the object its detail names.
fn kind_of(e: &Entry) -> Kind {
    Kind {
        decision: e.decision,
        session: e.session.clone(),
        hook: e.hook.clone().unwrap_or_default(),
        reason: e.reason.clone(),
        object: object_of(&e.detail),
    }
}

/// The object a kernel record's detail names: a path (with the inode, so the files under a
/// protected directory are kinds apart, or the refused call, so a write and a removal are),
/// an address and port, a socket name, a signalled
/// pid, or an inode.
pub(crate) fn object_of(detail: &Value) -> String {
    let s = |k: &str| match detail.get(k) {
        Some(Value::String(v)) => Some(v.clone()),
        Some(Value::Null) | None => None,
        Some(v) => Some(v.to_string()),
    };
    let inode = match (s("dev"), s("ino")) {
        (Some(d), Some(i)) => Some(format!("{d}:{i}")),
        _ => None,
    };
    if let Some(p) = s("protected_path").or_else(|| s("path")) {
        return match (inode, s("syscall")) {
            (Some(i), _) => format!("{p} (inode {i})"),
            (None, Some(call)) => format!("{p} ({call})"),
            (None, None) => p,
        };
    }
    if let Some(a) = s("addr").or_else(|| s("from")) {
        return format!("{a}:{}", s("port").unwrap_or_default());
    }
    if let Some(n) = s("name") {
        return n;
    }
    if let Some(t) = s("target_pid") {
        return format!("pid {t}");
    }
    inode.or_else(|| s("blockers")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(port: u16) -> Entry {
        Entry::kernel(
            "s",
            "cgroup/connect4",
            "egress_not_allowed",
            json!({"addr": "10.0.0.1", "port": port, "pid": 7}),
        )
    }

    fn count(out: &[Entry]) -> u64 {
        out.iter()
            .map(|e| {
                if e.reason == "denials_aggregated" {
                    e.detail["count"].as_u64().unwrap()
                } else {
                    1
                }
            })
            .sum()
    }

    #[test]
    fn a_flood_is_one_record_and_a_count_per_window_and_nothing_is_lost() {
        let mut a = Aggregator::new();
        let mut out = Vec::new();
        // 10,000 denials over 10 s.
        for t in 1_000_000..1_010_000 {
            out.extend(a.due(t));
            out.extend(a.offer(connect(443), t));
        }
        out.extend(a.flush());
        assert_eq!(count(&out), 10_000, "every denial counted once");
        assert!(
            out.len() <= 22,
            "{} records for 10 s of one kind",
            out.len()
        );
        assert_eq!(out[0].reason, "egress_not_allowed", "the first is in full");
        assert_eq!(out[1].reason, "denials_aggregated");
        assert_eq!(out[1].detail["object"], "10.0.0.1:443");
    }

    #[test]
    fn kinds_are_apart_and_beyond_the_cap_they_are_counted_together() {
        let mut a = Aggregator::new();
        let mut out = Vec::new();
        for port in 0..(MAX_KINDS as u16 + 100) {
            out.extend(a.offer(connect(port), 5));
            out.extend(a.offer(connect(port), 6));
        }
        out.extend(a.flush());
        let full = out
            .iter()
            .filter(|e| e.reason == "egress_not_allowed")
            .count();
        assert_eq!(
            full,
            MAX_KINDS + 1,
            "one in full per kind, one for the rest"
        );
        assert_eq!(count(&out), 2 * (MAX_KINDS as u64 + 100));
        assert!(
            out.iter()
                .any(|e| e.reason == "denials_aggregated" && e.detail["object"] == "*")
        );
    }

    #[test]
    fn learned_denials_are_counted_apart_and_their_summary_says_would_deny() {
        let mut a = Aggregator::new();
        let learned = |port| {
            let mut e = connect(port);
            e.decision = Decision::WouldDeny;
            e
        };
        assert_eq!(a.offer(connect(80), 0).len(), 1);
        assert_eq!(a.offer(learned(80), 1).len(), 1, "a kind of its own");
        assert!(a.offer(learned(80), 2).is_empty());
        assert!(a.offer(connect(80), 3).is_empty());
        let out = a.flush();
        let mut decisions: Vec<&str> = out.iter().map(|e| e.decision.as_str()).collect();
        decisions.sort_unstable();
        assert_eq!(decisions, ["deny", "would_deny"]);
        assert!(out.iter().all(|e| e.reason == "denials_aggregated"));
    }

    #[test]
    fn a_quiet_kind_has_no_summary() {
        let mut a = Aggregator::new();
        assert_eq!(a.offer(connect(1), 0).len(), 1);
        assert!(a.due(5_000).is_empty());
        assert_eq!(a.offer(connect(1), 6_000).len(), 1, "a new window, in full");
        assert!(a.flush().is_empty());
    }

    #[test]
    fn a_refused_write_and_removal_of_one_path_are_kinds_apart() {
        let call = |syscall: &str| {
            Entry::kernel(
                "s",
                "raw_tp/sys_exit",
                "read_only_path",
                json!({"path": ".git/config", "syscall": syscall}),
            )
        };
        let mut a = Aggregator::new();
        assert_eq!(a.offer(call("openat"), 0).len(), 1);
        assert_eq!(
            a.offer(call("unlinkat"), 1).len(),
            1,
            "a removal is its own kind"
        );
        assert!(
            a.offer(call("openat"), 2).is_empty(),
            "a second write is counted"
        );
        assert_eq!(a.flush()[0].detail["object"], ".git/config (openat)");
    }
}
