//! The cost of many sessions sharing one program set, measured the same way on this host
//! (`cargo xtask bench`, [`run_host`]) and in the QEMU guest (its init script runs
//! [`GUEST_SCRIPT`] and prints `BENCH sessions ...` / `BENCH start ...` lines, which
//! `vm::report` hands to [`Results::from_lines`]):
//!
//! - `open()` of a 6-deep path by a process outside every agent, with 0, 1, 8 and 32 live
//!   sessions (idle agents under `gatewayd run`);
//! - the agent's own `open()` with 1 session (its own) and with 32 (31 others live);
//! - the start time of sessions while the programs are pinned (`startup_ms` of their
//!   `session_start` records, `program_set.open_ms`, the kernel layer's part of it, and its
//!   steps, `program_set.phases_ms`).
//!
//! Each `open()` figure is the best batch (`gw-testagent openbest`) of the best of the rounds:
//! on a busy machine (or under TCG) load only slows batches down. Sessions are started one
//! after another, each once the previous one has recorded its start.
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use crate::util::{self, Bins};

/// The live-session counts the outside figure is taken at.
const OUTSIDE_AT: [u32; 4] = [0, 1, 8, 32];
/// The session counts the inside figure is taken at.
const INSIDE_AT: [u32; 2] = [1, 32];
/// The steps of a session start, in order (`program_set.phases_ms`).
const PHASES: [&str; 7] = ["lock", "status", "load", "maps", "clean", "sweep", "add"];
/// How far (%) a figure may be from its reference and still meet a goal of the issue.
const WITHIN_PCT: f64 = 2.0;
/// The session start goal with the programs pinned, ms.
const START_GOAL_MS: f64 = 20.0;

/// Where an `open()` loop ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Outside every agent.
    Outside,
    /// Inside an agent (under `gatewayd run`).
    Inside,
}

/// One figure: where the loop ran, with how many live sessions, ns per `open()`, and ns
/// per `stat()` of the same path in batches alternating with the `open()` ones.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Figure {
    place: Place,
    sessions: u32,
    ns: f64,
    stat: Option<f64>,
}

/// `N` in `... stat N ns, ...` (`gw-testagent openbest`).
fn stat_ns(line: &str) -> Option<f64> {
    let mut words = line.split_whitespace();
    words.find(|w| *w == "stat")?;
    words.next()?.parse().ok()
}

/// Parses `sessions N outside|inside <openbest output>` (the guest's `BENCH ` lines).
fn parse(line: &str) -> Option<Figure> {
    let mut words = line.split_whitespace();
    if words.next()? != "sessions" {
        return None;
    }
    let sessions = words.next()?.parse().ok()?;
    let place = match words.next()? {
        "inside" => Place::Inside,
        "outside" => Place::Outside,
        _ => return None,
    };
    if words.next()? != "OK" {
        return None;
    }
    Some(Figure {
        place,
        sessions,
        ns: util::ns_each(line)?,
        stat: stat_ns(line),
    })
}

/// One start with the programs pinned: the whole start, the kernel layer's part, its steps.
#[derive(Debug, Clone, PartialEq)]
struct Start {
    total_ms: f64,
    open_ms: f64,
    phases: serde_json::Value,
}

/// The start of a `session_start` audit record, if the set was found pinned.
fn start_of(record: &serde_json::Value) -> Option<Start> {
    let d = &record["detail"];
    if record["reason"] != "session_start" || d["program_set"]["adopted"] != true {
        return None;
    }
    Some(Start {
        total_ms: d["startup_ms"].as_f64()?,
        open_ms: d["program_set"]["open_ms"].as_f64()?,
        phases: d["program_set"]["phases_ms"].clone(),
    })
}

/// Whether a guest `BENCH ` line (prefix stripped) belongs to this bench.
pub(crate) fn is_line(line: &str) -> bool {
    line.starts_with("sessions ") || line.starts_with("start ")
}

