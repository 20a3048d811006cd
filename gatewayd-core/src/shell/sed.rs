//! sed: its script can write files (`w`, `W`, the `s///w` flag), read them (`r`, `R`) and
//! run commands (`e`, the `s///e` flag). GNU sed's `--sandbox` refuses exactly these; the
//! gateway cannot add that option to a line the host runs, so it reads the script instead and
//! refuses one that uses any of them, or that it cannot read to the end. Agents mostly print
//! ranges (`sed -n '1,200p' f`, Codex's way of reading a file) and substitute
//! (`sed 's/a/b/g' f`), which pass. No crate analyses sed scripts, hence this small reader of
//! the POSIX and GNU grammar (addresses, `!`, blocks, labels, `s`, `y`, text commands).

use super::{ShellError, coreutils_tables::SED, findings::Findings, options::parse_options};

/// sed: the script (the first operand, or each `-e`) checked, the files read, and with `-i`
/// written (with `-iSUFFIX` their backups too, `FILE` + SUFFIX; a suffix with `*` or `/`,
/// which names the backup otherwise, is refused).
pub(super) fn sed(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &SED, findings)?;
    let scripts = parsed.scripts();
    if parsed.pattern_file {
        findings.forbid("sed", "-f: its script is in a file, which is not analysed");
    }
    for script in scripts {
        if let Err(why) = check_script(script) {
            findings.forbid("sed", &format!("its script is refused: {why}"));
        }
    }
    let suffix = parsed.in_place_suffix;
    if suffix.is_some_and(|s| s.contains(['*', '/'])) {
        findings.forbid(
            "sed",
            "-i: a backup name made from a pattern, which is not checked",
        );
    }
    for file in parsed.after_pattern() {
        findings.read(&file.path());
        if parsed.in_place {
            findings.write(&file.path());
            if let Some(suffix) = suffix {
                let mut backup = file.path().into_os_string();
                backup.push(suffix);
                findings.write(&std::path::PathBuf::from(backup));
            }
        }
    }
    Ok(())
}

/// Why a script is refused: a command that reaches outside sed, or text not understood.
pub(super) fn check_script(script: &str) -> Result<(), String> {
    let mut r = Reader {
        s: script.as_bytes(),
        at: 0,
    };
    loop {
        r.skip(b" \t\n;");
        if r.done() {
            return Ok(());
        }
        r.address()?;
        r.skip(b" \t");
        if r.peek() == Some(b',') {
            r.at += 1;
            r.skip(b" \t");
            r.address()?;
        }
        r.skip(b" \t");
        while r.peek() == Some(b'!') {
            r.at += 1;
            r.skip(b" \t");
        }
        r.command()?;
    }
}

