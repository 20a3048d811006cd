//! The OTLP/HTTP request written straight from the items, in protobuf's wire format: the
//! bytes prost writes for [`super::request`] (a test holds them to prost's, batch by batch),
//! without building the messages first. Building them copied each record's JSON line into
//! the message and prost copied it again into the body, and prost sized every nested message
//! again at each level; here each field is copied once, into the body, and each log record
//! is sized once.
//!
//! Protobuf (proto3), as prost writes it: fields in tag order; a scalar or a string that
//! has its default value (0, empty) is left out, but not inside a `oneof` (an `AnyValue`'s
//! value) and not a message that is set (a record's `body`); a field's key is the varint
//! `tag << 3 | wire type` (0 varint, 1 fixed 64 bits, 2 length-delimited).
use opentelemetry_proto::tonic::{common::v1::InstrumentationScope, resource::v1::Resource};
use prost::Message;

use super::{Fields, Item, Value, fields};

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;

/// An HTTP sink's encoder: the parts that never change, made once.
pub(in crate::daemon::export) struct Wire {
    /// `ResourceLogs.resource` (field 1), key and length included.
    resource: Vec<u8>,
    /// `ScopeLogs.scope` (field 1), key and length included.
    scope: Vec<u8>,
}

impl Wire {
    pub(in crate::daemon::export) fn new(
        resource: &Resource,
        scope: &InstrumentationScope,
    ) -> Wire {
        Wire {
            resource: message_field(1, resource),
            scope: message_field(1, scope),
        }
    }

    /// The `ExportLogsServiceRequest` of `batch`, made at `now` (ns since the epoch), at the
    /// end of `out`, from the returned offset on: one `ResourceLogs` holding one `ScopeLogs`
    /// holding the log records. The records are written in one pass, each straight after
    /// its fields are made and sized, behind room left for the two messages' heads, whose
    /// lengths are known only then; the heads are written last, just before the first
    /// record. (Made and sized in a first pass, a batch's fields were a list of half a
    /// megabyte, written and read again; made twice, they read each record twice.)
    pub(in crate::daemon::export) fn encode(
        &self,
        batch: &[Item],
        now: u64,
        out: &mut Vec<u8>,
    ) -> usize {
        let base = out.len();
        let room = self.resource.len() + self.scope.len() + 2 * MAX_LEN_KEY;
        out.resize(base + room, 0);
        for item in batch {
            let f = fields(item, now);
            // ScopeLogs.log_records (2)
            len_key(2, record_size(&f), out);
            write_record(&f, out);
        }
        let scope_logs = self.scope.len() + (out.len() - base - room);
        let resource_logs = self.resource.len() + field_size(2, scope_logs);
        let mut head = Vec::with_capacity(room);
        // ExportLogsServiceRequest.resource_logs (1)
        len_key(1, resource_logs, &mut head);
        head.extend_from_slice(&self.resource);
        // ResourceLogs.scope_logs (2)
        len_key(2, scope_logs, &mut head);
        head.extend_from_slice(&self.scope);
        let start = base + room - head.len();
        out[start..base + room].copy_from_slice(&head);
        start
    }
}

/// A length-delimited field's key and length at most: a key of one byte (tags below 16) and
/// a varint of a `u64`.
const MAX_LEN_KEY: usize = 1 + 10;

/// Field `tag` holding the message `m`: its key, its length and `m`, as prost writes it.
fn message_field(tag: u32, m: &impl Message) -> Vec<u8> {
    let mut out = Vec::new();
    len_key(tag, m.encoded_len(), &mut out);
    m.encode_raw(&mut out);
    out
}

/// A `LogRecord`'s fields, in tag order.
fn write_record(f: &Fields<'_>, out: &mut Vec<u8>) {
    if f.time_unix_nano != 0 {
        key(1, FIXED64, out);
        out.extend_from_slice(&f.time_unix_nano.to_le_bytes());
    }
    let severity = f.severity as i32;
    if severity != 0 {
        key(2, VARINT, out);
        varint(i64::from(severity) as u64, out);
    }
    string(3, f.severity_text, out);
    // body (5): an AnyValue, set.
    len_key(5, any_value_size(Value::Text(&f.body)), out);
    any_value(Value::Text(&f.body), out);
    for (k, v) in f.attributes() {
        // attributes (6): KeyValue { key (1), value (2): AnyValue }
        len_key(6, key_value_size(k, *v), out);
        string(1, k, out);
        len_key(2, any_value_size(*v), out);
        any_value(*v, out);
    }
    if f.observed_time_unix_nano != 0 {
        key(11, FIXED64, out);
        out.extend_from_slice(&f.observed_time_unix_nano.to_le_bytes());
    }
    string(12, f.event_name, out);
}

fn record_size(f: &Fields<'_>) -> usize {
    let fixed64 = |v: u64| if v == 0 { 0 } else { key_size(1) + 8 };
    let severity = i64::from(f.severity as i32) as u64;
    fixed64(f.time_unix_nano)
        + if severity == 0 {
            0
        } else {
            key_size(2) + varint_size(severity)
        }
        + string_size(3, f.severity_text)
        + field_size(5, any_value_size(Value::Text(&f.body)))
        + f.attributes()
            .iter()
            .map(|(k, v)| field_size(6, key_value_size(k, *v)))
            .sum::<usize>()
        + fixed64(f.observed_time_unix_nano)
        + string_size(12, f.event_name)
}

fn key_value_size(k: &str, v: Value<'_>) -> usize {
    string_size(1, k) + field_size(2, any_value_size(v))
}

/// An `AnyValue`'s one value: `string_value` (1) or `int_value` (3).
fn any_value(v: Value<'_>, out: &mut Vec<u8>) {
    match v {
        Value::Text(s) => {
            len_key(1, s.len(), out);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Int(n) => {
            key(3, VARINT, out);
            varint(n, out);
        }
    }
}

fn any_value_size(v: Value<'_>) -> usize {
    match v {
        Value::Text(s) => field_size(1, s.len()),
        Value::Int(n) => key_size(3) + varint_size(n),
    }
}

/// A string field, left out when empty.
fn string(tag: u32, s: &str, out: &mut Vec<u8>) {
    if !s.is_empty() {
        len_key(tag, s.len(), out);
        out.extend_from_slice(s.as_bytes());
    }
}

fn string_size(tag: u32, s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        field_size(tag, s.len())
    }
}

/// A length-delimited field's key and length (its `len` bytes follow).
fn len_key(tag: u32, len: usize, out: &mut Vec<u8>) {
    key(tag, LEN, out);
    varint(len as u64, out);
}

/// A length-delimited field's whole size: key, length, and the `len` bytes.
fn field_size(tag: u32, len: usize) -> usize {
    key_size(tag) + varint_size(len as u64) + len
}

fn key(tag: u32, wire_type: u64, out: &mut Vec<u8>) {
    varint(u64::from(tag) << 3 | wire_type, out);
}

fn key_size(tag: u32) -> usize {
    varint_size(u64::from(tag) << 3)
}

/// Base 128, least significant group first, the high bit set on all but the last byte.
fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_size(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_what_prost_writes() {
        for v in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut ours = Vec::new();
            varint(v, &mut ours);
            let mut theirs = Vec::new();
            prost::encoding::encode_varint(v, &mut theirs);
            assert_eq!(ours, theirs, "{v}");
            assert_eq!(varint_size(v), theirs.len(), "{v}");
        }
    }
}
