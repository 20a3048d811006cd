//! The OTLP/HTTP sink's name resolver. ureq resolves the endpoint before every request,
//! even one that goes over a pooled connection, and its default resolver, given a timeout
//! (every request here has one), makes a thread for each lookup: a thread made and ended
//! for every batch, on the host's CPU, for an address that never changes. The fleet bench
//! showed one per batch per host (`clone3`, its stack mapped and unmapped). An endpoint given
//! as an IP address is used as it is; a name is looked up by ureq's default resolver, as
//! before (so a collector behind a name that moves is found again).
use std::net::{IpAddr, SocketAddr};

use ureq::{
    config::Config,
    http::Uri,
    unversioned::{
        resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver},
        transport::NextTimeout,
    },
};

/// IP addresses as they are, names by [`DefaultResolver`].
#[derive(Debug, Default)]
pub(in crate::daemon::export) struct AddressFirst(DefaultResolver);

impl Resolver for AddressFirst {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        match address(uri) {
            Some(at) => {
                let mut one = self.empty();
                one.push(at);
                Ok(one)
            }
            None => self.0.resolve(uri, config, timeout),
        }
    }
}

/// The socket address of `uri` when its host is an IP address (an IPv6 one in brackets),
/// with the scheme's port when it names none.
fn address(uri: &Uri) -> Option<SocketAddr> {
    let host = uri.host()?;
    let ip: IpAddr = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .parse()
        .ok()?;
    let port = uri.port_u16().or(match uri.scheme_str() {
        Some("http") => Some(80),
        Some("https") => Some(443),
        _ => None,
    })?;
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(url: &str, timeout: NextTimeout) -> Result<Vec<SocketAddr>, ureq::Error> {
        let uri: Uri = url.parse().unwrap();
        AddressFirst::default()
            .resolve(&uri, &Config::default(), timeout)
            .map(|a| a.iter().copied().collect())
    }

    #[test]
    fn addresses_are_taken_as_they_are_with_the_schemes_port() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        let none = NextTimeout::default();
        for (url, want) in [
            ("http://127.0.0.1:4318/v1/logs", at("127.0.0.1:4318")),
            ("http://10.0.0.7/v1/logs", at("10.0.0.7:80")),
            ("https://10.0.0.7/v1/logs", at("10.0.0.7:443")),
            ("http://[::1]:4318/v1/logs", at("[::1]:4318")),
            ("https://[fd00::2]/v1/logs", at("[fd00::2]:443")),
        ] {
            assert_eq!(resolved(url, none).unwrap(), vec![want], "{url}");
        }
    }

    #[test]
    fn an_address_needs_no_lookup_and_so_no_time() {
        // With no time left, ureq's own resolver gives up (its lookup thread has not answered
        // when it looks), on an address as on a name; an address needs no lookup.
        let spent = NextTimeout {
            after: std::time::Duration::ZERO.into(),
            ..NextTimeout::default()
        };
        assert_eq!(
            resolved("http://127.0.0.1:4318/v1/logs", spent).unwrap(),
            vec!["127.0.0.1:4318".parse::<SocketAddr>().unwrap()]
        );
    }

    #[test]
    fn names_are_looked_up() {
        let got = resolved("http://localhost:4318/v1/logs", NextTimeout::default()).unwrap();
        assert!(
            got.iter().all(|a| a.ip().is_loopback() && a.port() == 4318),
            "{got:?}"
        );
        assert!(!got.is_empty());
    }
}
