//! The files a simple command's redirections open ([`super`]): `<` a read, `>` `>>` `&>`
//! a write, descriptor duplications and the standard devices (`/dev/null`, `/dev/stderr`,
//! …) nothing; a here-document's command substitutions are walked.
use std::path::PathBuf;

use brush_parser::ast::{self, IoRedirect};

use super::{Walk, options, unanalysable, words::Expanded};
use crate::shell::ShellError;

impl Walk {
    /// The files the redirections read and write; descriptor duplications and the standard
    /// devices are neither. The command substitutions of a here-document are walked: their
    /// value is the command's input, text.
    pub(super) fn redirects(
        &mut self,
        list: &[IoRedirect],
    ) -> Result<(Vec<PathBuf>, Vec<PathBuf>), ShellError> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T};
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for r in list {
            match r {
                IoRedirect::File(_, kind, target) => {
                    let word = match target {
                        T::Filename(w) => w,
                        T::Fd(_) => continue,
                        T::Duplicate(w) => {
                            let t = self.ctx.static_text(&w.value)?;
                            if t == "-" || t.bytes().all(|b| b.is_ascii_digit()) {
                                continue;
                            }
                            w
                        }
                        // `< <(find …)`: a pipe from the commands, walked; no file.
                        T::ProcessSubstitution(_, sub) => {
                            self.process_substitution(sub)?;
                            continue;
                        }
                    };
                    let Some(path) = self.redirect_path(&word.value)? else {
                        continue;
                    };
                    match kind {
                        K::Read | K::DuplicateInput => reads.push(path),
                        K::ReadAndWrite => {
                            reads.push(path.clone());
                            writes.push(path);
                        }
                        K::Write | K::Append | K::Clobber | K::DuplicateOutput => writes.push(path),
                    }
                }
                IoRedirect::OutputAndError(w, _) => {
                    if let Some(path) = self.redirect_path(&w.value)? {
                        writes.push(path);
                    }
                }
                IoRedirect::HereString(_, w) => {
                    self.ctx.static_text(&w.value)?;
                }
                IoRedirect::HereDocument(_, doc) => {
                    if doc.requires_expansion {
                        let pieces = brush_parser::word::parse_heredoc(&doc.doc.value, &options())
                            .map_err(|e| ShellError::Syntax(e.to_string()))?;
                        let mut text = Expanded::default();
                        self.ctx.text_of(&pieces, &mut text)?;
                        for inner in &text.substitutions {
                            self.nested(inner)?;
                        }
                    }
                }
            }
        }
        Ok((reads, writes))
    }

    /// A redirection's file, absolute; `None` for a standard device (`/dev/null`).
    fn redirect_path(&self, raw: &str) -> Result<Option<PathBuf>, ShellError> {
        let words = self.ctx.static_word(raw)?;
        let [one] = words.as_slice() else {
            return Err(unanalysable(format!(
                "a redirection to `{raw}`, which names several files"
            )));
        };
        if crate::shell::findings::is_standard_device(one) {
            return Ok(None);
        }
        Ok(Some(self.ctx.cwd.join(one)))
    }
}
