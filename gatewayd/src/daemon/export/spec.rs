//! `--export KIND:TARGET`: which sink, where (docs/FLEET.md, "Export").
//!
//! - `-`, `PATH`, `json:-`, `json:PATH`: JSON lines on stdout or appended to a file;
//! - `syslog` (= `syslog:unix:/dev/log`), `syslog:unix:PATH`, `syslog:udp:HOST:PORT`,
//!   `syslog:tcp:HOST:PORT`, `syslog:tls:HOST:PORT`: RFC 5424 (octet counting over TCP, and
//!   over TLS as RFC 5425 says, the server checked against the system's roots and
//!   `--export-ca`);
//! - `journal` (= `journal:/run/systemd/journal/socket`), `journal:PATH`: the systemd
//!   journal's native protocol;
//! - `otlp:http://HOST:PORT[/PATH]`, `otlp:https://...`: OTLP logs over HTTP/protobuf
//!   (`/v1/logs` when no path), HTTPS checked against the system's roots and `--export-ca`;
//! - `otlp-grpc:http://HOST:PORT`, `otlp-grpc:https://HOST:PORT`: OTLP logs over gRPC, TLS
//!   checked the same way.
use std::{
    fmt,
    path::{Path, PathBuf},
};

use super::{
    HostInfo, Sink, journal::Journal, json::JsonLines, otlp::Otlp, otlp_grpc::OtlpGrpc,
    syslog::Syslog,
};

/// The journal's socket on a systemd host.
pub(super) const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// One configured sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportSpec {
    /// JSON lines on the daemon's standard output (the journal, under systemd).
    Stdout,
    /// JSON lines appended to a file (created 0640).
    File(PathBuf),
    /// RFC 5424 syslog.
    Syslog(SyslogTransport),
    /// The systemd journal's native protocol on this socket.
    Journal(PathBuf),
    /// OTLP logs over HTTP/protobuf to this URL.
    Otlp(String),
    /// OTLP logs over gRPC to this URL (`http://` or `https://`, host and port only).
    OtlpGrpc(String),
}

/// How syslog messages travel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyslogTransport {
    /// A local datagram socket (`/dev/log`).
    Unix(PathBuf),
    /// UDP to `HOST:PORT`, one message per datagram.
    Udp(String),
    /// TCP to `HOST:PORT`, octet-counting framing (RFC 6587 3.4.1).
    Tcp(String),
    /// TLS over TCP to `HOST:PORT` (RFC 5425), the same framing.
    Tls(String),
}

/// Why an `--export` value is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--export {given:?}: {why}; expected -, PATH, json:PATH, syslog[:unix:PATH|:udp:HOST:PORT|:tcp:HOST:PORT|:tls:HOST:PORT], journal[:PATH], otlp:http[s]://HOST:PORT[/PATH] or otlp-grpc:http[s]://HOST:PORT"
)]
pub struct SpecError {
    given: String,
    why: &'static str,
}

impl ExportSpec {
    /// Reads one `--export` value.
    pub fn parse(s: &str) -> Result<ExportSpec, SpecError> {
        let err = |why| SpecError {
            given: s.to_owned(),
            why,
        };
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        Ok(match kind {
            "json" | "-" if rest == "-" || s == "-" => ExportSpec::Stdout,
            "json" if !rest.is_empty() => ExportSpec::File(rest.into()),
            "json" => return Err(err("json needs a path or -")),
            "syslog" if rest.is_empty() => {
                ExportSpec::Syslog(SyslogTransport::Unix("/dev/log".into()))
            }
            "syslog" => {
                let (how, to) = rest
                    .split_once(':')
                    .ok_or_else(|| err("syslog needs unix:, udp:, tcp: or tls:"))?;
                match how {
                    "unix" if !to.is_empty() => {
                        ExportSpec::Syslog(SyslogTransport::Unix(to.into()))
                    }
                    "udp" | "tcp" | "tls" => {
                        let port = to.rsplit_once(':').map(|(h, p)| (h, p.parse::<u16>()));
                        if !matches!(port, Some((h, Ok(p))) if !h.is_empty() && p != 0) {
                            return Err(err("syslog over udp, tcp or tls needs HOST:PORT"));
                        }
                        ExportSpec::Syslog(match how {
                            "udp" => SyslogTransport::Udp(to.into()),
                            "tcp" => SyslogTransport::Tcp(to.into()),
                            _ => SyslogTransport::Tls(to.into()),
                        })
                    }
                    _ => {
                        return Err(err(
                            "syslog needs unix:PATH, udp:HOST:PORT, tcp:HOST:PORT or tls:HOST:PORT",
                        ));
                    }
                }
            }
            "journal" if rest.is_empty() => ExportSpec::Journal(JOURNAL_SOCKET.into()),
            "journal" => ExportSpec::Journal(rest.into()),
            "otlp" => {
                let Some(after) = after_scheme(rest) else {
                    return Err(err("otlp needs an http:// or https:// URL"));
                };
                match after.split_once('/') {
                    None => ExportSpec::Otlp(format!("{rest}/v1/logs")),
                    Some((h, "")) if !h.is_empty() => ExportSpec::Otlp(format!("{rest}v1/logs")),
                    Some((h, _)) if !h.is_empty() => ExportSpec::Otlp(rest.to_owned()),
                    _ => return Err(err("otlp needs a host")),
                }
            }
            "otlp-grpc" => {
                let Some(after) = after_scheme(rest) else {
                    return Err(err("otlp-grpc needs an http:// or https:// URL"));
                };
                match after.strip_suffix('/').unwrap_or(after) {
                    "" => return Err(err("otlp-grpc needs a host")),
                    h if h.contains('/') => {
                        return Err(err("otlp-grpc takes no path (gRPC names the method)"));
                    }
                    h => ExportSpec::OtlpGrpc(format!("{}{h}", &rest[..rest.len() - after.len()])),
                }
            }
            _ if s.is_empty() => return Err(err("empty")),
            // A plain path, as before kinds existed.
            _ => ExportSpec::File(s.into()),
        })
    }

