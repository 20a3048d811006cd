//! A session's entries in `READ_ONLY_NAMES`: its read-only paths that did not exist when it
//! started, by their directory and name, which the BPF LSM file programs refuse to let the
//! agent make (`read_only_name`). Added with the session's other entries, removed with them,
//! and found by scanning when a session's owner died without removing them.
use aya::maps::MapError;
use gateway_common::{DirName, MAX_READ_ONLY_NAMES_TOTAL};

use super::{
    KernelError, KernelSpec,
    maps::{SetMaps, insert_err},
};

/// One session's keys, each with its index in the spec's `read_only_names` (the map's value).
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadOnlyNames {
    keys: Vec<(DirName, u32)>,
}

impl ReadOnlyNames {
    /// The keys of session `id` for `spec` (the spec holds at most
    /// [`gateway_common::MAX_READ_ONLY_NAMES`], each a name the map can hold).
    pub(crate) fn of(id: u64, spec: &KernelSpec) -> ReadOnlyNames {
        ReadOnlyNames {
            keys: spec
                .read_only_names
                .iter()
                .zip(0u32..)
                .filter_map(|(n, i)| Some((DirName::new(id, n.dir.dev, n.dir.ino, &n.name)?, i)))
                .collect(),
        }
    }

    /// Session `id`'s keys found in the map (a session whose owner died).
    pub(crate) fn scan(m: &SetMaps, id: u64) -> ReadOnlyNames {
        ReadOnlyNames {
            keys: m
                .read_only_names
                .keys()
                .flatten()
                .filter(|k| k.session == id)
                .map(|k| (k, 0))
                .collect(),
        }
    }

    /// Inserts every key.
    pub(crate) fn insert(&self, m: &mut SetMaps) -> Result<(), KernelError> {
        for (k, index) in &self.keys {
            m.read_only_names
                .insert(k, index, 0)
                .map_err(insert_err("READ_ONLY_NAMES", MAX_READ_ONLY_NAMES_TOTAL))?;
        }
        Ok(())
    }

    /// Removes every key; each result goes to `note` (map name, result).
    pub(crate) fn remove(
        &self,
        m: &mut SetMaps,
        note: &mut dyn FnMut(&'static str, Result<(), MapError>),
    ) {
        for (k, _) in &self.keys {
            note("READ_ONLY_NAMES", m.read_only_names.remove(k));
        }
    }
}
