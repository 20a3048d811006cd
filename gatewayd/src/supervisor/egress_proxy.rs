//! `gatewayd run`'s egress proxy, for a policy that decides egress by name
//! ([`Network::by_name`]): the kernel's connect programs send the agent's TCP connects that
//! no `cidr` rule allows to [`tcp`]'s listener on loopback, and all of its port-53 traffic to
//! the session's resolver ([`dns`]). The proxy finds where each connection meant to go in the
//! kernel's `ORIGINAL` map ([`ProxyMaps::original`]), reads the name it is for from its first
//! bytes ([`peek`]: TLS server name, HTTP host), decides it against the egress list, checks
//! that the original address is one the name resolves to, and splices the bytes on without
//! reading them further. Every refusal is an `egress_not_allowed` record (`egress_lockdown`
//! once the session is locked down, which also closes the connections already spliced).
//!
//! Bounded: at most [`MAX_CONNECTIONS`] connections at once (more wait in the kernel's
//! backlog), [`peek::MAX_HEAD`] bytes read before a name is known, [`FIRST_BYTES`] to send
//! them, and the resolver's answers kept per name ([`Answers`]).
use std::{
    collections::{HashMap, VecDeque},
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::watch,
    task::{JoinHandle, JoinSet},
};

use super::{
    canary::{CanaryAlarm, Route},
    records::append,
};
use gatewayd_core::{
    audit::{Decision, Entry, writer::WriterHandle},
    engine::sandbox::Dest,
    engine::sandbox::EgressView,
    policy::{EgressEntry, Network},
};
use gatewayd_kernel::kernel::{self, egress_proxy::ProxyMaps};

pub(crate) mod ca;
mod dns;
mod inspection;
mod l7;
mod l7_body;
mod l7_upstream;
mod peek;
mod splice;
mod tcp;
pub(super) use inspection::Inspection;

/// Connections handled at once.
const MAX_CONNECTIONS: usize = 512;
/// How long a connection may take to send the bytes that name its destination.
const FIRST_BYTES: Duration = Duration::from_secs(10);
/// How long a connect to the destination, or one DNS answer, may take.
const UPSTREAM: Duration = Duration::from_secs(10);
/// Names whose answers the resolver keeps (the oldest go first), and addresses per name.
const MAX_NAMES: usize = 1024;
const MAX_ADDRS: usize = 32;

/// What the proxy's tasks share.
pub(super) struct Shared {
    pub(super) egress: EgressView,
    pub(super) maps: ProxyMaps,
    pub(super) audit: WriterHandle,
    pub(super) session: String,
    pub(super) lockdown: watch::Receiver<bool>,
    /// The addresses the session's resolver answered for each name.
    pub(super) answers: Answers,
    /// Where the resolver forwards, and what the proxy asks to check an address.
    pub(super) upstream: SocketAddr,
    /// `gatewayd run --learn`: a name or a nameless connection the policy would refuse is
    /// let through and recorded ([`Shared::learned`]); the resolver answers every name.
    pub(super) learn: bool,
    /// Inspected hosts: the session's CA, secrets and placeholders ([`l7`]).
    pub(super) inspection: Option<Arc<Inspection>>,
    /// `network.egress`, for the inspected entries' rules.
    pub(super) entries: Vec<EgressEntry>,
    /// Canary credentials: the decoys looked for in what the proxy and resolver read.
    pub(super) canary: Option<Arc<CanaryAlarm>>,
}

/// What the proxy reads for besides names: inspected hosts' requests, canary credentials.
pub(in crate::supervisor) struct Watch {
    pub(in crate::supervisor) inspection: Option<Arc<Inspection>>,
    pub(in crate::supervisor) canary: Option<Arc<CanaryAlarm>>,
}

/// Addresses by name, and the names in the order they came (the oldest go first).
type ByName = (HashMap<String, Vec<IpAddr>>, VecDeque<String>);

/// The A and AAAA answers the session's resolver passed on, by name.
#[derive(Default)]
pub(super) struct Answers {
    inner: Mutex<ByName>,
}