/// The (best, median, worst) of `v`; `None` when empty.
fn spread(v: &mut [f64]) -> Option<(f64, f64, f64)> {
    v.sort_by(f64::total_cmp);
    Some((*v.first()?, v[v.len() / 2], *v.last()?))
}

/// `ns / reference - 1` in %.
fn pct(ns: f64, reference: f64) -> f64 {
    (ns / reference - 1.0) * 100.0
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

/// Every figure and start of one run of the bench.
#[derive(Debug, Default)]
pub(crate) struct Results {
    figs: Vec<Figure>,
    starts: Vec<Start>,
    /// On the host: ms from spawning `gatewayd run` to its `session_start` record on disk
    /// (process start, policy, audit log, the start itself; polled every 2 ms).
    wall_ms: Vec<f64>,
}

impl Results {
    /// Reads the guest's `BENCH sessions ...` and `BENCH start <session_start record>` lines
    /// (prefix stripped; other lines are ignored).
    pub(crate) fn from_lines(lines: &[String]) -> Results {
        Results {
            figs: lines.iter().filter_map(|l| parse(l)).collect(),
            starts: lines
                .iter()
                .filter_map(|l| l.strip_prefix("start "))
                .filter_map(|json| serde_json::from_str(json).ok())
                .filter_map(|v| start_of(&v))
                .collect(),
            wall_ms: Vec::new(),
        }
    }

    fn best(&self, place: Place, sessions: u32) -> Option<f64> {
        self.figs
            .iter()
            .filter(|f| f.place == place && f.sessions == sessions)
            .map(|f| f.ns)
            .reduce(f64::min)
    }

    /// The lowest `open()` / `stat()` of the figures at `place` with `sessions`: how busy
    /// the machine was cancels out, since both were measured in alternate batches.
    fn normalized(&self, place: Place, sessions: u32) -> Option<f64> {
        self.figs
            .iter()
            .filter(|f| f.place == place && f.sessions == sessions)
            .filter_map(|f| f.stat.map(|st| f.ns / st))
            .reduce(f64::min)
    }

    /// The figure the goals are judged on: normalized when every figure has its `stat()`.
    fn judged(&self, place: Place, sessions: u32) -> Option<f64> {
        if self.figs.iter().all(|f| f.stat.is_some()) {
            self.normalized(place, sessions)
        } else {
            self.best(place, sessions)
        }
    }

    /// What the bench should have measured and did not (`None`: every figure is there).
    pub(crate) fn missing(&self) -> Option<String> {
        let mut missing: Vec<String> = OUTSIDE_AT
            .iter()
            .map(|&n| (Place::Outside, n))
            .chain(INSIDE_AT.iter().map(|&n| (Place::Inside, n)))
            .filter(|&(place, n)| self.best(place, n).is_none())
            .map(|(place, n)| format!("{place:?} at {n} sessions"))
            .collect();
        if self.starts.is_empty() {
            missing.push("a session start with the programs pinned".into());
        }
        (!missing.is_empty()).then(|| missing.join(", "))
    }

    /// Prints the figures, their ratios and the issue's goals: outside at 32 sessions within
    /// 2% of 0 sessions; inside at 32 within 2% of 1; a start with the programs pinned
    /// within 20 ms (median).
    pub(crate) fn print(&self, label: &str) {
        println!(
            "sessions bench, {label}: one program set for every session; open() of a 6-deep \
             path, ns (best batch of every round) and its ratio"
        );
        let base = self.best(Place::Outside, 0);
        let mut row = String::from("  outside every agent (ratio to 0 sessions):");
        for n in OUTSIDE_AT {
            if let (Some(ns), Some(b)) = (self.best(Place::Outside, n), base) {
                let _ = write!(row, "  {n} sessions {ns:.0} ({:.3})", ns / b);
            }
        }
        println!("{row}");
        let one = self.best(Place::Inside, 1);
        let mut row = String::from("  the agent's own (ratio to 1 session):    ");
        for n in INSIDE_AT {
            if let (Some(ns), Some(b)) = (self.best(Place::Inside, n), one) {
                let _ = write!(row, "  {n} sessions {ns:.0} ({:.3})", ns / b);
            }
        }
        println!("{row}");
        let mut row = String::from(
            "  open()/stat() of alternate batches (machine load cancels out), ratio to 0 / 1 \
             session(s): outside",
        );
        for (place, at, reference) in [
            (Place::Outside, &OUTSIDE_AT[..], 0),
            (Place::Inside, &INSIDE_AT[..], 1),
        ] {
            if place == Place::Inside {
                row.push_str("; the agent's own");
            }
            for &n in at {
                if let (Some(x), Some(r)) =
                    (self.normalized(place, n), self.normalized(place, reference))
                {
                    let _ = write!(row, "  {n}: {x:.3} ({:.3})", x / r);
                }
            }
        }
        println!("{row}");
        let start = self.print_starts();
        self.print_goals(start);
    }

    /// The session starts' figures; their (best, median, worst) total, ms.
    fn print_starts(&self) -> Option<(f64, f64, f64)> {
        let mut total: Vec<f64> = self.starts.iter().map(|s| s.total_ms).collect();
        let mut open: Vec<f64> = self.starts.iter().map(|s| s.open_ms).collect();
        let start = spread(&mut total);
        if let (Some((best, med, worst)), Some((_, omed, oworst))) = (start, spread(&mut open)) {
            println!(
                "  session start with the programs pinned ({} starts): median {med:.1} ms \
                 (best {best:.1}, worst {worst:.1}); opening the set and adding the session: \
                 median {omed:.2} ms (worst {oworst:.2})",
                self.starts.len()
            );
            let mut row = String::from("    its steps, median ms:");
            for phase in PHASES {
                let mut v: Vec<f64> = self
                    .starts
                    .iter()
                    .filter_map(|s| s.phases[phase].as_f64())
                    .collect();
                if let Some((_, m, _)) = spread(&mut v) {
                    let _ = write!(row, " {phase} {m:.2}");
                }
            }
            println!("{row}");
        }
        if let Some((best, med, worst)) = spread(&mut self.wall_ms.clone()) {
            println!(
                "    from spawning gatewayd to its session_start record on disk: median \
                 {med:.1} ms (best {best:.1}, worst {worst:.1})"
            );
        }
        start
    }

    /// The issue's goals, each with its verdict.
    fn print_goals(&self, start: Option<(f64, f64, f64)>) {
        let on = if self.figs.iter().all(|f| f.stat.is_some()) {
            " (open()/stat())"
        } else {
            ""
        };
        if let (Some(b), Some(at32)) = (
            self.judged(Place::Outside, 0),
            self.judged(Place::Outside, 32),
        ) {
            let p = pct(at32, b);
            println!(
                "  goal: outside cost at 32 sessions within {WITHIN_PCT}% of 0 sessions{on}: {p:+.1}%: {}",
                verdict(p.abs() <= WITHIN_PCT)
            );
        }
        if let (Some(b), Some(at32)) = (
            self.judged(Place::Inside, 1),
            self.judged(Place::Inside, 32),
        ) {
            let p = pct(at32, b);
            println!(
                "  goal: inside cost independent of the number of sessions (32 vs 1, within \
                 {WITHIN_PCT}%){on}: {p:+.1}%: {}",
                verdict(p.abs() <= WITHIN_PCT)
            );
        }
        if let Some((_, med, _)) = start {
            println!(
                "  goal: session start <= {START_GOAL_MS} ms with the programs pinned: median \
                 {med:.1} ms: {}",
                verdict(med <= START_GOAL_MS)
            );
        }
    }
}

/// The guest init script's part: runs after the privileged suite and the other bench, with
/// no session live. `/tmp/bench/a/b/c/d/f` is the 6-deep file and `/tmp/bench/p.json` the
/// policy that bench wrote; the set is pinned (only starts that found it pinned count).
/// 2 rounds, each growing to 32 live sessions (about a minute under TCG). (A figure with no
/// set pinned was tried: taken once, seconds apart from the others, it swung by more than
/// the set's cost under TCG on a busy host.)
pub(crate) const GUEST_SCRIPT: &str = r#"echo "STAGE sessions bench"
F=/tmp/bench/a/b/c/d/f
ob() { /gw-testagent openbest $F 1000 20; }
out() { echo "BENCH sessions $1 outside $(ob)"; }
inside() { echo "BENCH sessions $1 inside $(/gatewayd run --user root --policy /tmp/bench/p.json --audit /tmp/bench/in$round-$1.jsonl -- /gw-testagent openbest $F 1000 20 2>/dev/null)"; }
grow() {
  while [ $live -lt $1 ]; do
    a=/tmp/bench/r$round-$live.jsonl
    /gatewayd run --user root --policy /tmp/bench/p.json --audit $a -- /gw-testagent sleep 900 >/dev/null 2>&1 &
    pids="$pids $!"
    t=0
    while ! grep -q session_start $a 2>/dev/null; do
      t=$((t+1)); [ $t -gt 1500 ] && { echo "BENCH sessions: a session did not start"; break; }
      sleep 0.02
    done
    live=$((live+1))
  done
}
for round in 1 2; do
  live=0; pids=""
  out 0; inside 1
  grow 1; out 1
  grow 8; out 8
  grow 31; inside 32
  grow 32; out 32
  kill $pids; wait $pids
done
grep -h '"session_start"' /tmp/bench/r*.jsonl /tmp/bench/in*.jsonl | sed 's/^/BENCH start /'
"#;

/// Live `gatewayd run` sessions whose agents sleep.
struct Sleepers {
    children: Vec<Child>,
    dir: PathBuf,
    round: u32,
    /// Each start's ms from spawn to its `session_start` record on disk.
    wall_ms: Vec<f64>,
}

impl Sleepers {
    /// Starts sessions, one after another, until `n` are live.
    fn grow(&mut self, bins: &Bins, policy: &Path, n: usize) -> anyhow::Result<()> {
        while self.children.len() < n {
            let audit = self
                .dir
                .join(format!("r{}-{}.jsonl", self.round, self.children.len()));
            let mut child = Command::new(&bins.gatewayd);
            child
                .args(["run", "--user", "root", "--policy"])
                .arg(policy)
                .arg("--audit")
                .arg(&audit)
                .arg("--")
                .arg(&bins.testagent)
                .args(["sleep", "900"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let t0 = Instant::now();
            let child = child.spawn()?;
            self.children.push(child);
            while !std::fs::read_to_string(&audit)
                .unwrap_or_default()
                .contains("\"session_start\"")
            {
                if t0.elapsed() > Duration::from_secs(30) {
                    bail!("a session did not start within 30 s ({})", audit.display());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            self.wall_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
        Ok(())
    }

    fn stop(&mut self) {
        for c in &self.children {
            if let Ok(pid) = i32::try_from(c.id()) {
                // SAFETY: a plain signal to our own child (gatewayd ends its session on it).
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
        for mut c in self.children.drain(..) {
            let _ = c.wait();
        }
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every `session_start` record in the audit logs under `dir`, as the guest prints them.
fn start_lines(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)?.flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        out.extend(
            text.lines()
                .filter(|l| l.contains("\"session_start\""))
                .map(|l| format!("start {l}")),
        );
    }
    Ok(out)
}

/// The host half: the guest's steps, on this machine's kernel (no figure without the set:
/// other sessions on this host may be using it).
pub(crate) fn run_host(bins: &Bins, policy: &Path, work: &Path) -> anyhow::Result<()> {
    let logs = work.join("sessions");
    std::fs::create_dir_all(&logs)?;
    let file = work.join("a/b/c/d/f");
    std::fs::create_dir_all(file.parent().context("no parent")?)?;
    std::fs::write(&file, "x")?;
    let file = file.to_str().context("path")?.to_string();
    let openbest = |inside: bool, sessions: u32, round: u32| -> anyhow::Result<String> {
        let mut cmd = if inside {
            let mut c = Command::new(&bins.gatewayd);
            c.args(["run", "--user", "root", "--policy"])
                .arg(policy)
                .arg("--audit")
                .arg(logs.join(format!("in{round}-{sessions}.jsonl")))
                .arg("--")
                .arg(&bins.testagent);
            c
        } else {
            Command::new(&bins.testagent)
        };
        let out = cmd.args(["openbest", &file, "2000", "50"]).output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("OK "))
            .with_context(|| format!("openbest: {text}{}", String::from_utf8_lossy(&out.stderr)))?;
        let place = if inside { "inside" } else { "outside" };
        Ok(format!("sessions {sessions} {place} {line}"))
    };
    let mut lines = Vec::new();
    let mut wall_ms = Vec::new();
    for round in 1..=3 {
        let mut s = Sleepers {
            children: Vec::new(),
            dir: logs.clone(),
            round,
            wall_ms: Vec::new(),
        };
        lines.push(openbest(false, 0, round)?);
        lines.push(openbest(true, 1, round)?);
        for (n, inside) in [(1u32, false), (8, false), (31, true), (32, false)] {
            s.grow(bins, policy, n as usize)?;
            let sessions = if inside { n + 1 } else { n };
            lines.push(openbest(inside, sessions, round)?);
        }
        s.stop();
        wall_ms.append(&mut s.wall_ms);
    }
    lines.extend(start_lines(&logs)?);
    let mut results = Results::from_lines(&lines);
    results.wall_ms = wall_ms;
    if let Some(m) = results.missing() {
        bail!("the sessions bench did not measure {m}");
    }
    println!();
    results.print("this host (its tier: see above)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = r#"{"reason":"session_start","detail":{"program_set":{"adopted":true,"open_ms":1.5,"phases_ms":{"add":0.5,"lock":0.1}},"startup_ms":3.25}}"#;

    #[test]
    fn guest_lines_parse() {
        let f = parse(
            "sessions 32 outside OK openbest: best of 20 batches of 1000: stat 9000 ns, open 15000 ns each",
        )
        .unwrap();
        assert_eq!(
            f,
            Figure {
                place: Place::Outside,
                sessions: 32,
                ns: 15000.0,
                stat: Some(9000.0),
            }
        );
        let inside = parse("sessions 1 inside OK openbest: best of 2 batches of 9, 9 ns each");
        assert_eq!(inside.unwrap().place, Place::Inside);
        assert_eq!(parse("bare OK openloop: 1 in a row, 9 ns each"), None);
        assert_eq!(parse("sessions x outside OK"), None);
        assert_eq!(
            parse("sessions 1 inside FAIL: 2 batches of 9, 9 ns each"),
            None
        );
    }

    #[test]
    fn only_starts_that_found_the_set_pinned_count() {
        let not_adopted = RECORD.replace("\"adopted\":true", "\"adopted\":false");
        let lines = [
            format!("start {RECORD}"),
            format!("start {not_adopted}"),
            "start {not json".to_string(),
        ];
        let r = Results::from_lines(&lines);
        assert_eq!(r.starts.len(), 1);
        assert_eq!((r.starts[0].total_ms, r.starts[0].open_ms), (3.25, 1.5));
        assert_eq!(r.starts[0].phases["add"], 0.5);
    }

    #[test]
    fn every_figure_must_be_there() {
        let mut lines: Vec<String> =
            OUTSIDE_AT
                .iter()
                .map(|n| format!("sessions {n} outside OK openbest: 1 batches of 1, 10 ns each"))
                .chain(INSIDE_AT.iter().map(|n| {
                    format!("sessions {n} inside OK openbest: 1 batches of 1, 20 ns each")
                }))
                .collect();
        assert!(Results::from_lines(&lines).missing().is_some(), "no start");
        lines.push(format!("start {RECORD}"));
        assert_eq!(Results::from_lines(&lines).missing(), None);
        lines.retain(|l| !l.starts_with("sessions 32 inside"));
        assert_eq!(
            Results::from_lines(&lines).missing().as_deref(),
            Some("Inside at 32 sessions")
        );
    }
}
