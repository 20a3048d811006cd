//! The program set's `status` map: what each program of [`PROGRAMS`] did when the set was
//! made (attached, or the stage it failed at and the kernel's answer), and the parent cgroup
//! the set was made for. bpffs holds no plain files, so this is a map of JSON texts, one per
//! slot: slot 0 the set's header, slot 1 + i program i's state.
use std::path::Path;

use aya::maps::{Array, Map, MapData};

use super::{
    KernelError, PieceStatus,
    maps::{self, map_err},
    programs::PROGRAMS,
};

/// Bytes of one slot of the `status` map (one program's state, as JSON).
const STATUS_BYTES: usize = 4096;
type StatusSlot = [u8; STATUS_BYTES];

/// The `status` map: slot 0 the set's header, slot 1 + i program i's state.
pub(crate) fn write_status(
    dir: &Path,
    parent_id: u64,
    status: &[PieceStatus],
) -> Result<(), KernelError> {
    let mut array: Array<MapData, StatusSlot> =
        Array::create(PROGRAMS.len() as u32 + 1, 0).map_err(map_err("status"))?;
    let header = serde_json::json!({
        "parent_cgroup_id": parent_id,
        "created_by": std::process::id(),
    });
    let mut slots = vec![header];
    for s in status {
        slots.push(match &s.result {
            Ok(()) => serde_json::json!({"program": s.program.name}),
            Err(e) => serde_json::json!({
                "program": s.program.name,
                "stage": e.stage(),
                "answer": e.answer(),
            }),
        });
    }
    for (i, v) in slots.iter().enumerate() {
        let mut slot = [0u8; STATUS_BYTES];
        let text = truncated(&v.to_string());
        slot[..text.len()].copy_from_slice(text.as_bytes());
        array.set(i as u32, slot, 0).map_err(map_err("status"))?;
    }
    let path = dir.join("status");
    array
        .pin(&path)
        .map_err(|source| KernelError::Pin { path, source })
}

/// JSON text cut to fit a slot (a long verifier log loses its end, the text stays JSON).
fn truncated(text: &str) -> String {
    if text.len() < STATUS_BYTES {
        return text.to_string();
    }
    let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    let answer = v["answer"].as_str().unwrap_or("");
    let mut cut = STATUS_BYTES / 2;
    while !answer.is_char_boundary(cut.min(answer.len())) {
        cut -= 1;
    }
    let mut v = v.clone();
    v["answer"] = format!("{}…", &answer[..cut.min(answer.len())]).into();
    v.to_string()
}

/// Reads the `status` map of the set in `dir`: the state of every program, provided the set
/// is complete (every map and every attached program's link pinned) and was made for the
/// parent cgroup `parent_id`.
pub(crate) fn read_status(dir: &Path, parent_id: u64) -> Result<Vec<PieceStatus>, KernelError> {
    let data = MapData::from_pin(dir.join("status")).map_err(map_err("status"))?;
    let array: Array<MapData, StatusSlot> =
        Array::try_from(Map::from_map_data(data).map_err(map_err("status"))?)
            .map_err(map_err("status"))?;
    let slot = |i: u32| -> Result<serde_json::Value, KernelError> {
        let raw = array.get(&i, 0).map_err(map_err("status"))?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        serde_json::from_slice(&raw[..end]).map_err(|_| KernelError::SetIncomplete {
            dir: dir.to_owned(),
            what: "its status map is not readable".into(),
        })
    };
    let incomplete = |what: String| KernelError::SetIncomplete {
        dir: dir.to_owned(),
        what,
    };
    if slot(0)?["parent_cgroup_id"].as_u64() != Some(parent_id) {
        return Err(incomplete(
            "it was made for a parent cgroup that is gone".into(),
        ));
    }
    for name in maps::PINNED {
        if !maps::pin_path(dir, name).exists() {
            return Err(incomplete(format!("map {name} is not pinned")));
        }
    }
    let mut status = Vec::new();
    for (i, program) in PROGRAMS.iter().enumerate() {
        let v = slot(i as u32 + 1)?;
        if v["program"] != program.name {
            return Err(incomplete(format!("no state for {}", program.name)));
        }
        let result = match v["stage"].as_str() {
            None => {
                // A recorder is pinned loaded and linked only while a session lives.
                let pinned = |o: &&str| {
                    if program.records_only() {
                        maps::prog_path(dir, o).exists()
                    } else {
                        maps::link_path(dir, o).exists()
                    }
                };
                if !program.object_programs().iter().any(pinned) {
                    return Err(incomplete(format!("{} has no pin", program.name)));
                }
                Ok(())
            }
            Some(stage) => Err(KernelError::NotInSet {
                program: program.name,
                stage: match stage {
                    "found" => "found",
                    "attached" => "attached",
                    _ => "loaded",
                },
                answer: v["answer"].as_str().unwrap_or("").to_string(),
            }),
        };
        status.push(PieceStatus { program, result });
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_answer_is_cut_and_stays_json() {
        let long = "x".repeat(STATUS_BYTES * 3);
        let text = serde_json::json!({"program": "lsm/bpf", "stage": "loaded", "answer": long})
            .to_string();
        let cut = truncated(&text);
        assert!(cut.len() < STATUS_BYTES, "{}", cut.len());
        let v: serde_json::Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(v["program"], "lsm/bpf");
        assert!(v["answer"].as_str().unwrap().ends_with('…'));
        let short = r#"{"program":"lsm/bpf"}"#;
        assert_eq!(truncated(short), short);
    }
}