struct Reader<'a> {
    s: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.at >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn skip(&mut self, set: &[u8]) {
        while self.peek().is_some_and(|c| set.contains(&c)) {
            self.at += 1;
        }
    }

    /// An address, if one is here: a number (`first~step`), `$`, `+N`/`~N` (a range's end),
    /// `/RE/` or `\cREc`, with GNU's `I`/`M` after a regex.
    fn address(&mut self) -> Result<(), String> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() || c == b'+' || c == b'~' => {
                self.at += 1;
                self.skip(b"0123456789~");
            }
            Some(b'$') => self.at += 1,
            Some(b'/') => {
                self.at += 1;
                self.delimited(b'/')?;
                self.skip(b"IM");
            }
            Some(b'\\') => {
                self.at += 1;
                let d = self.peek().ok_or("an address ends after `\\`")?;
                self.at += 1;
                self.delimited(d)?;
                self.skip(b"IM");
            }
            _ => {}
        }
        Ok(())
    }

    /// Up to and past the next unescaped `d` (a `[...]` class may hold it).
    fn delimited(&mut self, d: u8) -> Result<(), String> {
        let mut class = false;
        while let Some(c) = self.peek() {
            self.at += 1;
            match c {
                b'\\' => self.at += 1,
                b'[' if !class && d != b'[' => class = true,
                b']' if class => class = false,
                c if c == d && !class => return Ok(()),
                b'\n' => return Err("a newline inside a regex or replacement".into()),
                _ => {}
            }
        }
        Err(format!("`{}` is not closed", char::from(d)))
    }

    /// One command after its addresses.
    fn command(&mut self) -> Result<(), String> {
        let c = self.peek().ok_or("an address without a command")?;
        self.at += 1;
        match c {
            b'{' | b'}' | b'=' | b'd' | b'D' | b'g' | b'G' | b'h' | b'H' | b'l' | b'n' | b'N'
            | b'p' | b'P' | b'x' | b'z' | b'F' | b'v' => Ok(()),
            b'q' | b'Q' | b'L' => {
                self.skip(b" \t0123456789");
                Ok(())
            }
            // A label or a branch to one: its name runs to `;` or the line's end.
            b':' | b'b' | b't' | b'T' => {
                while self.peek().is_some_and(|c| c != b';' && c != b'\n') {
                    self.at += 1;
                }
                Ok(())
            }
            // Text to add: to the end of the line (with `\` continuing it).
            b'a' | b'i' | b'c' => {
                while let Some(c) = self.peek() {
                    self.at += 1;
                    if c == b'\\' {
                        self.at += 1;
                    } else if c == b'\n' {
                        break;
                    }
                }
                Ok(())
            }
            b's' => {
                let d = self.peek().ok_or("`s` without its delimiter")?;
                if d == b'\\' || d == b'\n' {
                    return Err("`s` with a `\\` or newline delimiter".into());
                }
                self.at += 1;
                self.delimited(d)?;
                self.delimited(d)?;
                self.substitute_flags()
            }
            b'y' => {
                let d = self.peek().ok_or("`y` without its delimiter")?;
                self.at += 1;
                self.delimited(d)?;
                self.delimited(d)
            }
            b'w' | b'W' => Err(format!("`{}` writes a file", char::from(c))),
            b'r' | b'R' => Err(format!("`{}` reads a file", char::from(c))),
            b'e' => Err("`e` runs a command".into()),
            other => Err(format!("command `{}` is not known", char::from(other))),
        }
    }

    /// The flags of `s///`: `g`, `p`, a number, `i`/`I`, `m`/`M`; `w` writes a file, `e`
    /// runs the pattern space as a command.
    fn substitute_flags(&mut self) -> Result<(), String> {
        while let Some(c) = self.peek() {
            match c {
                b'g' | b'p' | b'i' | b'I' | b'm' | b'M' | b'0'..=b'9' => self.at += 1,
                b'w' => return Err("the `s///w` flag writes a file".into()),
                b'e' => return Err("the `s///e` flag runs a command".into()),
                b';' | b'\n' | b' ' | b'\t' | b'}' => return Ok(()),
                other => return Err(format!("`s` flag `{}` is not known", char::from(other))),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::check_script;
    use crate::shell::test_support::{clean, forbidden, paths};

    #[test]
    fn sed_lines_read_their_files_and_refuse_what_reaches_out() {
        assert_eq!(
            clean("sed -n '1,200p' src/main.rs").reads,
            paths(&["src/main.rs"])
        );
        assert_eq!(clean("sed -n -e 1p -e '$p' a b").reads, paths(&["a", "b"]));
        assert_eq!(clean("sed 's/a/b/g' a").reads, paths(&["a"]));
        assert!(forbidden("sed 'w /tmp/x' a").contains("writes a file"));
        assert!(forbidden("sed -e 1p -e 'r /etc/shadow' a").contains("reads a file"));
        assert!(forbidden("sed -f script.sed a").contains("not analysed"));
        assert_eq!(clean("sed -i 's/a/b/' a").writes, paths(&["a"]));
    }

    #[test]
    fn printing_and_substituting_pass() {
        for ok in [
            "1,200p",
            "10,40p",
            "$p",
            "/^fn /,/^}/p",
            "s/foo/bar/g",
            "s|a/b|c|2p",
            "/^#/d; s/[ \t]*$//",
            "1~2p",
            "/start/,+3p",
            "\\,x/y,p",
            "2q",
            "/a/!d",
            "/x/{p;q}",
            ":a;N;$!ba;s/\\n/ /g",
            "y/abc/xyz/",
            "s/[/]/slash/",
            "=",
            "1i\\\nheader",
        ] {
            assert_eq!(check_script(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn writing_reading_and_running_are_refused() {
        for bad in [
            "w /tmp/out",
            "1,5w out",
            "/x/W f",
            "r /etc/shadow",
            "R ~/.ssh/id_rsa",
            "e id",
            "s/x/id/e",
            "s/x/y/w /tmp/o",
            "s/x/y/gw f",
            "1{w f\n}",
            "/a/,/b/ !e cmd",
            "s/unclosed",
            "k",
        ] {
            assert!(check_script(bad).is_err(), "{bad}");
        }
    }
}
