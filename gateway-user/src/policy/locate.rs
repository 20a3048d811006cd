//! Where in the policy text a semantic error points: the line and column of the value named
//! by the message's leading path (`network.egress[0].cidr: ...`, `tools[3] (name).args.x: ...`).
//! serde_json keeps no positions after parsing, so the (already valid) text is walked again.

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Parses the path before the first `": "` of a validation message.
fn segments(message: &str) -> Vec<Seg> {
    let head = message.split(": ").next().unwrap_or("");
    let mut out = Vec::new();
    for part in head.split('.') {
        // Drop annotations such as `tools[3] (read_file)`.
        let part = part.split(" (").next().unwrap_or("").trim();
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            out.push(Seg::Key(name.to_string()));
        }
        for idx in rest.split('[') {
            if let Ok(i) = idx.trim_end_matches(']').parse() {
                out.push(Seg::Index(i));
            }
        }
    }
    out
}

struct Walker<'a> {
    b: &'a [u8],
    i: usize,
}

impl Walker<'_> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn string(&mut self) -> Option<String> {
        let start = self.i + 1;
        self.i += 1;
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    let raw = std::str::from_utf8(&self.b[start - 1..self.i]).ok()?;
                    return serde_json::from_str(raw).ok();
                }
                _ => self.i += 1,
            }
        }
        None
    }

    /// Walks one value; returns the offset of the value at `path` below it, if there is one,
    /// else the offset of the deepest value on the way (`best`).
    fn value(&mut self, path: &[Seg], best: &mut usize) -> Option<usize> {
        self.ws();
        let here = self.i;
        *best = here;
        if path.is_empty() {
            return Some(here);
        }
        match self.b.get(self.i)? {
            b'{' => {
                self.i += 1;
                loop {
                    self.ws();
                    match self.b.get(self.i)? {
                        b'}' => {
                            self.i += 1;
                            return None;
                        }
                        b',' => self.i += 1,
                        b'"' => {
                            let key = self.string()?;
                            self.ws();
                            self.i += 1; // ':'
                            if path.first() == Some(&Seg::Key(key)) {
                                return self.value(&path[1..], best);
                            }
                            self.skip()?;
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut n = 0;
                loop {
                    self.ws();
                    match self.b.get(self.i)? {
                        b']' => {
                            self.i += 1;
                            return None;
                        }
                        b',' => self.i += 1,
                        _ => {
                            if path.first() == Some(&Seg::Index(n)) {
                                return self.value(&path[1..], best);
                            }
                            self.skip()?;
                            n += 1;
                        }
                    }
                }
            }
            _ => None,
        }
    }

    fn skip(&mut self) -> Option<()> {
        self.ws();
        match self.b.get(self.i)? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                let mut depth = 0usize;
                while let Some(&c) = self.b.get(self.i) {
                    match c {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                None
            }
            _ => {
                while self
                    .b
                    .get(self.i)
                    .is_some_and(|c| !matches!(c, b',' | b'}' | b']'))
                {
                    self.i += 1;
                }
                Some(())
            }
        }
    }
}

/// 1-based line and column (in characters) of the value the message's path names, or of the
/// deepest part of that path found in `text`.
pub fn locate(text: &str, message: &str) -> Option<(usize, usize)> {
    let path = segments(message);
    if path.is_empty() {
        return None;
    }
    let mut w = Walker {
        b: text.as_bytes(),
        i: 0,
    };
    let mut best = 0;
    let off = w.value(&path, &mut best).unwrap_or(best);
    let before = text.get(..off)?;
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    Some((line, col))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "{\n  \"version\": 1,\n  \"network\": {\n    \"egress\": [\n      {\"host\": \"a\"},\n      {\"cidr\": \"10.1.2.3/8\"}\n    ]\n  },\n  \"tools\": [{\"name\": \"x\", \"args\": {\"p\": {\"regex\": \"(\"}}}]\n}\n";

    #[test]
    fn points_at_the_named_value() {
        assert_eq!(
            locate(TEXT, "network.egress[1].cidr: host bits"),
            Some((6, 16))
        );
        assert_eq!(
            locate(TEXT, "tools[0] (x).args.p: bad regex: ..."),
            Some((9, 41))
        );
    }

    #[test]
    fn falls_back_to_the_deepest_part_found() {
        assert_eq!(locate(TEXT, "network.egress[7].cidr: x"), Some((4, 15)));
        assert_eq!(
            locate(TEXT, "unsupported policy version 2 (only 1 exists)").map(|p| p.0),
            Some(1)
        );
    }
}
