//! `gatewayd policy suggest`: a session's refusals turned into a reviewed diff against the
//! policy. Each proposed entry comes with the reason codes that asked for it and how many
//! refusals it answers (the records' own and those counted in `denials_aggregated` records),
//! grouped ([`Group`]); paths are proposed as the smallest directory that covers them
//! sensibly ([`cover`]'s rule). What is never proposed, whatever the log says, is listed
//! with its [`Rule`]: a protected path or name, a secret, gatewayd's self-protection, the
//! Rule of Two's lockdown, the built-in read-only paths, writes to the system's files.
//!
//! Input: records of decision `deny`, and `would_deny` — what a learn mode records when it
//! lets a refusal through, with the same reason codes and details — so one code serves both.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use crate::policy::Policy;

pub mod apply;
mod ask;
pub mod cover;
mod never;

use ask::Ask;
pub use cover::Group;

/// Why a refusal is not turned into a proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// It is (or lies under) a protected path: `sandbox.protected`.
    ProtectedPath,
    /// Its name is a protected name: `sandbox.protected_names`.
    ProtectedName,
    /// A secret: a credential store, a key's or `.env`'s name, the metadata service, a
    /// secret on its way out.
    Secret,
    /// gatewayd's self-protection (`self_protection` and its kin, gatewayd's own files).
    SelfProtection,
    /// The Rule of Two's lockdown (`egress_lockdown`, `trifecta`).
    RuleOfTwo,
    /// A built-in or listed read-only path.
    ReadOnly,
    /// A write to the system's files.
    SystemWrite,
    /// `/proc`, `/sys`, `/dev`.
    KernelFs,
    /// `/`, `/home` or a home as a whole: a directory listed, or a name made or removed
    /// directly in it (the kernel grants both per directory, for everything below); and
    /// `/tmp`, when a `/tmp` of the session's own cannot be proposed.
    WholeTree,
    /// The record names no object to propose (an inode only, a cut name).
    NoObject,
    /// Not a matter of the allowlists (an argument rule, a limit, a pin, an echo).
    NotAnAllowlist,
    /// The policy already allows what the proposal would: something else refused it.
    AlreadyAllowed,
}

/// One proposed entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Proposal {
    /// The tool server whose profile it goes into (`mcp_servers.NAME`), when the refusals
    /// are that server's (session `mcp:NAME`); none for the agent's own policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Where it belongs in the grouped list.
    pub group: Group,
    /// The policy field it is added to (`sandbox.readable`, `network.egress`, ...).
    pub field: &'static str,
    /// The entry: a path, an egress object, a tool object, or `true` (`private_tmp`,
    /// `proxy`).
    pub value: Value,
    /// The reason codes of the refusals it answers.
    pub reasons: BTreeSet<String>,
    /// How many refusals it answers.
    pub count: u64,
    /// Up to three of the refused objects.
    pub examples: Vec<String>,
}

/// A refusal that is not proposed, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotProposed {
    /// The tool server whose refusal it is (as [`Proposal::server`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Which rule keeps it out.
    pub rule: Rule,
    /// What was refused.
    pub object: String,
    /// The record's reason code.
    pub reason: String,
    /// How many refusals.
    pub count: u64,
    /// Why, in words.
    pub why: String,
}

/// What `suggest` found in a log.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Suggestions {
    /// The sessions read, in log order.
    pub sessions: Vec<String>,
    /// The refusals read (records and counted ones).
    pub refusals: u64,
    /// Proposed entries, by group then field.
    pub proposals: Vec<Proposal>,
    /// Refusals not proposed.
    pub not_proposed: Vec<NotProposed>,
    /// Refusals counted in `denials_aggregated` records whose first record is not in the log
    /// (or which were counted beyond the aggregator's kinds): counted, not attributed.
    pub unattributed: u64,
}

/// Whether `suggest` reads the record: a denial, or a learn mode's `would_deny`.
pub fn is_input(record: &Value) -> bool {
    matches!(record["decision"].as_str(), Some("deny" | "would_deny"))
        && record["reason"] != "denials_aggregated"
}