impl Answers {
    pub(super) fn add(&self, name: &str, addrs: &[IpAddr]) {
        let mut guard = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (map, order) = &mut *guard;
        if !map.contains_key(name) {
            if order.len() >= MAX_NAMES
                && let Some(old) = order.pop_front()
            {
                map.remove(&old);
            }
            order.push_back(name.to_owned());
        }
        let kept = map.entry(name.to_owned()).or_default();
        for a in addrs {
            if !kept.contains(a) {
                if kept.len() >= MAX_ADDRS {
                    kept.remove(0);
                }
                kept.push(*a);
            }
        }
    }

    pub(super) fn has(&self, name: &str, addr: IpAddr) -> bool {
        let guard = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.0.get(name).is_some_and(|a| a.contains(&addr))
    }
}

impl Shared {
    /// Records a refusal: `egress_lockdown` once the session is locked down, else
    /// `egress_not_allowed`, with `detail` and a message that ends with a next step.
    pub(super) async fn refuse(&self, detail: Value, why: &str) {
        let locked = *self.lockdown.borrow();
        let (reason, message) = if locked {
            (
                "egress_lockdown",
                "all egress is closed: this session tripped the Rule of Two. Next: end the session; a new one starts with egress open.".to_owned(),
            )
        } else {
            (
                "egress_not_allowed",
                format!(
                    "{why}. Next: if the agent needs this destination, add {{\"host\": NAME, \"port\": PORT}} to network.egress and start a new session."
                ),
            )
        };
        self.record(Decision::Deny, reason, detail, message).await;
    }

    /// A learning session's connection the policy would refuse (`why`): let through, and
    /// recorded `would_deny` (`egress_not_allowed`) with `detail` (its `host`, else its
    /// address), from which `policy suggest` proposes the entry.
    pub(super) async fn learned(&self, detail: Value, why: &str) {
        let message = format!(
            "learn mode let this through (recorded, not refused); without --learn: {why}. Next: `gatewayd policy suggest AUDIT --policy P` proposes the entry"
        );
        self.record(Decision::WouldDeny, "egress_not_allowed", detail, message)
            .await;
    }

    /// A refusal of the proxy's with its own `reason` (`egress_lockdown` once the session is
    /// locked down) and `message`, which ends with a next step.
    pub(super) async fn deny(&self, reason: &str, detail: Value, message: String) {
        if *self.lockdown.borrow() {
            self.refuse(detail, "all egress is closed").await;
        } else {
            self.record(Decision::Deny, reason, detail, message).await;
        }
    }

    /// A canary credential in `texts` (read on `route`): the session is locked down and
    /// `canary` recorded; returns the message for the agent. `None`: none there.
    pub(super) async fn canary_in(
        &self,
        texts: &[&str],
        route: Route,
        detail: &Value,
    ) -> Option<String> {
        let alarm = self.canary.as_ref()?;
        let m = alarm.find(texts)?;
        let mut detail = detail.clone();
        if let Some(h) = detail.get("host").and_then(Value::as_str) {
            detail["host"] = json!(alarm.scrub(h));
        }
        detail["via"] = json!(if route == Route::Dns {
            "egress_resolver"
        } else {
            "egress_proxy"
        });
        Some(alarm.trip(&m, route, None, detail).await)
    }

    /// The first inspected entry that allows `dest`, when the session inspects.
    pub(super) fn inspected_for(&self, dest: &Dest) -> Option<usize> {
        self.inspection.as_ref()?;
        self.egress
            .allowing(dest)
            .find(|i| self.entries.get(*i).is_some_and(EgressEntry::inspected))
    }

    /// The inspected entry at `i`.
    pub(super) fn inspected_entry(&self, i: usize) -> Option<&EgressEntry> {
        self.entries.get(i).filter(|e| e.inspected())
    }