    /// The sink, ready to use: a file is opened now (and a TLS sink's CA file `ca` read),
    /// the others connect on first use.
    pub(super) fn open(
        &self,
        host: &HostInfo,
        ca: Option<&Path>,
    ) -> std::io::Result<Box<dyn Sink>> {
        Ok(match self {
            ExportSpec::Stdout => Box::new(JsonLines::new(Box::new(std::io::stdout()))),
            ExportSpec::File(p) => {
                use std::os::unix::fs::OpenOptionsExt;
                let f = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o640)
                    .open(p)?;
                Box::new(JsonLines::new(Box::new(f)))
            }
            ExportSpec::Syslog(t) => Box::new(Syslog::new(t.clone(), host, ca)?),
            ExportSpec::Journal(p) => Box::new(Journal::new(p.clone(), host)),
            ExportSpec::Otlp(url) => Box::new(Otlp::new(url.clone(), host, ca)?),
            ExportSpec::OtlpGrpc(url) => Box::new(OtlpGrpc::new(url.clone(), host, ca)?),
        })
    }
}

/// What follows `http://` or `https://` in `url`; None for another scheme.
fn after_scheme(url: &str) -> Option<&str> {
    url.strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
}

impl fmt::Display for ExportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportSpec::Stdout => write!(f, "json:-"),
            ExportSpec::File(p) => write!(f, "json:{}", p.display()),
            ExportSpec::Syslog(SyslogTransport::Unix(p)) => {
                write!(f, "syslog:unix:{}", p.display())
            }
            ExportSpec::Syslog(SyslogTransport::Udp(a)) => write!(f, "syslog:udp:{a}"),
            ExportSpec::Syslog(SyslogTransport::Tcp(a)) => write!(f, "syslog:tcp:{a}"),
            ExportSpec::Syslog(SyslogTransport::Tls(a)) => write!(f, "syslog:tls:{a}"),
            ExportSpec::Journal(p) => write!(f, "journal:{}", p.display()),
            ExportSpec::Otlp(u) => write!(f, "otlp:{u}"),
            ExportSpec::OtlpGrpc(u) => write!(f, "otlp-grpc:{u}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_reads_and_prints_back() {
        for (given, shown) in [
            ("-", "json:-"),
            ("json:-", "json:-"),
            ("/var/log/heads.jsonl", "json:/var/log/heads.jsonl"),
            ("json:rel/x.jsonl", "json:rel/x.jsonl"),
            ("syslog", "syslog:unix:/dev/log"),
            ("syslog:unix:/run/s", "syslog:unix:/run/s"),
            ("syslog:udp:127.0.0.1:514", "syslog:udp:127.0.0.1:514"),
            ("syslog:tcp:[::1]:601", "syslog:tcp:[::1]:601"),
            (
                "syslog:tls:logs.example:6514",
                "syslog:tls:logs.example:6514",
            ),
            ("journal", "journal:/run/systemd/journal/socket"),
            ("journal:/tmp/j", "journal:/tmp/j"),
            ("otlp:http://c:4318", "otlp:http://c:4318/v1/logs"),
            ("otlp:http://c:4318/", "otlp:http://c:4318/v1/logs"),
            ("otlp:http://c:4318/x/logs", "otlp:http://c:4318/x/logs"),
            ("otlp:https://c:4318", "otlp:https://c:4318/v1/logs"),
            ("otlp-grpc:http://c:4317", "otlp-grpc:http://c:4317"),
            ("otlp-grpc:https://c:4317/", "otlp-grpc:https://c:4317"),
            ("otlp-grpc:http://[::1]:4317", "otlp-grpc:http://[::1]:4317"),
        ] {
            let spec = ExportSpec::parse(given).unwrap();
            assert_eq!(spec.to_string(), shown, "{given}");
            assert_eq!(ExportSpec::parse(shown).unwrap(), spec, "{shown}");
        }
    }

    #[test]
    fn bad_values_say_what_is_expected() {
        for bad in [
            "",
            "json:",
            "syslog:tcp:host",
            "syslog:udp::514",
            "syslog:tcp:h:0",
            "syslog:tls:6514",
            "syslog:smoke:x",
            "otlp:ftp://c:4318",
            "otlp:c:4318",
            "otlp:http:///v1/logs",
            "otlp-grpc:c:4317",
            "otlp-grpc:http://",
            "otlp-grpc:http://c:4317/v1/logs",
            "otlp-grpc:grpc://c:4317",
        ] {
            let e = ExportSpec::parse(bad).unwrap_err().to_string();
            assert!(e.contains("expected -, PATH"), "{bad}: {e}");
        }
    }
}
