//! The `host` entries of `network.egress`, for the kernel: `gatewayd run` resolves each plain
//! host name (a `*.domain` entry names no addresses) when the session starts and again when
//! its DNS answer's TTL runs out, and hands the addresses, each with the entry's port, to the
//! kernel task ([`kernel::task::Handle::set_resolved`]), which rewrites the session's
//! `EGRESS` entry: the policy's `cidr` rules first, then these, up to `MAX_EGRESS_RULES`.
//! Each change is an `egress_resolved` record (host, addresses, TTL).
//!
//! Bounded: at most [`MAX_ADDRS_PER_HOST`] addresses per host, and the kernel's rule limit
//! for all of them; a failed resolution keeps the host's last good addresses (none, when it
//! never succeeded) and is tried again after [`RETRY`]. The resolver is hickory's, with the
//! system's configuration (`/etc/resolv.conf`, `/etc/hosts`), or the one name server of
//! `$GATEWAYD_DNS_SERVER` (`ADDR:PORT`; what the tests use).
use std::{
    net::{IpAddr, SocketAddr},
    time::{Duration, Instant},
};

use gateway_common::EgressRule;
use hickory_resolver::{
    TokioResolver,
    config::{ConnectionConfig, NameServerConfig, ResolverConfig},
    net::runtime::TokioRuntimeProvider,
};
use serde_json::json;
use tokio::task::JoinHandle;

use super::records::append;
use gatewayd_core::{
    audit::{Decision, Entry, writer::WriterHandle},
    net::Cidr,
    policy::Policy,
};
use gatewayd_kernel::kernel::{self, spec::egress_rule};

/// Overrides the name server (`ADDR:PORT`), for tests.
pub(crate) const ENV_DNS_SERVER: &str = "GATEWAYD_DNS_SERVER";
/// Addresses kept per host name (the first ones, in address order).
pub(crate) const MAX_ADDRS_PER_HOST: usize = 8;
/// Shortest wait between two resolutions of a host (a TTL of 0 included).
const MIN_REFRESH: Duration = Duration::from_secs(1);
/// Longest wait between two resolutions of a host, whatever its TTL.
const MAX_REFRESH: Duration = Duration::from_hours(1);
/// Wait after a failed resolution.
pub(crate) const RETRY: Duration = Duration::from_secs(30);
/// How long one resolution may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// One `host` entry to resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostEntry {
    /// The name, as the policy writes it.
    pub host: String,
    /// The entry's port (`None`: any).
    pub port: Option<u16>,
}

/// The policy's egress entries the kernel can only get by resolving: a `host` without a
/// `cidr`, not a `*.domain` pattern.
pub(crate) fn host_entries(policy: &Policy) -> Vec<HostEntry> {
    policy
        .network
        .egress
        .iter()
        .filter(|e| e.cidr.is_none())
        .filter_map(|e| {
            let host = e.host.as_ref()?;
            (!host.starts_with("*.")).then(|| HostEntry {
                host: host.clone(),
                port: e.port,
            })
        })
        .collect()
}

/// The resolver: the system's configuration, or the one name server `server` (`ADDR:PORT`,
/// from `$GATEWAYD_DNS_SERVER`).
fn resolver(server: Option<&str>) -> Result<TokioResolver, String> {
    let built = if let Some(server) = server {
        let addr: SocketAddr = server
            .parse()
            .map_err(|_| format!("{ENV_DNS_SERVER}={server} is not ADDR:PORT"))?;
        let mut udp = ConnectionConfig::udp();
        udp.port = addr.port();
        let ns = NameServerConfig::new(addr.ip(), true, vec![udp]);
        let config = ResolverConfig::from_name_servers(vec![ns]);
        TokioResolver::builder_with_config(config, TokioRuntimeProvider::default()).build()
    } else {
        TokioResolver::builder_tokio().and_then(hickory_resolver::ResolverBuilder::build)
    };
    built.map_err(|e| format!("the resolver's configuration: {e}"))
}

