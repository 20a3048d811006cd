//! A durable record made ready for the sinks ([`Exported`]), on the audit writer's thread,
//! with the other records of the same write ([`Durable`]).
use std::sync::Arc;

use super::{Item, json, ocsf};
use gatewayd_core::audit::{Decision as AD, Record, Source};

/// A durable record on its way to the sinks: its fields but `detail` (no sink reads it apart
/// from the line) and its exported JSON line ([`json`]). The records the audit writer made
/// durable together are made ready together, on the writer's thread, into one [`Durable`]
/// that they share: their texts in one buffer, their other fields in one list. They are made
/// while the records and the log's lines are in that CPU's cache, and the records are freed
/// there. With glibc's malloc every block allocated on one thread and freed on another costs
/// both threads (the arena's lock, then consolidating on the writer's next allocations);
/// freeing each record's dozen strings on the exporters' threads was the largest part of
/// what export cost a decision, and two blocks per record (the text, its `Arc`) still showed
/// in the writer's profile (docs/FLEET.md).
#[derive(Debug, Clone)]
pub struct Exported {
    durable: Arc<Durable>,
    at: usize,
}

/// The records of one write of the audit log, ready for the sinks.
#[derive(Debug)]
pub(super) struct Durable {
    /// For each record, its exported line, then each of [`Text`]'s other fields.
    text: String,
    records: Vec<Fields>,
}

/// One record's fields, but those in [`Durable::text`] (where they end).
#[derive(Debug)]
struct Fields {
    seq: u64,
    source: Source,
    decision: AD,
    class: Option<ocsf::Class>,
    /// Where the record's text starts in `text`, and where each of [`Text`]'s fields ends.
    start: usize,
    ends: [usize; Text::COUNT],
    has_tool: bool,
    has_hook: bool,
}

/// The text fields of an [`Exported`], in the order [`Durable::text`] holds them.
#[derive(Debug, Clone, Copy)]
enum Text {
    Line,
    Prev,
    Hash,
    Ts,
    Session,
    Reason,
    Tool,
    Hook,
}

impl Text {
    const COUNT: usize = 8;
}

impl Durable {
    /// The records of one write, each with its line in the log, from the host whose id is
    /// `host_json` ([`json::host_json`]). Each record's class is worked out once, in the
    /// first pass, which also sizes the text; the second writes it.
    pub(super) fn new(written: &[(Record, String)], host_json: &str) -> Durable {
        let mut size = 0;
        let records: Vec<Fields> = written
            .iter()
            .map(|(r, logged)| {
                let f = Fields::of(r);
                size += json::record_line_len(f.ocsf(), logged, host_json)
                    + text_fields(r).iter().map(|t| t.len()).sum::<usize>();
                f
            })
            .collect();
        let mut d = Durable {
            text: String::with_capacity(size),
            records,
        };
        for ((r, logged), f) in written.iter().zip(&mut d.records) {
            f.start = d.text.len();
            json::write_record_line(&mut d.text, f.ocsf(), logged, host_json);
            f.ends = [d.text.len(); Text::COUNT];
            for (end, field) in f.ends[1..].iter_mut().zip(text_fields(r)) {
                d.text.push_str(field);
                *end = d.text.len();
            }
        }
        d
    }

    /// Each record, as the sinks take it.
    pub(super) fn items(self) -> impl Iterator<Item = Item> {
        let n = self.records.len();
        let durable = Arc::new(self);
        (0..n).map(move |at| {
            Item::Record(Exported {
                durable: durable.clone(),
                at,
            })
        })
    }
}

impl Fields {
    /// `r`'s fields, its text not yet written.
    fn of(r: &Record) -> Fields {
        Fields {
            seq: r.seq,
            source: r.source,
            decision: r.decision,
            class: ocsf::class(r),
            start: 0,
            ends: [0; Text::COUNT],
            has_tool: r.tool.is_some(),
            has_hook: r.hook.is_some(),
        }
    }

    /// Its OCSF attributes' JSON, when a class fits.
    fn ocsf(&self) -> Option<&'static str> {
        self.class.map(|c| ocsf::attributes_json(c, self.decision))
    }
}

/// `r`'s text fields after its line, in [`Text`]'s order.
fn text_fields(r: &Record) -> [&str; Text::COUNT - 1] {
    [
        &r.prev,
        &r.hash,
        &r.ts,
        &r.session,
        &r.reason,
        r.tool.as_deref().unwrap_or(""),
        r.hook.as_deref().unwrap_or(""),
    ]
}

impl Exported {
    /// `record` alone, logged as `logged` (its line in the log, no newline), from the host
    /// whose id is `host_json` ([`json::host_json`]).
    pub fn new(record: Record, logged: String, host_json: &str) -> Exported {
        let durable = Durable::new(&[(record, logged)], host_json);
        Exported {
            durable: Arc::new(durable),
            at: 0,
        }
    }

    fn fields(&self) -> &Fields {
        &self.durable.records[self.at]
    }

    fn text(&self, field: Text) -> &str {
        let f = self.fields();
        let i = field as usize;
        let start = if i == 0 { f.start } else { f.ends[i - 1] };
        self.durable.text.get(start..f.ends[i]).unwrap_or("")
    }

    /// Its exported JSON line.
    pub(super) fn line(&self) -> &str {
        self.text(Text::Line)
    }
    pub(super) fn seq(&self) -> u64 {
        self.fields().seq
    }
    pub(super) fn prev(&self) -> &str {
        self.text(Text::Prev)
    }
    pub(super) fn hash(&self) -> &str {
        self.text(Text::Hash)
    }
    pub(super) fn ts(&self) -> &str {
        self.text(Text::Ts)
    }
    pub(super) fn source(&self) -> Source {
        self.fields().source
    }
    pub(super) fn session(&self) -> &str {
        self.text(Text::Session)
    }
    pub(super) fn decision(&self) -> AD {
        self.fields().decision
    }
    pub(super) fn reason(&self) -> &str {
        self.text(Text::Reason)
    }
    pub(super) fn tool(&self) -> Option<&str> {
        self.fields().has_tool.then(|| self.text(Text::Tool))
    }
    pub(super) fn hook(&self) -> Option<&str> {
        self.fields().has_hook.then(|| self.text(Text::Hook))
    }
    /// Its OCSF class, if one fits.
    pub(super) fn class(&self) -> Option<ocsf::Class> {
        self.fields().class
    }
}
