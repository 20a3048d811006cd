//! The session's CA for inspected hosts: made in memory when the session starts (rcgen, an
//! ECDSA P-256 key that never leaves the proxy's memory), and a certificate per host it
//! signs on first use (kept for the session). The agent trusts it through a bundle file:
//! the system's roots and the session's CA certificate, so hosts that are not inspected
//! keep working with the same variables set. Toward the server, the proxy checks the
//! certificate against the system's roots (read as reqwest reads them) and
//! `network.upstream_ca`.
use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Mutex},
};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::{
    ClientConfig, RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, pem::PemObject as _},
};

/// Host certificates kept at most (the oldest is dropped past it: it is made again).
const MAX_HOSTS: usize = 256;

/// The session's CA and the server configurations it made, by host.
pub(crate) struct SessionCa {
    cert: rcgen::Certificate,
    key: KeyPair,
    by_host: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl SessionCa {
    /// A new CA, named after the session.
    pub(crate) fn new(session: &str) -> Result<SessionCa, String> {
        let key = KeyPair::generate().map_err(|e| format!("the session CA's key: {e}"))?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, format!("gatewayd session {session} CA"));
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params
            .self_signed(&key)
            .map_err(|e| format!("the session CA's certificate: {e}"))?;
        Ok(SessionCa {
            cert,
            key,
            by_host: Mutex::default(),
        })
    }

    /// The CA certificate, PEM.
    pub(crate) fn pem(&self) -> String {
        self.cert.pem()
    }

    /// The TLS server configuration that shows the agent a certificate for `host` (HTTP/1.1
    /// only, which the proxy reads).
    pub(crate) fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, String> {
        let mut cache = self
            .by_host
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = cache.get(host) {
            return Ok(c.clone());
        }
        let config = Arc::new(self.make_server_config(host)?);
        if cache.len() >= MAX_HOSTS {
            cache.clear();
        }
        cache.insert(host.to_owned(), config.clone());
        Ok(config)
    }

    fn make_server_config(&self, host: &str) -> Result<ServerConfig, String> {
        let mut params = CertificateParams::new(vec![host.to_owned()])
            .map_err(|e| format!("a certificate for {host}: {e}"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, host.to_owned());
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(|e| format!("a certificate for {host}: {e}"))?;
        let chain = vec![cert.der().clone(), self.cert.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| e.to_string())?;
        // HTTP/2 first, as servers do: clients that speak it (gRPC, curl, Go) get it.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The system's roots, as reqwest's `rustls-tls-native-roots` reads them (a certificate
/// that does not parse is left out).
fn system_roots() -> Vec<CertificateDer<'static>> {
    rustls_native_certs::load_native_certs().certs
}

/// The CA certificates of a PEM file.
fn pem_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .collect();
    certs.map_err(|e| format!("{}: {e}", path.display()))
}

/// The TLS client configuration toward the servers of inspected hosts: the system's roots
/// and those of `extra` (`network.upstream_ca`), HTTP/2 or HTTP/1.1 as the server takes.
pub(crate) fn client_config(extra: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    let mut config = tls_client(
        extra,
        "network.upstream_ca",
        "the servers of inspected hosts",
    )?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The system's roots and those of the PEM file `extra` (`option` names its setting in
/// errors).
pub(crate) fn roots(
    extra: Option<&Path>,
    option: &str,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let mut certs = system_roots();
    if let Some(p) = extra {
        certs.extend(pem_file(p).map_err(|e| format!("{option}: {e}"))?);
    }
    Ok(certs)
}

/// The system's roots and those of the PEM file `extra`, as a store; an error when there is
/// none at all (`option` names the file's setting and `whom` the servers, in errors).
pub(crate) fn root_store(
    extra: Option<&Path>,
    option: &str,
    whom: &str,
) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(roots(extra, option)?);
    if added == 0 {
        return Err(format!(
            "no CA certificate to check {whom} with (the system has none, and {option} is not set)"
        ));
    }
    Ok(store)
}

/// A TLS client (rustls on ring) that checks servers against the system's roots and those
/// of the PEM file `extra`; `option` names that file's setting and `whom` the servers, in
/// errors.
pub(crate) fn tls_client(
    extra: Option<&Path>,
    option: &str,
    whom: &str,
) -> Result<ClientConfig, String> {
    let roots = root_store(extra, option, whom)?;
    Ok(ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The agent's bundle: the system's roots, then the session's CA, PEM.
pub(crate) fn bundle(ca: &SessionCa) -> String {
    let mut out = String::new();
    for c in system_roots() {
        out.push_str(&pem("CERTIFICATE", c.as_ref()));
    }
    out.push_str(&ca.pem());
    out
}

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = gatewayd_core::engine::secrets::base64(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}
