//! The tokeniser: a command line to argv, the way POSIX `sh` splits a simple command, with
//! everything a shell would interpret beyond quoting refused when the line runs through one.
use super::ShellError;

/// Splits a command line into argv like POSIX sh would for simple commands: single quotes,
/// double quotes (with `\"` `\\` `\$` `` \` `` escapes), backslash escapes, whitespace.
/// Refuses ([`ShellError`]) anything a shell would interpret beyond that, when `through_shell`
/// is true: `;` `&` `|` `` ` `` `$(` `${` `$VAR` `>` `<` `>>` `2>` newline, glob chars `*` `?`
/// `[` outside quotes, `~` at word start, unterminated quotes. When `through_shell` is false
/// (the host execs argv directly) metacharacters are plain bytes.
///
/// Also refused through a shell: `( )`, `{` (bash brace expansion), `#` at a word start (a
/// comment), `~` after an unquoted `=` or `:`, any `$` or backquote inside double quotes, and a
/// leading `NAME=value` word (an assignment for the command). Words are separated by spaces
/// and tabs; backslash-newline is a line continuation. Quotes and backslashes are processed in
/// both modes; an unterminated quote or a final lone backslash is an error in both.
pub fn split(line: &str, through_shell: bool) -> Result<Vec<String>, ShellError> {
    if line.contains('\0') {
        return Err(ShellError::Nul);
    }
    let refuse = |ch, pos, what| Err(ShellError::Metachar { ch, pos, what });
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    // Everything in the current word so far was unquoted (for `NAME=` detection).
    let mut all_unquoted = true;
    // The previous character of the current word, when it was unquoted (for `=~`, `:~`).
    let mut prev_unquoted: Option<char> = None;
    let mut chars = line.char_indices().peekable();
    while let Some((pos, c)) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
                all_unquoted = true;
                prev_unquoted = None;
            }
            '\'' | '"' => {
                in_word = true;
                all_unquoted = false;
                prev_unquoted = None;
                quoted(&mut chars, c, pos, through_shell, &mut word)?;
            }
            '\\' => match chars.next() {
                None => return Err(ShellError::TrailingBackslash),
                Some((_, '\n')) => {}
                Some((_, ch)) => {
                    word.push(ch);
                    in_word = true;
                    all_unquoted = false;
                    prev_unquoted = None;
                }
            },
            // A whole word `{}` (find's placeholder) is not brace-expanded; `{},x}` would be.
            '{' if through_shell
                && !in_word
                && line[pos..].starts_with("{}")
                && line[pos + 2..]
                    .chars()
                    .next()
                    .is_none_or(|n| n == ' ' || n == '\t') =>
            {
                chars.next();
                word.push_str("{}");
                in_word = true;
                prev_unquoted = Some('}');
            }
            _ if through_shell => {
                if let Some(what) = shell_meaning(c, in_word, prev_unquoted) {
                    return refuse(c, pos, what);
                }
                if c == '=' && words.is_empty() && all_unquoted && is_name(&word) {
                    return Err(ShellError::Assignment(word));
                }
                word.push(c);
                in_word = true;
                prev_unquoted = Some(c);
            }
            _ => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// Reads a quoted part of a word, after its opening `quote`, into `word`. Inside single
/// quotes every character is itself; inside double quotes a backslash escapes `"` `\` `$`
/// `` ` `` and newline, and `$` `` ` `` (which would expand) are refused through a shell.
fn quoted(
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
    quote: char,
    pos: usize,
    through_shell: bool,
    word: &mut String,
) -> Result<(), ShellError> {
    let single = quote == '\'';
    loop {
        let Some((p, ch)) = chars.next() else {
            let quote = if single { "single" } else { "double" };
            return Err(ShellError::Unterminated { quote, pos });
        };
        match ch {
            _ if ch == quote => return Ok(()),
            _ if single => word.push(ch),
            '\\' => match chars.peek() {
                Some(&(_, n @ ('"' | '\\' | '$' | '`'))) => {
                    word.push(n);
                    chars.next();
                }
                Some(&(_, '\n')) => {
                    chars.next();
                }
                _ => word.push('\\'),
            },
            '$' if through_shell => {
                return Err(ShellError::Metachar {
                    ch,
                    pos: p,
                    what: "expands a variable or command",
                });
            }
            '`' if through_shell => {
                return Err(ShellError::Metachar {
                    ch,
                    pos: p,
                    what: "substitutes a command",
                });
            }
            _ => word.push(ch),
        }
    }
}

/// What an unquoted character means to a shell, when it means more than itself.
fn shell_meaning(c: char, in_word: bool, prev: Option<char>) -> Option<&'static str> {
    Some(match c {
        ';' | '\n' => "separates commands",
        '&' => "runs in the background or chains commands",
        '|' => "pipes into another command",
        '<' | '>' => "redirects input or output",
        '(' | ')' => "starts a subshell",
        '`' => "substitutes a command",
        '$' => "expands a variable or command",
        '*' | '?' | '[' => "is a glob pattern",
        '{' => "is brace expansion",
        '#' if !in_word => "starts a comment",
        '~' if !in_word || matches!(prev, Some('=' | ':')) => "expands to a home directory",
        _ => return None,
    })
}

