//! `gatewayd approvals watch`: the held calls of a daemon or of one `gatewayd run`, shown as
//! they arrive (`approvals/list` every interval) and decided with one key. The call shown is
//! the oldest unless `n` moved on; one that is decided elsewhere or expires while shown is
//! replaced, with a note. The daemon going away ends the watch with an error (exit 2); `q`,
//! ctrl-c and SIGTERM end it normally. The terminal is restored on every way out.
use std::{
    collections::HashSet,
    io::IsTerminal as _,
    path::PathBuf,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use gatewayd::protocol::{
    ApprovalsApprove, ApprovalsDeny, ApprovalsList, PendingApproval, RpcError, Settled,
    client::{Client, ClientError},
    code,
};
use gatewayd_core::engine::Legs;

use super::{
    notify,
    terminal::{Input, Terminal},
};
use crate::cli::out::outln;

/// The watch's settings.
pub(in crate::cli) struct Options {
    /// The daemon's (or a `gatewayd run`'s) socket.
    pub(in crate::cli) socket: PathBuf,
    /// How often the list is asked for.
    pub(in crate::cli) interval: Duration,
    /// Whether a desktop notification is sent for each call that arrives.
    pub(in crate::cli) notify: bool,
}

/// A key that comes this soon after the call shown changed is ignored: it was meant for the
/// call that was there before.
const SETTLE_KEYS: Duration = Duration::from_millis(300);
/// At most this many lines of arguments are shown (`approvals list --json` has them all).
const MAX_ARG_LINES: usize = 40;

/// Watches until `q`, ctrl-c or a terminating signal; an error when the daemon goes away.
pub(in crate::cli) fn run(opts: &Options) -> anyhow::Result<ExitCode> {
    if !std::io::stdin().is_terminal() {
        bail!(
            "`gatewayd approvals watch` reads one key per decision and needs a terminal on stdin; \
             in a script use `gatewayd approvals list --json` and `gatewayd approvals approve|deny ID`"
        );
    }
    // Connected and allowed (an operator) before the terminal changes mode.
    let mut client = Client::connect(&opts.socket)?;
    let first = client.request(&ApprovalsList {})?;
    let mut w = Watch::new(opts, client, first.approvals);
    let result = {
        let term = Terminal::enter()?;
        w.run(&term)
    };
    for line in &w.log {
        outln!("{line}")?;
    }
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e @ ClientError::Rpc(_)) => {
            Err(e).with_context(|| format!("the daemon at {} refused", opts.socket.display()))
        }
        Err(e) => {
            Err(e).with_context(|| format!("the daemon at {} went away", opts.socket.display()))
        }
    }
}

/// The watch's state.
struct Watch<'o> {
    opts: &'o Options,
    client: Client,
    pending: Vec<PendingApproval>,
    /// The id of the call shown.
    shown: Option<String>,
    /// When the call shown last changed.
    shown_since: Instant,
    /// Every id seen (one notification each).
    seen: HashSet<String>,
    /// The last thing that happened, on the screen's last line.
    status: String,
    /// What was decided here, printed when the watch ends.
    log: Vec<String>,
}

