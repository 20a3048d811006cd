//! Protection by name (`sandbox.protected_names`): a dentry whose own name matches one of the
//! session's patterns (`NAMES`) and that lies under a root marked `ROOT_NAMES` (the policy's
//! `root` and writable roots) is protected, whether it existed when the session started or
//! was made since, by anyone. The file programs ask this after their inode checks found
//! nothing (`files::check_name`); the walk up to a root is taken only for a name that
//! matches.
use gateway_common::{Config, MAX_NAME_PATTERNS, NAME_PART_MAX, ROOT_NAMES};

use crate::{
    maps::NAMES,
    read,
    session::{Session, Subject},
};

/// `struct qstr` puts `u32 len` 4 bytes before its `name` pointer on little-endian targets
/// (`hash_len`: hash in the low half, len in the high one).
const QSTR_LEN_BEFORE_NAME: u64 = 4;

/// Whether the dentry's own name matches one of the session's patterns: `Ok(Some(index))`
/// with the pattern's index. Err: something could not be read.
#[inline(always)]
pub fn matching_pattern(
    cfg: &Config,
    session: &Session,
    dentry: *const u8,
) -> Result<Option<u32>, ()> {
    // SAFETY: a non-null pointer from a map lookup, read through at once; values are
    // replaced whole (the map is not preallocated), never changed in place.
    let Some(patterns) = NAMES.get_ptr(&session.id).map(|p| unsafe { &*p }) else {
        // The session says it has patterns but they are gone: fail closed.
        return Err(());
    };
    let name: *const u8 = read(dentry, cfg.off_dentry_name)?;
    let len: u32 = read(dentry, cfg.off_dentry_name - QSTR_LEN_BEFORE_NAME)?;
    if name.is_null() || len == 0 {
        return Err(());
    }
    // A name of 40 bytes or fewer is inline in the dentry, a longer one is allocated: 32
    // bytes from its start are always there.
    let head: [u64; 4] = read(name, 0)?;
    let tail: [u64; 4] = if len >= NAME_PART_MAX {
        read(name, u64::from(len - NAME_PART_MAX))?
    } else {
        gateway_common::right_aligned(&head, len)
    };
    for i in 0..MAX_NAME_PATTERNS {
        if i >= patterns.count {
            break;
        }
        if let Some(p) = patterns.patterns.get(i as usize)
            && p.matches(&head, &tail, len)
        {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// Whether the dentry is protected by name: its name matches and it lies under one of the
/// session's `ROOT_NAMES` roots. The event then names the pattern's index
/// (`protected_ino`).
#[inline(always)]
pub fn protected_by_name(
    cfg: &Config,
    session: &Session,
    dentry: *const u8,
    hit: &mut Subject,
) -> Result<bool, ()> {
    if session.info.names == 0 {
        return Ok(false);
    }
    let Some(index) = matching_pattern(cfg, session, dentry)? else {
        return Ok(false);
    };
    // Under a root: the walk up from the dentry's parent finds one granting `ROOT_NAMES`.
    match crate::files::walk_to_root(cfg, session, dentry, ROOT_NAMES)? {
        true => {
            hit.protected_ino = u64::from(index);
            Ok(true)
        }
        false => Ok(false),
    }
}
