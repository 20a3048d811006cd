//! Brace expansion, bash's first expansion of a word (`src/{a,b}.rs`, `cp f{,.bak}`,
//! `{1..3}`): the word is parsed by brush's brace-expansion grammar and its alternatives
//! multiplied out, as raw words that [`super::words`] then expands as any other. Only what
//! bash makes of it before the line runs is expanded; refused: sequences whose numbers bash
//! pads (`{01..10}`: brush's grammar drops the zeros), character sequences that cross
//! from upper to lower case (`{Z..a}` gives `[`, `\` and the like), and more than
//! [`MAX_BRACE_WORDS`] words.
use brush_parser::word::{BraceExpressionMember as Member, BraceExpressionOrText as Piece};

use super::{options, unanalysable};
use crate::shell::ShellError;

/// Words one word's braces may expand to before the line is refused.
const MAX_BRACE_WORDS: usize = 1024;

/// `raw`'s words after brace expansion (`raw` itself when it has none).
pub(super) fn brace_words(raw: &str) -> Result<Vec<String>, ShellError> {
    if !raw.contains('{') {
        return Ok(vec![raw.to_owned()]);
    }
    let refused = || unanalysable(format!("the brace expansion in `{raw}`"));
    let pieces =
        brush_parser::word::parse_brace_expansions(raw, &options()).map_err(|_| refused())?;
    let Some(pieces) = pieces else {
        return Ok(vec![raw.to_owned()]);
    };
    if padded_sequence(raw) {
        return Err(unanalysable(format!(
            "the brace sequence in `{raw}`, whose numbers bash pads with zeros"
        )));
    }
    let words = expand(&pieces).ok_or_else(|| {
        unanalysable(format!(
            "the brace expansion in `{raw}`, which makes more than {MAX_BRACE_WORDS} words or a \
             sequence of characters other than letters of one case"
        ))
    })?;
    Ok(words)
}

/// A number with a leading zero at either end of a `..` (`{01..`, `..05}`).
fn padded_sequence(raw: &str) -> bool {
    let padded = |digits: &str| digits.len() > 1 && digits.starts_with('0');
    raw.match_indices("..").any(|(i, _)| {
        let after = raw[i + 2..].trim_start_matches(['-', '+']);
        let after_end = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        let before = raw[..i]
            .rsplit(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap_or("");
        padded(&after[..after_end]) || padded(before)
    })
}

/// The words of `pieces` in bash's order; `None` past [`MAX_BRACE_WORDS`] or for a
/// sequence it refuses.
fn expand(pieces: &[Piece]) -> Option<Vec<String>> {
    let mut words = vec![String::new()];
    for piece in pieces {
        let alternatives = match piece {
            Piece::Text(t) => vec![t.clone()],
            Piece::Expr(members) => {
                let mut all = Vec::new();
                for m in members {
                    all.extend(member(m)?);
                }
                all
            }
        };
        if words.len().checked_mul(alternatives.len())? > MAX_BRACE_WORDS {
            return None;
        }
        words = words
            .iter()
            .flat_map(|w| alternatives.iter().map(move |a| format!("{w}{a}")))
            .collect();
    }
    Some(words)
}

fn member(m: &Member) -> Option<Vec<String>> {
    match m {
        Member::Child(pieces) => expand(pieces),
        Member::NumberSequence {
            start,
            end,
            increment,
        } => sequence(*start, *end, *increment).map(|s| s.map(|n| n.to_string()).collect()),
        Member::CharSequence {
            start,
            end,
            increment,
        } => {
            let one_case = start.is_ascii_lowercase() == end.is_ascii_lowercase();
            if !one_case {
                return None;
            }
            let s = sequence(
                i64::from(u32::from(*start)),
                i64::from(u32::from(*end)),
                *increment,
            )?;
            s.map(|c| {
                u32::try_from(c)
                    .ok()
                    .and_then(char::from_u32)
                    .map(String::from)
            })
            .collect()
        }
    }
}

/// `start..end` by `|increment|` (0 is 1), upwards or downwards as bash counts.
fn sequence(start: i64, end: i64, increment: i64) -> Option<impl Iterator<Item = i64>> {
    let step = increment.unsigned_abs().max(1);
    let count = start.abs_diff(end) / step + 1;
    if count > MAX_BRACE_WORDS as u64 {
        return None;
    }
    let step = i64::try_from(step).ok()?;
    let step = if start <= end { step } else { -step };
    Some((0..i64::try_from(count).ok()?).map(move |i| start + i * step))
}

#[cfg(test)]
mod tests {
    use super::brace_words;

    fn words(raw: &str) -> Vec<String> {
        brace_words(raw).unwrap_or_else(|e| panic!("{raw}: {e}"))
    }

    #[test]
    fn braces_expand_as_bash_expands_them() {
        assert_eq!(words("src/{a,b}.rs"), ["src/a.rs", "src/b.rs"]);
        assert_eq!(words("f{,.bak}"), ["f", "f.bak"]);
        assert_eq!(words("{a,b}{1,2}"), ["a1", "a2", "b1", "b2"]);
        assert_eq!(words("x/{a,b/{c,d}}"), ["x/a", "x/b/c", "x/b/d"]);
        assert_eq!(words("{1..3}"), ["1", "2", "3"]);
        assert_eq!(words("{5..1..2}"), ["5", "3", "1"]);
        assert_eq!(words("{-1..1}"), ["-1", "0", "1"]);
        assert_eq!(words("{a..c}"), ["a", "b", "c"]);
        assert_eq!(words("'{a,b}'"), ["'{a,b}'"], "quoted: no expansion");
        assert_eq!(words("{a}"), ["{a}"], "one member: none");
        assert_eq!(words("{}"), ["{}"]);
        assert_eq!(words("${HOME}"), ["${HOME}"]);
        assert_eq!(words("\"a b\"{1,2}"), ["\"a b\"1", "\"a b\"2"]);
        assert_eq!(words("v-01.{js,ts}"), ["v-01.js", "v-01.ts"]);
        assert_eq!(words("{0..2}"), ["0", "1", "2"]);
        for refused in [
            "{01..10}",
            "{1..05}",
            "{-01..1}",
            "{Z..a}",
            "{1..100000}",
            "{1..40}{1..40}",
        ] {
            assert!(brace_words(refused).is_err(), "{refused}");
        }
    }
}
