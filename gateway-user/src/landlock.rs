//! Landlock, probed by asking the kernel (the `landlock_create_ruleset` version query), not by
//! reading a file.

/// The Landlock ABI version this kernel offers, or the reason there is none.
pub fn abi_version() -> Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no attribute pointer and returns an int.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS) => "not built into this kernel (ENOSYS)".into(),
            Some(libc::EOPNOTSUPP) => "built in but not enabled at boot (EOPNOTSUPP)".into(),
            _ => e.to_string(),
        });
    }
    Ok(v as u32)
}