/// A shell variable name: a letter or `_`, then letters, digits or `_`.
pub(super) fn is_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c == b'_' || c.is_ascii_alphabetic())
        && b.all(|c| c == b'_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::test_support::split_for_shell;

    #[test]
    fn splits_words_and_quotes() {
        assert_eq!(split_for_shell("  cat  a\tb  "), ["cat", "a", "b"]);
        assert_eq!(
            split_for_shell("echo 'a b' \"c d\" e\\ f"),
            ["echo", "a b", "c d", "e f"]
        );
        assert_eq!(split_for_shell("x 'it''s' a\"b\"c"), ["x", "its", "abc"]);
        assert_eq!(split_for_shell("x '' \"\""), ["x", "", ""]);
        assert_eq!(
            split_for_shell(r#"x "a\"b\\c\$d\`e\n""#),
            ["x", "a\"b\\c$d`e\\n"]
        );
        assert_eq!(split_for_shell(r"x 'a\b'"), ["x", "a\\b"]);
        assert_eq!(
            split_for_shell("x a\\\nb"),
            ["x", "ab"],
            "backslash-newline continues the line"
        );
        assert_eq!(
            split_for_shell("x 'a;b|c>d$e*f'"),
            ["x", "a;b|c>d$e*f"],
            "metachars quoted"
        );
        assert_eq!(
            split_for_shell(r"find . -name x \;"),
            ["find", ".", "-name", "x", ";"]
        );
        assert_eq!(
            split_for_shell("git log HEAD~1"),
            ["git", "log", "HEAD~1"],
            "~ mid-word is literal"
        );
        assert_eq!(
            split_for_shell("x a=b"),
            ["x", "a=b"],
            "assignment-looking operand is fine"
        );
        assert_eq!(
            split_for_shell("x 'a'#b"),
            ["x", "a#b"],
            "# mid-word is literal"
        );
        assert_eq!(split_for_shell("x '~' \\~"), ["x", "~", "~"]);
        assert_eq!(split("", true), Ok(vec![]));
    }

    #[test]
    fn unterminated_quotes_and_trailing_backslash_fail_in_both_modes() {
        for shell in [true, false] {
            assert!(matches!(
                split("cat 'a", shell),
                Err(ShellError::Unterminated {
                    quote: "single",
                    pos: 4
                })
            ));
            assert!(matches!(
                split("cat \"a", shell),
                Err(ShellError::Unterminated {
                    quote: "double",
                    ..
                })
            ));
            assert!(matches!(
                split("cat \"a\\\"", shell),
                Err(ShellError::Unterminated { .. })
            ));
            assert_eq!(split("cat a\\", shell), Err(ShellError::TrailingBackslash));
            assert_eq!(split("cat a\0b", shell), Err(ShellError::Nul));
        }
    }

    #[test]
    fn metacharacters_refused_through_a_shell_and_bytes_otherwise() {
        let cases = [
            ("cat a; rm b", ';'),
            ("cat a & rm b", '&'),
            ("cat a && rm b", '&'),
            ("cat a | sh", '|'),
            ("cat a || true", '|'),
            ("cat `id`", '`'),
            ("cat $(id)", '$'),
            ("cat ${HOME}", '$'),
            ("cat $HOME/x", '$'),
            ("cat a > b", '>'),
            ("cat a >> b", '>'),
            ("cat a 2> b", '>'),
            ("cat < a", '<'),
            ("cat a\nrm b", '\n'),
            ("cat *.env", '*'),
            ("cat a?", '?'),
            ("cat [ab]", '['),
            ("ls ~", '~'),
            ("ls ~root/x", '~'),
            ("x --file=~/x", '~'),
            ("x PATH=a:~/b", '~'),
            ("cat {.env,x}", '{'),
            ("cat {a}", '{'),
            ("cat {},.env}", '{'),
            ("cat a{}", '{'),
            ("cat {}{a,b}", '{'),
            ("(cat a)", '('),
            ("cat a #comment", '#'),
            ("cat \"$HOME\"", '$'),
            ("cat \"`id`\"", '`'),
        ];
        for (line, ch) in cases {
            match split(line, true) {
                Err(ShellError::Metachar { ch: c, .. }) => assert_eq!(c, ch, "{line:?}"),
                other => panic!("{line:?} through a shell: {other:?}"),
            }
            let argv = split(line, false).unwrap_or_else(|e| panic!("{line:?} direct: {e}"));
            assert!(
                argv.concat().contains(ch),
                "{line:?}: {ch:?} kept as a byte: {argv:?}"
            );
        }
        assert_eq!(
            split("cat a;b $X", false),
            Ok(vec!["cat".into(), "a;b".into(), "$X".into()])
        );
        assert_eq!(split("ls ~", false), Ok(vec!["ls".into(), "~".into()]));
    }

    #[test]
    fn leading_assignment_refused_through_a_shell() {
        assert_eq!(
            split("LD_PRELOAD=/tmp/x.so cat a", true),
            Err(ShellError::Assignment("LD_PRELOAD".into()))
        );
        assert_eq!(
            split_for_shell("'A'=b cat")[0],
            "A=b",
            "a quoted name is not an assignment"
        );
        assert_eq!(split("A=b cat", false).map(|v| v.len()), Ok(2));
    }
}
