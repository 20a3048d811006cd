//! awk: its program can run commands (`system()`, `print | "cmd"`, `"cmd" | getline`, gawk's
//! `|&`), write files (`print > "f"`, `>>`), read files (`getline < "f"`), load code (`@load`,
//! `@include`, `-i`, `-l`) and read the environment (`ENVIRON`, gawk's `PROCINFO`). gawk's
//! `--sandbox` refuses most of these, but the gateway cannot add it to a line the host runs,
//! so it reads the program instead and refuses one that uses any of them, or that it cannot
//! read to the end. Agents mostly print fields (`awk '{print $2}'`), filter
//! (`awk -F: '$3 > 100'`) and sum (`awk '{s+=$5} END {print s}'`), which pass. No crate
//! analyses awk programs, hence this small lexer of the POSIX grammar's tokens.
use super::{ShellError, coreutils_tables::AWK, findings::Findings, options::parse_options};

/// awk: the program (the first operand, or each `-e`/`--source`) checked; the other operands
/// are the files it reads (an assignment operand, `VAR=value`, is read as a path that does not
/// exist, which no rule refuses).
pub(super) fn awk(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &AWK, findings)?;
    if parsed.pattern_file {
        findings.forbid("-f", "its program is in a file, which is not analysed");
    }
    let programs = parsed.scripts();
    for program in programs {
        if let Err(why) = check_program(program) {
            findings.forbid("program", &format!("refused: {why}"));
        }
    }
    for file in parsed.after_pattern() {
        findings.read(&file.path());
    }
    Ok(())
}

/// Names whose use reaches outside awk's input and output.
const REACHING: &[(&str, &str)] = &[
    ("system", "`system()` runs a command"),
    ("getline", "`getline` reads from a file or a command"),
    (
        "ENVIRON",
        "`ENVIRON` reads the environment, where credentials live",
    ),
    ("PROCINFO", "`PROCINFO` reads the process's details"),
];

/// Why `program` is refused: a construct that reaches outside awk, or text not understood.
pub(super) fn check_program(program: &str) -> Result<(), String> {
    let s = program.as_bytes();
    let mut at = 0;
    // A `/` here starts a regular expression (no operand before it), else it divides.
    let mut operand_before = false;
    // Inside a `print`/`printf` statement: its parenthesis depth.
    let mut print_depth: Option<usize> = None;
    let mut depth = 0usize;
    while let Some(&c) = s.get(at) {
        match c {
            b'"' => {
                at = skip_quoted(s, at, b'"').ok_or("a string that does not end")?;
                operand_before = true;
                continue;
            }
            b'/' if !operand_before => {
                at = skip_quoted(s, at, b'/').ok_or("a regular expression that does not end")?;
                operand_before = true;
                continue;
            }
            b' ' | b'\t' | b'\\' => {
                at += 1;
                continue;
            }
            b'#' => {
                while s.get(at).is_some_and(|&c| c != b'\n') {
                    at += 1;
                }
                continue;
            }
            b'@' => return Err("`@` directives load code or call functions by name".into()),
            b'|' if s.get(at + 1) == Some(&b'|') => {
                at += 2;
                operand_before = false;
                continue;
            }
            b'|' => return Err("`|` pipes to or from a command".into()),
            b'>' if print_depth == Some(depth) => {
                return Err("`print >` and `>>` write to a file".into());
            }
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b';' | b'\n' | b'}' | b'{' if print_depth.is_some_and(|d| depth <= d) => {
                print_depth = None;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = at;
                while s
                    .get(at)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    at += 1;
                }
                let word = &program[start..at];
                if let Some((_, why)) = REACHING.iter().find(|(name, _)| *name == word) {
                    return Err((*why).to_owned());
                }
                if word == "print" || word == "printf" {
                    print_depth = Some(depth);
                    operand_before = false;
                } else {
                    operand_before = true;
                }
                continue;
            }
            _ => {}
        }
        operand_before = c.is_ascii_digit() || matches!(c, b')' | b']' | b'$' | b'.');
        at += 1;
    }
    Ok(())
}

/// The index after the closing `quote` of the literal opening at `at` (backslash escapes
/// skipped); `None` when it does not close.
fn skip_quoted(s: &[u8], at: usize, quote: u8) -> Option<usize> {
    let mut i = at + 1;
    while let Some(&c) = s.get(i) {
        match c {
            b'\\' => i += 2,
            c if c == quote => return Some(i + 1),
            b'\n' => return None,
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::check_program;
    use crate::shell::test_support::{clean, forbidden, paths};

    #[test]
    fn ordinary_programs_pass() {
        for p in [
            "{print $2}",
            "-F: '$3 > 100 {print $1}'",
            "{s += $5} END {print s}",
            "/error|warn/ {n++} END {print n+0}",
            "NR > 1 && $2 >= 10 {print $1, $2 / 2}",
            "{printf \"%-20s %s\\n\", $1, $2}",
            "print (a > b)",
            "BEGIN {FS = \"|\"} {print $1}",
            "length($0) > 80 {print FILENAME\": \"FNR}",
            "{a[$1] += $2} END {for (k in a) print k, a[k]}",
            "$1 ~ /^#/ {next} {print}",
        ] {
            let program = p.trim_start_matches("-F: '").trim_end_matches('\'');
            assert_eq!(check_program(program), Ok(()), "{p}");
        }
        let a = clean("awk -F, '{print $1}' data.csv");
        assert_eq!(a.reads, paths(&["data.csv"]));
    }

    #[test]
    fn programs_that_reach_outside_are_refused() {
        for p in [
            "BEGIN {system(\"id\")}",
            "{print | \"sh\"}",
            "BEGIN {\"id\" | getline x; print x}",
            "BEGIN {while ((getline line < \"/etc/shadow\") > 0) print line}",
            "{print > \"out.txt\"}",
            "{print $1 >> \"log\"}",
            "{printf(\"%s\", $0) > \"f\"}",
            "BEGIN {print ENVIRON[\"AWS_SECRET_ACCESS_KEY\"]}",
            "@load \"filefuncs\"",
            "BEGIN {print \"unterminated}",
            "{print |& \"cmd\"}",
        ] {
            assert!(check_program(p).is_err(), "{p}");
        }
        assert!(forbidden("awk -f prog.awk data").contains("-f"));
        assert!(forbidden("awk 'BEGIN{system(\"id\")}'").contains("system"));
    }
}