impl<'o> Watch<'o> {
    fn new(opts: &'o Options, client: Client, pending: Vec<PendingApproval>) -> Watch<'o> {
        let seen = pending.iter().map(|p| p.approval.id.clone()).collect();
        let mut w = Watch {
            opts,
            client,
            pending,
            shown: None,
            shown_since: Instant::now(),
            seen,
            status: String::new(),
            log: Vec::new(),
        };
        w.pick(None);
        w
    }

    fn run(&mut self, term: &Terminal) -> Result<(), ClientError> {
        let mut next_poll = Instant::now() + self.opts.interval;
        loop {
            term.draw(&self.frame());
            let wait = next_poll
                .saturating_duration_since(Instant::now())
                .min(Duration::from_secs(1));
            match term.key(wait) {
                Input::End | Input::Key(b'q' | 0x03 | 0x04) => return Ok(()),
                Input::Key(k) => self.key(k)?,
                Input::Burst => self.status = "ignored: several keys at once".into(),
                Input::Nothing => {}
            }
            if Instant::now() >= next_poll {
                self.refresh()?;
                next_poll = Instant::now() + self.opts.interval;
            }
        }
    }

    /// Asks for the list again: new calls are noted (and notified), the call shown replaced
    /// if it went.
    fn refresh(&mut self) -> Result<(), ClientError> {
        self.pending = self.client.request(&ApprovalsList {})?.approvals;
        for p in &self.pending {
            if self.seen.insert(p.approval.id.clone()) && self.opts.notify {
                notify::held(p);
            }
        }
        let before = self.shown.clone();
        self.pick(before.as_deref());
        if let Some(id) = before
            && self.shown.as_deref() != Some(id.as_str())
        {
            self.status = format!("{id} was decided elsewhere or expired");
        }
        Ok(())
    }

    /// Shows `want` if it is still pending, else the oldest.
    fn pick(&mut self, want: Option<&str>) {
        let keep = want.filter(|w| self.pending.iter().any(|p| p.approval.id == *w));
        let next = keep
            .map(str::to_owned)
            .or_else(|| self.pending.first().map(|p| p.approval.id.clone()));
        if next != self.shown {
            self.shown_since = Instant::now();
        }
        self.shown = next;
    }

    fn current(&self) -> Option<&PendingApproval> {
        let id = self.shown.as_deref()?;
        self.pending.iter().find(|p| p.approval.id == id)
    }

    fn key(&mut self, k: u8) -> Result<(), ClientError> {
        let Some(id) = self.shown.clone() else {
            return Ok(());
        };
        if !matches!(k, b'a' | b'd' | b'n' | b' ') {
            self.status = format!("keys: a approve · d deny · n next · q quit (not {k:#04x})");
            return Ok(());
        }
        if self.shown_since.elapsed() < SETTLE_KEYS {
            self.status = "ignored: the call shown had just changed; press again".into();
            return Ok(());
        }
        match k {
            b'a' => self.decide(&id, true)?,
            b'd' => self.decide(&id, false)?,
            _ => {
                let i = self.pending.iter().position(|p| p.approval.id == id);
                let next = i.and_then(|i| self.pending.get((i + 1) % self.pending.len()));
                let next = next.map(|p| p.approval.id.clone());
                self.pick(next.as_deref());
            }
        }
        Ok(())
    }

    /// Approves or denies `id`. A refusal of the daemon (decided elsewhere, expired) is a note
    /// on the screen; a daemon that went away, the end of the watch.
    fn decide(&mut self, id: &str, approve: bool) -> Result<(), ClientError> {
        let tool = self.current().map(|p| p.approval.tool.clone());
        let r: Result<Settled, ClientError> = if approve {
            self.client.request(&ApprovalsApprove { id: id.into() })
        } else {
            self.client.request(&ApprovalsDeny { id: id.into() })
        };
        let verb = if approve { "approved" } else { "denied" };
        match r {
            Ok(_) => {
                let tool = clean(tool.as_deref().unwrap_or("?"));
                self.status = format!("{verb} {id} ({tool})");
                self.log.push(format!("{verb} {id} ({tool})"));
            }
            Err(ClientError::Rpc(RpcError { code: c, message })) if c == code::APPROVAL => {
                self.status = format!("not {verb}: {}", clean(&message));
            }
            Err(e) => return Err(e),
        }
        // Settled either way: the next call is shown without a "decided elsewhere" note.
        self.shown = None;
        self.refresh()
    }

    /// The screen.
    fn frame(&self) -> Vec<String> {
        let mut l = vec![
            format!(
                "gatewayd approvals watch · {} · {} waiting",
                clean(&self.opts.socket.display().to_string()),
                self.pending.len()
            ),
            "keys: a approve · d deny · n next · q quit".into(),
            String::new(),
        ];
        match self.current() {
            Some(p) => self.call_lines(p, &mut l),
            None => l.push("No held calls. Waiting for the next one...".into()),
        }
        if self.pending.len() > 1 {
            l.push(String::new());
            l.push("Waiting:".into());
            for p in &self.pending {
                let a = &p.approval;
                let mark = if Some(&a.id) == self.shown.as_ref() {
                    '>'
                } else {
                    ' '
                };
                l.push(format!(
                    "{mark} {}  {}  session {}  {}",
                    clean(&a.id.chars().take(8).collect::<String>()),
                    clean(&a.tool),
                    clean(&a.session),
                    clean(&a.reasons.join(", "))
                ));
            }
        }
        l.push(String::new());
        l.push(self.status.clone());
        l
    }

    /// The call shown: what it is, why it is held, where its session stands.
    fn call_lines(&self, p: &PendingApproval, l: &mut Vec<String>) {
        let a = &p.approval;
        let n = self.pending.iter().position(|x| x.approval.id == a.id);
        let left = a.expires_ms.saturating_sub(now_ms()) / 1000;
        l.push(format!(
            "Held call {} of {} · id {} · expires in {}:{:02}",
            n.map_or(1, |n| n + 1),
            self.pending.len(),
            clean(&a.id),
            left / 60,
            left % 60
        ));
        l.push(format!("  tool       {}", clean(&a.tool)));
        l.push(format!("  session    {}", clean(&a.session)));
        l.push(format!("  legs       {}", legs(p.legs)));
        l.push(format!("  reasons    {}", clean(&a.reasons.join(", "))));
        let args = serde_json::to_string_pretty(&a.arguments).unwrap_or_default();
        let lines: Vec<&str> = args.lines().collect();
        for (i, line) in lines.iter().take(MAX_ARG_LINES).enumerate() {
            let head = if i == 0 {
                "  arguments  "
            } else {
                "             "
            };
            l.push(format!("{head}{}", clean(line)));
        }
        if lines.len() > MAX_ARG_LINES {
            l.push(format!(
                "             ... {} more lines (`gatewayd approvals list --json` shows them all)",
                lines.len() - MAX_ARG_LINES
            ));
        }
        l.push(format!("  sha256     {}", clean(&a.args_sha256)));
    }
}

/// The session's legs in words.
fn legs(l: Option<Legs>) -> String {
    let Some(l) = l else {
        return "(the session is closed)".into();
    };
    let yn = |b: bool| if b { "yes" } else { "no" };
    let mut s = format!(
        "untrusted: {}  private: {}  egress: {}",
        yn(l.untrusted),
        yn(l.private),
        yn(l.egress)
    );
    if l.tripped() {
        s.push_str("  (Rule of Two tripped: untrusted input and private data both seen)");
    }
    s
}

/// `s` safe to print on a terminal: control characters (C0, DEL, C1) and the invisible
/// direction and width marks become `\u{..}`, so no text from an agent moves the cursor,
/// rewrites the screen or hides itself.
pub(super) fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            let hidden = matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}');
            if c.is_control() || hidden {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn now_ms() -> u64 {
    use gatewayd_core::clock::Clock as _;
    gatewayd_core::clock::SystemClock.now_ms()
}
