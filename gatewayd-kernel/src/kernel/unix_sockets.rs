//! A session's entries in `UNIX_PATHS` and `UNIX_NAMES`: the Unix sockets outside the session
//! its policy lets the agent reach (`network.unix`). Added with the session's other entries,
//! removed with them, and found by scanning when a session's owner died without removing them.
use aya::maps::MapError;
use gateway_common::{MAX_UNIX, SessionInode, UnixName};

use super::{
    KernelError, KernelSpec,
    maps::{SetMaps, UNIX_CAPACITY, insert_err},
};

/// One session's keys in the two maps.
#[derive(Debug, Clone, Default)]
pub(crate) struct UnixKeys {
    paths: Vec<SessionInode>,
    names: Vec<UnixName>,
}

impl UnixKeys {
    /// The keys of session `id` for `spec`; more than [`MAX_UNIX`] entries is an error.
    pub(crate) fn of(id: u64, spec: &KernelSpec) -> Result<UnixKeys, KernelError> {
        let count = spec.unix_paths.len() + spec.unix_names.len();
        if count > MAX_UNIX as usize {
            return Err(KernelError::TooMany {
                what: "network.unix entries",
                count,
                limit: MAX_UNIX,
            });
        }
        Ok(UnixKeys {
            paths: spec
                .unix_paths
                .iter()
                .map(|p| SessionInode {
                    session: id,
                    dev: p.key.dev,
                    ino: p.key.ino,
                })
                .collect(),
            // Names longer than the kernel's limit are refused with the policy.
            names: spec
                .unix_names
                .iter()
                .filter_map(|n| UnixName::new(id, n))
                .collect(),
        })
    }

    /// Session `id`'s keys found in the maps (a session whose owner died).
    pub(crate) fn scan(m: &SetMaps, id: u64) -> UnixKeys {
        UnixKeys {
            paths: m
                .unix_paths
                .keys()
                .flatten()
                .filter(|k| k.session == id)
                .collect(),
            names: m
                .unix_names
                .keys()
                .flatten()
                .filter(|k| k.session == id)
                .collect(),
        }
    }

    /// Inserts every key.
    pub(crate) fn insert(&self, m: &mut SetMaps) -> Result<(), KernelError> {
        for k in &self.paths {
            m.unix_paths
                .insert(k, 1, 0)
                .map_err(insert_err("UNIX_PATHS", UNIX_CAPACITY))?;
        }
        for k in &self.names {
            m.unix_names
                .insert(k, 1, 0)
                .map_err(insert_err("UNIX_NAMES", UNIX_CAPACITY))?;
        }
        Ok(())
    }

    /// Removes every key; each result goes to `note` (map name, result).
    pub(crate) fn remove(
        &self,
        m: &mut SetMaps,
        note: &mut dyn FnMut(&'static str, Result<(), MapError>),
    ) {
        for k in &self.paths {
            note("UNIX_PATHS", m.unix_paths.remove(k));
        }
        for k in &self.names {
            note("UNIX_NAMES", m.unix_names.remove(k));
        }
    }
}