    /// One record of the proxy's (`via: "egress_proxy"`), with `message` in its detail.
    async fn record(&self, decision: Decision, reason: &str, mut detail: Value, message: String) {
        detail["via"] = json!("egress_proxy");
        detail["message"] = json!(message);
        let entry = Entry::gateway(&self.session, decision, reason, detail);
        if let Err(e) = append(&self.audit, entry).await {
            eprintln!("gatewayd: the egress proxy's {reason} record is not written: {e}");
        }
    }
}

/// The upstream resolver: `$GATEWAYD_DNS_SERVER`, else the first `nameserver` of
/// `/etc/resolv.conf`, else `127.0.0.53:53`.
fn upstream() -> SocketAddr {
    if let Some(a) = std::env::var(super::egress_hosts::ENV_DNS_SERVER)
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return a;
    }
    let conf = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    conf.lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .find_map(|a| a.trim().parse::<IpAddr>().ok())
        .map_or_else(
            || SocketAddr::from(([127, 0, 0, 53], 53)),
            |ip| SocketAddr::new(ip, 53),
        )
}

/// Binds a TCP listener on `127.0.0.1:port` (0: any) and on `[::1]` at the same port when
/// the host has IPv6 loopback.
async fn listen_loopback(port: u16) -> std::io::Result<Vec<TcpListener>> {
    let v4 = TcpListener::bind(("127.0.0.1", port)).await?;
    let port = v4.local_addr()?.port();
    let mut all = vec![v4];
    if let Ok(v6) = TcpListener::bind(("::1", port)).await {
        all.push(v6);
    }
    Ok(all)
}

/// Starts the proxy and the resolver (the caller has checked the kernel's socket diagnostics,
/// [`ProxyMaps::check_socket_diag`]), and tells the kernel their ports: from then on the
/// agent's egress by name goes through them. The returned task ends them when aborted.
pub(super) async fn start(
    network: &Network,
    maps: ProxyMaps,
    handle: &kernel::task::Handle,
    audit: WriterHandle,
    session: String,
    learn: bool,
    watch: Watch,
) -> Result<JoinHandle<()>, String> {
    let tcp_listeners = listen_loopback(0)
        .await
        .map_err(|e| format!("the egress proxy's listener: {e}"))?;
    let resolver = dns::Listeners::bind()
        .await
        .map_err(|e| format!("the session resolver's sockets: {e}"))?;
    let tcp_port = tcp_listeners[0]
        .local_addr()
        .map_err(|e| e.to_string())?
        .port();
    maps.set_ports(tcp_port, resolver.port)
        .map_err(|e| kernel::chain(&e))?;
    let shared = Arc::new(Shared {
        egress: EgressView::new(network),
        maps,
        audit,
        session,
        lockdown: handle.lockdown_watch(),
        answers: Answers::default(),
        upstream: upstream(),
        learn,
        inspection: watch.inspection,
        entries: network.egress.clone(),
        canary: watch.canary,
    });
    let detail = json!({"tcp_port": tcp_port, "dns_port": resolver.port,
        "upstream": shared.upstream.to_string(), "learn": learn,
        "inspects": shared.inspection.is_some()});
    append(
        &shared.audit,
        Entry::gateway(&shared.session, Decision::Info, "egress_proxy", detail),
    )
    .await
    .map_err(|e| format!("the egress_proxy record: {e}"))?;
    let mut set = JoinSet::new();
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    for l in tcp_listeners {
        set.spawn(tcp::serve(l, shared.clone(), permits.clone()));
    }
    resolver.spawn(&mut set, &shared);
    Ok(tokio::spawn(async move {
        // The set aborts every task when this one is aborted and drops it.
        while set.join_next().await.is_some() {}
    }))
}

/// Connects to `to`, bounded by [`UPSTREAM`]; Nagle's algorithm off, as on the agent's
/// side: the proxy passes on what it was given as soon as it has it, and a small write held
/// back for an ACK the other end delays would cost 40 ms a message.
pub(super) async fn connect(to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = tokio::time::timeout(UPSTREAM, TcpStream::connect(to))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    s.set_nodelay(true)?;
    Ok(s)
}