/// The aggregation kind of a record (session, hook, reason, object), as `aggregate` counts.
fn kind(r: &Value) -> (String, String, String, String) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (
        s(&r["session"]),
        s(&r["hook"]),
        s(&r["reason"]),
        super::aggregate::object_of(&r["detail"]),
    )
}

/// The refusals of `records` (of `session`, or all), each with its count.
fn counted<'r>(records: &'r [Value], session: Option<&str>) -> (Vec<(&'r Value, u64)>, u64) {
    let mine = |r: &&Value| session.is_none_or(|s| r["session"] == s);
    let mut out: Vec<(&Value, u64)> = records
        .iter()
        .filter(mine)
        .filter(|r| is_input(r))
        .map(|r| (r, 1))
        .collect();
    let index: BTreeMap<_, usize> = out
        .iter()
        .enumerate()
        .rev()
        .map(|(i, (r, _))| (kind(r), i))
        .collect();
    let mut unattributed = 0;
    for a in records
        .iter()
        .filter(mine)
        .filter(|r| r["reason"] == "denials_aggregated")
    {
        let d = &a["detail"];
        let n = d["count"].as_u64().unwrap_or(0);
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let k = (
            s(&a["session"]),
            s(&a["hook"]),
            s(&d["reason"]),
            s(&d["object"]),
        );
        match index.get(&k) {
            Some(i) => out[*i].1 += n,
            None => unattributed += n,
        }
    }
    (out, unattributed)
}

/// Suggests the changes to `policy` that the refusals of `records` (the audit log's lines,
/// of `session` or all) ask for.
/// A tool server's kernel refusals (session `mcp:NAME`, written by `gatewayd mcp`) are
/// weighed against that server's profile and proposed into it (`mcp_servers.NAME`).
pub fn suggest(records: &[Value], session: Option<&str>, policy: &Policy) -> Suggestions {
    let (refusals, unattributed) = counted(records, session);
    let profiles: BTreeMap<&str, Policy> = policy
        .mcp_servers
        .iter()
        .map(|(name, s)| (name.as_str(), s.profile(policy.kernel)))
        .collect();
    let mut agent = Builder::new(policy, None);
    let mut servers: BTreeMap<&str, Builder<'_>> = profiles
        .iter()
        .map(|(name, p)| (*name, Builder::new(p, Some(name))))
        .collect();
    let mut sessions: Vec<String> = Vec::new();
    for (r, n) in &refusals {
        let session = r["session"].as_str();
        if let Some(s) = session.filter(|s| !sessions.iter().any(|x| x == s)) {
            sessions.push(s.to_owned());
        }
        let server = session
            .and_then(|s| s.strip_prefix("mcp:"))
            .and_then(|name| servers.get_mut(name));
        server.unwrap_or(&mut agent).take(r, *n);
    }
    let mut proposals = agent.proposals();
    let mut not_proposed: Vec<NotProposed> = agent.not.into_values().collect();
    for mut b in servers.into_values() {
        proposals.extend(b.proposals());
        not_proposed.extend(b.not.into_values());
    }
    Suggestions {
        sessions,
        refusals: refusals.iter().map(|(_, n)| n).sum::<u64>() + unattributed,
        proposals,
        not_proposed,
        unattributed,
    }
}

/// Path-like argument names: a proposed tool checks them as paths to read.
const PATH_ARGS: &[&str] = &[
    "path",
    "file_path",
    "filename",
    "file",
    "notebook_path",
    "dir",
    "directory",
    "cwd",
];

struct Builder<'a> {
    policy: &'a Policy,
    /// The tool server whose profile `policy` is, if any.
    server: Option<&'a str>,
    guard: never::Guard<'a>,
    props: BTreeMap<(&'static str, String), Proposal>,
    not: BTreeMap<(Rule, String, String), NotProposed>,
    /// The agent's writes under `/tmp`, and its reads there, settled once every refusal is
    /// read ([`Builder::settle_tmp`]): each record, its path, its count.
    tmp_writes: Vec<(Value, PathBuf, u64)>,
    tmp_reads: Vec<(Value, PathBuf, u64)>,
}

impl<'a> Builder<'a> {
    fn new(policy: &'a Policy, server: Option<&'a str>) -> Builder<'a> {
        Builder {
            policy,
            server,
            guard: never::Guard::new(policy),
            props: BTreeMap::new(),
            not: BTreeMap::new(),
            tmp_writes: Vec::new(),
            tmp_reads: Vec::new(),
        }
    }

    fn refuse(&mut self, r: &Value, object: String, n: u64, (rule, why): (Rule, String)) {
        let reason = r["reason"].as_str().unwrap_or("unknown").to_owned();
        let e = self
            .not
            .entry((rule, object.clone(), reason.clone()))
            .or_insert(NotProposed {
                server: self.server.map(str::to_owned),
                rule,
                object,
                reason,
                count: 0,
                why,
            });
        e.count += n;
    }

    fn propose(
        &mut self,
        r: &Value,
        (group, field, value): (Group, &'static str, Value),
        example: String,
        n: u64,
    ) {
        let key = (field, value.to_string());
        let p = self.props.entry(key).or_insert(Proposal {
            server: self.server.map(str::to_owned),
            group,
            field,
            value,
            reasons: BTreeSet::new(),
            count: 0,
            examples: Vec::new(),
        });
        p.count += n;
        p.reasons
            .insert(r["reason"].as_str().unwrap_or("unknown").to_owned());
        if p.examples.len() < 3 && !p.examples.contains(&example) {
            p.examples.push(example);
        }
    }

    fn take(&mut self, r: &Value, n: u64) {
        let tool = r["tool"]
            .as_str()
            .unwrap_or(r["reason"].as_str().unwrap_or("-"));
        match ask::ask(r) {
            Ask::Never(rule, why) => {
                let object =
                    super::explain::object(&r["detail"]).unwrap_or_else(|| tool.to_owned());
                self.refuse(r, object, n, (rule, why));
            }
            Ask::Read(p) => self.path(r, &p, "sandbox.readable", n),
            Ask::Write(p) => {
                self.path(r, &p, "sandbox.writable", n);
                // A rename or link made this name: the file the host means to write, beside
                // the directory the kernel judged the call by.
                if let Some(made) = r["detail"]["new_name"].as_str().map(Path::new) {
                    self.path(r, made, "sandbox.writable", n);
                }
            }
            Ask::Exec(p) => match self.exec(&p) {
                Ok(e) => self.propose(r, e, p.display().to_string(), n),
                Err(no) => self.refuse(r, p.display().to_string(), n, no),
            },
            Ask::Egress { host, port } => match Self::egress(&host, port) {
                Ok(e) => {
                    let example = format!("{host}:{}", port.map_or("*".into(), |p| p.to_string()));
                    // A name is reached by name: the agent's own look-up of it must reach
                    // the session's resolver, which only the proxy sends it to (unless the
                    // policy turns it off on purpose).
                    let by_name = !ask::is_address(&host) && self.policy.network.proxy.is_none();
                    self.propose(r, e, example.clone(), n);
                    if by_name {
                        let flag = (Group::Egress, "network.proxy", Value::Bool(true));
                        self.propose(r, flag, example, n);
                    }
                }
                Err(no) => self.refuse(r, host, n, no),
            },
            Ask::Unix(s) => match self.unix(&s) {
                Ok(e) => self.propose(r, e, s, n),
                Err(no) => self.refuse(r, s, n, no),
            },
            Ask::Tool { name, args } => match self.tool(&name, &args) {
                Ok(e) => self.propose(r, e, name, n),
                Err(no) => self.refuse(r, name, n, no),
            },
        }
    }

    /// A path to read or write: its cover, unless a rule keeps it out or the policy has it.
    /// The agent's paths under `/tmp` wait for [`Builder::settle_tmp`].
    fn path(&mut self, r: &Value, path: &Path, field: &'static str, n: u64) {
        // A tool server has no private `/tmp` (it shares the host's): its paths there are
        // proposed as paths.
        if path.starts_with("/tmp") && self.server.is_none() {
            let bound = || self.bound_in_tmp().iter().any(|b| path.starts_with(b));
            if self.policy.sandbox.private_tmp && !bound() {
                let why = "sandbox.private_tmp is on: the refusal came from something else (`gatewayd explain`)";
                let shown = path.display().to_string();
                return self.refuse(r, shown, n, (Rule::AlreadyAllowed, why.to_owned()));
            }
            let waiting = if field == "sandbox.writable" {
                &mut self.tmp_writes
            } else {
                &mut self.tmp_reads
            };
            return waiting.push((r.clone(), path.to_owned(), n));
        }
        self.host_path(r, path, field, n);
    }

    /// The agent's paths under `/tmp`. What it read there that it had not written (a file
    /// of the host's `/tmp`) is a path like any other. Its writes, and what it read back of
    /// them, are a `/tmp` of the session's own (`sandbox.private_tmp`), but below a path of
    /// the host's `/tmp` that the policy names or a proposal adds: that path is bound into
    /// the session's `/tmp` ([`crate::policy::Sandbox::tmp_binds`]), so they are the
    /// host's.
    fn settle_tmp(&mut self) {
        let writes = std::mem::take(&mut self.tmp_writes);
        let (own, host): (Vec<_>, Vec<_>) = std::mem::take(&mut self.tmp_reads)
            .into_iter()
            .partition(|(_, p, _)| writes.iter().any(|(_, w, _)| wrote(w, p)));
        for (r, path, n) in host {
            self.host_path(&r, &path, "sandbox.readable", n);
        }
        let bound = self.bound_in_tmp();
        let settled = writes.into_iter().map(|w| (w, "sandbox.writable"));
        for ((r, path, n), field) in settled.chain(own.into_iter().map(|o| (o, "sandbox.readable")))
        {
            if bound.iter().any(|b| path.starts_with(b)) {
                self.host_path(&r, &path, field, n);
            } else {
                let flag = (Group::System, "sandbox.private_tmp", Value::Bool(true));
                self.propose(&r, flag, path.display().to_string(), n);
            }
        }
    }

    /// The paths of the host's `/tmp` that the policy names, or that a proposal would add,
    /// as a root, a readable or writable path or a program: bound into the session's `/tmp`.
    fn bound_in_tmp(&self) -> Vec<PathBuf> {
        let proposed: Vec<PathBuf> = self
            .props
            .values()
            .filter(|p| p.field.starts_with("sandbox."))
            .filter_map(|p| p.value.as_str().map(PathBuf::from))
            .collect();
        let named = self.policy.sandbox.named_paths();
        crate::policy::tmp_binds::under_tmp(named.chain(proposed.iter().map(PathBuf::as_path)))
    }

    /// A path of the host to read or write: its cover, unless a rule keeps it out or the
    /// policy has it.
    fn host_path(&mut self, r: &Value, path: &Path, field: &'static str, n: u64) {
        let write = field == "sandbox.writable";
        let shown = path.display().to_string();
        let (dir, group) = cover::cover(path);
        let dir = never::Guard::narrow(path, dir);
        if let Some(no) = self.guard.path(path, &dir, write) {
            return self.refuse(r, shown, n, no);
        }
        let sb = &self.policy.sandbox;
        let mut have: Vec<&PathBuf> = sb.writable.iter().collect();
        if !write {
            have.extend(&sb.readable);
        }
        if let Some(h) = have.iter().find(|h| dir.starts_with(h)) {
            let why = format!(
                "{field} already holds `{}`: the refusal came from something else (`gatewayd explain`)",
                h.display()
            );
            return self.refuse(r, shown, n, (Rule::AlreadyAllowed, why));
        }
        self.propose(
            r,
            (group, field, Value::String(dir.display().to_string())),
            shown,
            n,
        );
    }

    fn exec(&self, path: &Path) -> Result<(Group, &'static str, Value), (Rule, String)> {
        if let Some(no) = self.guard.path(path, path, false) {
            return Err(no);
        }
        if self.policy.sandbox.exec.iter().any(|e| e == path) {
            return Err((
                Rule::AlreadyAllowed,
                "sandbox.exec already lists it".to_owned(),
            ));
        }
        Ok((
            Group::Exec,
            "sandbox.exec",
            Value::String(path.display().to_string()),
        ))
    }

    fn egress(
        host: &str,
        port: Option<u16>,
    ) -> Result<(Group, &'static str, Value), (Rule, String)> {
        if let Some(no) = never::Guard::egress(host) {
            return Err(no);
        }
        let entry = if ask::is_address(host) {
            let bits = if host.contains(':') { 128 } else { 32 };
            json!({"cidr": format!("{host}/{bits}"), "port": port})
        } else {
            json!({"host": host, "port": port})
        };
        Ok((Group::Egress, "network.egress", entry))
    }

    fn unix(&self, s: &str) -> Result<(Group, &'static str, Value), (Rule, String)> {
        if s.starts_with('/')
            && let Some(no) = self.guard.path(Path::new(s), Path::new(s), false)
        {
            return Err(no);
        }
        if self.policy.network.unix.iter().any(|u| u == s) {
            return Err((
                Rule::AlreadyAllowed,
                "network.unix already lists it".to_owned(),
            ));
        }
        Ok((Group::Unix, "network.unix", Value::String(s.to_owned())))
    }

    /// A tool the gateway did not know: proposed held for a person (`default: hold`), its
    /// path-like arguments checked as paths to read, until its labels and rules are written.
    fn tool(
        &self,
        name: &str,
        args: &[String],
    ) -> Result<(Group, &'static str, Value), (Rule, String)> {
        if self.policy.tools.iter().any(|t| t.name == name) {
            return Err((Rule::AlreadyAllowed, "tools already lists it".to_owned()));
        }
        let rules: serde_json::Map<String, Value> = args
            .iter()
            .filter(|a| PATH_ARGS.contains(&a.as_str()))
            .map(|a| (a.clone(), json!({"path": "read"})))
            .collect();
        let mut t = json!({"name": name, "description": "", "default": "hold"});
        if !rules.is_empty() {
            t["args"] = Value::Object(rules);
        }
        Ok((Group::Tools, "tools", t))
    }

    /// The proposals, a path folded into a proposed directory of the same field above it.
    fn proposals(&mut self) -> Vec<Proposal> {
        self.settle_tmp();
        let all: Vec<Proposal> = std::mem::take(&mut self.props).into_values().collect();
        let mut out: Vec<Proposal> = Vec::new();
        let is_path = |p: &Proposal| {
            p.field.starts_with("sandbox.") && p.value.is_string() && p.field != "sandbox.exec"
        };
        for p in all {
            let above = out.iter().position(|o| {
                o.field == p.field
                    && is_path(o)
                    && is_path(&p)
                    && Path::new(p.value.as_str().unwrap_or(""))
                        .starts_with(o.value.as_str().unwrap_or("\0"))
            });
            match above {
                Some(i) => {
                    let o = &mut out[i];
                    o.count += p.count;
                    o.reasons.extend(p.reasons);
                    o.examples.extend(p.examples);
                    o.examples.truncate(3);
                }
                None => out.push(p),
            }
        }
        let mut out = fold_reads_into_writes_and_exec(out);
        out.sort_by(|a, b| (a.group, a.field, b.count).cmp(&(b.group, b.field, a.count)));
        out
    }
}

/// Whether a write refused at `written` (a file, or the directory a name was made in) made
/// `path`: below it, or directly in `/tmp` when the name was made there.
fn wrote(written: &Path, path: &Path) -> bool {
    if written == Path::new("/tmp") {
        path.parent() == Some(written)
    } else {
        path.starts_with(written)
    }
}

/// A proposed readable path that a proposed writable directory covers, or that a proposed
/// exec entry names (the kernel reads what it may write or run), is folded into that
/// proposal: the kernel's learn mode records the open of a file it writes or runs as a read
/// too.
fn fold_reads_into_writes_and_exec(all: Vec<Proposal>) -> Vec<Proposal> {
    let path = |p: &Proposal| PathBuf::from(p.value.as_str().unwrap_or("\0"));
    let (reads, mut out): (Vec<Proposal>, Vec<Proposal>) = all
        .into_iter()
        .partition(|p| p.field == "sandbox.readable" && p.value.is_string());
    for r in reads {
        let covered = out.iter().position(|o| match o.field {
            "sandbox.writable" => path(&r).starts_with(path(o)),
            "sandbox.exec" => path(&r) == path(o),
            _ => false,
        });
        match covered {
            Some(i) => {
                let o = &mut out[i];
                o.count += r.count;
                o.reasons.extend(r.reasons);
            }
            None => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests;
