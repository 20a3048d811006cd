//! What the engine's fallible operations return: building an engine, deciding an approval,
//! adding a secret at run time.

/// Why an engine could not be built from a policy.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// An argument rule of a tool cannot be compiled (e.g. a regex that does not parse).
    #[error("policy: tool {tool} arg {arg}: {reason}")]
    ArgRule {
        /// The tool's name.
        tool: String,
        /// The argument's name.
        arg: String,
        /// Why it does not compile.
        reason: String,
    },
    /// A condition of a policy rule cannot be compiled.
    #[error("policy: rule {rule}: {reason}")]
    RuleCondition {
        /// The rule's id.
        rule: String,
        /// Why it does not compile.
        reason: String,
    },
}

/// Why a person's approval or rejection of a held call was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    /// No approval has this id (never issued, used, or forgotten after expiry).
    #[error("no approval with id {0}")]
    Unknown(String),
    /// The approval was already approved or rejected.
    #[error("approval {0} was already decided")]
    AlreadyDecided(String),
    /// The approval's time to live has passed.
    #[error("approval {0} has expired")]
    Expired(String),
}

/// Why a secret could not be added at run time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Too short to look for: it would match everywhere.
    #[error("secret {name}: shorter than {min} characters")]
    TooShort {
        /// The secret's name.
        name: String,
        /// The shortest length accepted, in characters.
        min: usize,
    },
}
