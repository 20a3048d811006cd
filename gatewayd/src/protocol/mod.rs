//! The gateway's protocol (docs/PROTOCOL.md), typed: one [`Method`] enum, and for each method
//! a parameter type that names its result type ([`Rpc`]). The daemon's dispatcher, the method
//! list in its errors and the docs' check derive from [`Method::ALL`]; clients send a
//! parameter value and get its result type back, in process or over the socket
//! ([`crate::backend::Backend`], [`client::Client`]).
//!
//! - [`wire`]     — the frame: JSON-RPC 2.0 lines, the line limit, error codes
//! - [`messages`] — every method's parameters and result
//! - [`client`]   — a blocking client of the socket, which checks the protocol version
use serde::{Serialize, de::DeserializeOwned};

pub mod client;
pub(crate) mod messages;
pub(crate) mod wire;

pub use messages::*;
pub use wire::{MAX_LINE, PROTOCOL_VERSION, RpcError, code};

/// A method's parameters, which name the method and its result type.
pub trait Rpc: Serialize + DeserializeOwned + Send + 'static {
    /// The method these parameters are for.
    const METHOD: Method;
    /// What the method returns.
    type Reply: Serialize + DeserializeOwned + Send + 'static;
}

/// Writes the [`Method`] enum and the [`Rpc`] impls from one list: each method's name on the
/// wire, its parameter type and its result type.
macro_rules! methods {
    ($($(#[$doc:meta])* $variant:ident = $name:literal ($params:ty) -> $reply:ty;)*) => {
        /// Every method of the protocol.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method {
            $($(#[$doc])* $variant,)*
        }

        impl Method {
            /// Every method, in the order docs/PROTOCOL.md describes them.
            pub const ALL: &'static [Method] = &[$(Method::$variant,)*];

            /// The method's name on the wire, e.g. `call/decide`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Method::$variant => $name,)*
                }
            }

            /// The method called `name`, if there is one.
            pub fn from_name(name: &str) -> Option<Method> {
                match name {
                    $($name => Some(Method::$variant),)*
                    _ => None,
                }
            }
        }

        $(impl Rpc for $params {
            const METHOD: Method = Method::$variant;
            type Reply = $reply;
        })*
    };
}

methods! {
    /// The protocol version, the server's name and the line limit.
    Hello = "hello" (Hello) -> HelloReply;
    /// Opens a session owned by the caller's cgroup, or attaches to it.
    SessionOpen = "session/open" (SessionOpen) -> Opened;
    /// Closes a session.
    SessionClose = "session/close" (SessionClose) -> Closed;
    /// Every open session (operators).
    SessionList = "session/list" (SessionList) -> SessionListReply;
    /// Checks a tool server's definitions against their pins.
    ToolsRegister = "tools/register" (ToolsRegister) -> Registered;
    /// A secret of one session.
    SecretsAdd = "secrets/add" (SecretsAdd) -> SecretAdded;
    /// Decides a tool call.
    CallDecide = "call/decide" (CallDecide) -> Decided;
    /// Checks what a tool returned.
    CallOutput = "call/output" (CallOutput) -> Checked;
    /// Pending approvals (operators).
    ApprovalsList = "approvals/list" (ApprovalsList) -> ApprovalList;
    /// Approves a held call (operators).
    ApprovalsApprove = "approvals/approve" (ApprovalsApprove) -> Settled;
    /// Rejects a held call (operators).
    ApprovalsDeny = "approvals/deny" (ApprovalsDeny) -> Settled;
    /// The last durable audit record.
    AuditHead = "audit/head" (AuditHead) -> Head;
    /// Each export sink's counts (operators).
    ExportStats = "export/stats" (ExportStats) -> ExportStatsReply;
}

impl Method {
    /// Every method's name, comma-separated (the `method_not_found` message).
    pub fn names() -> String {
        Method::ALL
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_found_by_its_name_and_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.name()), Some(*m));
            assert!(seen.insert(m.name()), "{} twice", m.name());
        }
        assert_eq!(Method::from_name("tools/list"), None);
    }

    #[test]
    fn a_request_line_reads_back_as_its_parameters() {
        let p = SessionOpen {
            session: Some("s".into()),
            user: "alice".into(),
            scopes: vec!["mail".into()],
        };
        let line = wire::request_line(7, SessionOpen::METHOD.name(), &p).unwrap();
        assert_eq!(
            line,
            r#"{"jsonrpc":"2.0","id":7,"method":"session/open","params":{"session":"s","user":"alice","scopes":["mail"]}}"#
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let back: SessionOpen = serde_json::from_value(v["params"].clone()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn a_status_reads_back_as_written() {
        let s = ToolStatus {
            name: "t".into(),
            status: Status::RugPull {
                pinned: "sha256:a".into(),
                got: "sha256:b".into(),
            },
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"name": "t", "status": "rug_pull", "pinned": "sha256:a", "got": "sha256:b"})
        );
        assert_eq!(serde_json::from_value::<ToolStatus>(v).unwrap(), s);
    }
}
