//! Inflating gzip, zlib and raw deflate streams found under a decoding, with a cap on the
//! output (no zip bombs).
use std::{cell::RefCell, io::Read};

use flate2::{Decompress, FlushDecompress, Status};

/// Most bytes one compressed stream may inflate to.
pub(super) const MAX_INFLATE: usize = 1 << 20;

pub(super) const TOO_LARGE: &str = "compressed data that inflates beyond 1 MiB";

thread_local! {
    /// One inflate state per thread, reset between streams: allocating one (about 43 KiB)
    /// per attempt would cost more than the rest of the check.
    static INFLATER: RefCell<Option<Decompress>> = const { RefCell::new(None) };
}

/// Inflates `data` if it starts like a gzip or zlib stream or, when `raw`, like a raw
/// deflate stream. A corrupt or cut stream gives what inflated before the error; past
/// [`MAX_INFLATE`] it is an error.
pub(super) fn inflate(
    data: &[u8],
    raw: bool,
) -> Result<Option<(&'static str, Vec<u8>)>, &'static str> {
    let mut out = Vec::new();
    let layer = if data.starts_with(&[0x1f, 0x8b]) {
        let mut gz = flate2::read::GzDecoder::new(data).take(MAX_INFLATE as u64 + 1);
        let _partial_on_error = gz.read_to_end(&mut out);
        "gzip"
    } else if data.len() >= 3
        && data[0] & 0x0f == 8
        && data[0] >> 4 <= 7
        && u16::from_be_bytes([data[0], data[1]]).is_multiple_of(31)
    {
        with_inflater(true, data, &mut out);
        "zlib"
    } else if raw && raw_deflate_plausible(data) {
        with_inflater(false, data, &mut out);
        "deflate"
    } else {
        return Ok(None);
    };
    if out.len() > MAX_INFLATE {
        return Err(TOO_LARGE);
    }
    Ok((!out.is_empty()).then_some((layer, out)))
}

/// Binary data whose first block header is a valid one (a stored block's length checks).
fn raw_deflate_plausible(data: &[u8]) -> bool {
    if data.len() < 4 || std::str::from_utf8(data).is_ok() {
        return false;
    }
    match (data[0] >> 1) & 3 {
        0 => data.len() >= 5 && [data[1], data[2]] == [!data[3], !data[4]],
        3 => false,
        _ => true,
    }
}

fn with_inflater(zlib_header: bool, data: &[u8], out: &mut Vec<u8>) {
    let mut d = INFLATER
        .with(|c| c.borrow_mut().take())
        .unwrap_or_else(|| Decompress::new(zlib_header));
    d.reset(zlib_header);
    while out.len() <= MAX_INFLATE {
        out.reserve(out.len().clamp(256, 64 << 10));
        let (read, wrote) = (d.total_in(), d.total_out());
        let rest = data.get(read as usize..).unwrap_or_default();
        match d.decompress_vec(rest, out, FlushDecompress::None) {
            Ok(Status::StreamEnd) | Err(_) => break,
            Ok(_) if d.total_in() == read && d.total_out() == wrote => break,
            Ok(_) => {}
        }
    }
    INFLATER.with(|c| *c.borrow_mut() = Some(d));
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn compress(level: u32, data: &[u8], kind: &str) -> Vec<u8> {
        let c = flate2::Compression::new(level);
        match kind {
            "gzip" => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), c);
                e.write_all(data).expect("write");
                e.finish().expect("gzip")
            }
            "zlib" => {
                let mut e = flate2::write::ZlibEncoder::new(Vec::new(), c);
                e.write_all(data).expect("write");
                e.finish().expect("zlib")
            }
            _ => {
                let mut e = flate2::write::DeflateEncoder::new(Vec::new(), c);
                e.write_all(data).expect("write");
                e.finish().expect("deflate")
            }
        }
    }

    #[test]
    fn each_kind_inflates_and_raw_only_when_asked() {
        let text = b"the same words again and again and again".repeat(8);
        for kind in ["gzip", "zlib", "deflate"] {
            let c = compress(6, &text, kind);
            assert_eq!(inflate(&c, true), Ok(Some((kind, text.clone()))), "{kind}");
        }
        assert_eq!(inflate(&compress(6, &text, "deflate"), false), Ok(None));
        assert_eq!(inflate(b"plain text, not compressed", true), Ok(None));
    }

    #[test]
    fn a_cut_stream_gives_what_inflated() {
        let text = b"0123456789abcdef".repeat(64);
        let c = compress(0, &text, "zlib");
        let (_, part) = inflate(&c[..c.len() / 2], false)
            .expect("ok")
            .expect("some");
        assert!(!part.is_empty() && text.starts_with(&part));
    }

    #[test]
    fn a_zip_bomb_is_cut_and_reported() {
        let bomb = compress(9, &vec![0u8; MAX_INFLATE + 4096], "gzip");
        assert!(bomb.len() < 8192);
        assert_eq!(inflate(&bomb, false), Err(TOO_LARGE));
        let z = compress(9, &vec![b'a'; 2 * MAX_INFLATE], "zlib");
        assert_eq!(inflate(&z, false), Err(TOO_LARGE));
        let d = compress(9, &vec![b'a'; 2 * MAX_INFLATE], "deflate");
        assert_eq!(inflate(&d, true), Err(TOO_LARGE));
    }
}