/// One answer: its addresses (sorted, at most [`MAX_ADDRS_PER_HOST`]) and its TTL.
async fn resolve(r: &TokioResolver, host: &str) -> Result<(Vec<IpAddr>, Duration), String> {
    let lookup = tokio::time::timeout(LOOKUP_TIMEOUT, r.lookup_ip(host))
        .await
        .map_err(|_| format!("no answer within {}s", LOOKUP_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())?;
    let ttl = lookup
        .valid_until()
        .saturating_duration_since(Instant::now());
    let mut addrs: Vec<IpAddr> = lookup.iter().collect();
    addrs.sort();
    addrs.dedup();
    addrs.truncate(MAX_ADDRS_PER_HOST);
    Ok((addrs, ttl))
}

/// The kernel rules of every host's current addresses, in policy order.
pub(crate) fn rules(entries: &[HostEntry], addrs: &[Vec<IpAddr>]) -> Vec<EgressRule> {
    entries
        .iter()
        .zip(addrs)
        .flat_map(|(e, a)| {
            a.iter().map(move |ip| {
                let cidr = Cidr {
                    addr: *ip,
                    prefix: if ip.is_ipv4() { 32 } else { 128 },
                };
                egress_rule(&cidr, e.port)
            })
        })
        .collect()
}

/// Where the task reports.
pub(super) struct Reporting {
    pub(super) audit: WriterHandle,
    pub(super) session: String,
}

/// Resolves every entry now (waiting for the first round, each lookup bounded by
/// `LOOKUP_TIMEOUT`), puts the addresses in the kernel, and leaves a task that keeps them
/// current until it is aborted. No entries: no task.
pub(super) async fn start(
    entries: Vec<HostEntry>,
    kernel: kernel::task::Handle,
    report: Reporting,
) -> Option<JoinHandle<()>> {
    if entries.is_empty() {
        return None;
    }
    let (ready, first_round) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(keep_current(entries, kernel, report, ready));
    let _ = first_round.await;
    Some(task)
}

async fn keep_current(
    entries: Vec<HostEntry>,
    kernel: kernel::task::Handle,
    report: Reporting,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let server = std::env::var(ENV_DNS_SERVER).ok();
    let resolver = resolver(server.as_deref());
    let mut addrs: Vec<Vec<IpAddr>> = vec![Vec::new(); entries.len()];
    let mut errors: Vec<Option<String>> = vec![None; entries.len()];
    loop {
        let mut next = MAX_REFRESH;
        // (entry index, TTL or error) of each change this round.
        let mut changed: Vec<(usize, Result<Duration, String>)> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let answer = match &resolver {
                Ok(r) => resolve(r, &e.host).await,
                Err(why) => Err(why.clone()),
            };
            match answer {
                Ok((found, ttl)) => {
                    next = next.min(ttl.clamp(MIN_REFRESH, MAX_REFRESH));
                    errors[i] = None;
                    if found != addrs[i] {
                        addrs[i] = found;
                        changed.push((i, Ok(ttl)));
                    }
                }
                Err(why) => {
                    next = next.min(RETRY);
                    if errors[i].as_ref() != Some(&why) {
                        errors[i] = Some(why.clone());
                        changed.push((i, Err(why)));
                    }
                }
            }
        }
        if !changed.is_empty() {
            let all = rules(&entries, &addrs);
            let kernel_result = kernel.set_resolved(all).await;
            for (i, how) in changed {
                let e = &entries[i];
                let mut detail = json!({
                    "host": e.host, "port": e.port,
                    "addresses": addrs[i].iter().map(ToString::to_string).collect::<Vec<_>>(),
                });
                match how {
                    Ok(ttl) => detail["ttl_s"] = json!(ttl.as_secs()),
                    Err(why) => {
                        detail["error"] = json!(why);
                        detail["message"] = json!(
                            "the host did not resolve: the kernel keeps its last good addresses (none before the first)"
                        );
                    }
                }
                match &kernel_result {
                    Ok(dropped) => {
                        if *dropped > 0 {
                            detail["rules_dropped"] = json!(dropped);
                        }
                    }
                    Err(err) => detail["kernel_error"] = json!(kernel::chain(err)),
                }
                let entry =
                    Entry::gateway(&report.session, Decision::Info, "egress_resolved", detail);
                if let Err(err) = append(&report.audit, entry).await {
                    eprintln!("gatewayd: audit write failed for egress_resolved: {err}");
                }
            }
        }
        if let Some(r) = ready.take() {
            let _ = r.send(());
        }
        tokio::time::sleep(next).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_host_entries_are_resolved_and_rules_carry_their_port() {
        let p = Policy::parse(
            r#"{"version": 1, "network": {"egress": [
                {"host": "api.example", "port": 443}, {"host": "*.wild.example"},
                {"cidr": "10.0.0.0/8"}, {"host": "both.example", "cidr": "10.1.0.0/16"}]}}"#,
            std::path::Path::new("t"),
        )
        .unwrap();
        let entries = host_entries(&p);
        assert_eq!(
            entries,
            [HostEntry {
                host: "api.example".into(),
                port: Some(443)
            }]
        );
        let addrs = vec![vec![
            "127.0.0.1".parse().unwrap(),
            "::1".parse::<IpAddr>().unwrap(),
        ]];
        let r = rules(&entries, &addrs);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].family, r[0].port), (gateway_common::AF_INET, 443));
        assert_eq!(r[0].addr[..4], [127, 0, 0, 1]);
        assert_eq!(r[0].mask[..4], [255; 4]);
        assert_eq!(r[1].family, gateway_common::AF_INET6);
    }

    #[test]
    fn a_bad_dns_server_override_is_an_error_not_a_panic() {
        let e = resolver(Some("not-an-address")).unwrap_err();
        assert!(e.contains(ENV_DNS_SERVER), "{e}");
    }
}
