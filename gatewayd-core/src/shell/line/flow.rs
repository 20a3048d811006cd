//! What the shell carries from one command of a line to the next, for the walk of
//! [`super`]: the directory (`cd`, `pushd`, `popd`) and the variables, and whether they are
//! known. A part of the line that may not run (a branch of `if` or `case`, a loop's body,
//! what follows `||`, the rest of an `&&` chain) or a `cd` that may fail leaves what it
//! changed unknown after it; a subshell
//! (`( … )`, a pipeline's commands, `… &`, a substitution, a `bash -c` body) leaves nothing
//! changed.
use std::path::{Path, PathBuf};

use brush_parser::ast;

use super::{MAX_DEPTH, Walk, unanalysable};
use crate::shell::ShellError;

/// How many changes the walk had made at a point of the line, to forget those made since in
/// a part that might not run ([`Walk::forget_changes_since`]). Changes are counted, not
/// compared: `cd /tmp && cd - || ls` may run `ls` in `/tmp` though the directory ends where
/// it started.
#[derive(Clone, Copy)]
pub(super) struct Marks {
    cds: usize,
    cds_that_may_fail: usize,
    var_changes: usize,
}

impl Walk {
    /// `A && B || C …`. After `&&` in a chain of `&&` alone, each command runs only if those
    /// before it did, so what they changed holds for it; after an `||` anything before may
    /// not have run. After the chain, what its later commands changed may not have happened,
    /// nor what a `cd` that may fail changed.
    pub(super) fn and_or(&mut self, and_or: &ast::AndOrList) -> Result<(), ShellError> {
        let before = self.marks();
        self.pipeline(&and_or.first)?;
        let after_first = self.marks();
        let mut only_and = true;
        for next in &and_or.additional {
            let p = match next {
                ast::AndOr::And(p) => p,
                ast::AndOr::Or(p) => {
                    only_and = false;
                    p
                }
            };
            if !only_and {
                self.forget_changes_since(&before);
            }
            self.pipeline(p)?;
        }
        if self.cds_that_may_fail > before.cds_that_may_fail {
            self.forget_changes_since(&before);
        } else if !and_or.additional.is_empty() {
            self.forget_changes_since(&after_first);
        }
        Ok(())
    }

    fn marks(&self) -> Marks {
        Marks {
            cds: self.cds,
            cds_that_may_fail: self.cds_that_may_fail,
            var_changes: self.ctx.vars.changed.len(),
        }
    }

    /// What changed since `before` may not have happened: a variable set or unset since is
    /// unknown, and so is the directory after a `cd` since.
    fn forget_changes_since(&mut self, before: &Marks) {
        if self.cds > before.cds {
            self.cwd_known = false;
            self.dir_stack = None;
        }
        let vars = &mut self.ctx.vars;
        for name in vars.changed.get(before.var_changes..).unwrap_or_default() {
            vars.known.retain(|(n, _)| n != name);
        }
    }

    /// `f`, a part of the line that may run or not, or run several times, or stop halfway
    /// (`if`, loops): what it changes is not known after it.
    pub(super) fn may_run(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<(), ShellError>,
    ) -> Result<(), ShellError> {
        let before = self.marks();
        let r = f(self);
        self.forget_changes_since(&before);
        r
    }

    /// `case WORD in PATTERN) LIST ;; … esac`: WORD and the PATTERNs are text, matched and
    /// never taken as files (their command substitutions are commands of the line); each
    /// branch may run or not. A branch that goes on into the next (`;&`, `;;&`) is refused:
    /// the next would run where the first left the directory.
    pub(super) fn case(&mut self, c: &ast::CaseClauseCommand) -> Result<(), ShellError> {
        if c.cases
            .iter()
            .any(|i| !matches!(i.post_action, ast::CaseItemPostAction::ExitCase))
        {
            return Err(unanalysable(
                "a `case` branch that goes on into the next (`;&`, `;;&`)",
            ));
        }
        let words = std::iter::once(&c.value).chain(c.cases.iter().flat_map(|i| &i.patterns));
        for word in words {
            let (_, substitutions) = self.ctx.runtime_text(&word.value)?;
            for inner in &substitutions {
                self.nested(inner)?;
            }
        }
        self.may_run(|w| {
            for body in c.cases.iter().filter_map(|i| i.cmd.as_ref()) {
                w.may_run(|w| w.list(body))?;
            }
            Ok(())
        })
    }

    /// One pass of a `for` loop's body. Each pass starts where the one before ended; but
    /// after a `break` or `continue` in it, the rest of the body may not have run, so what
    /// the pass changed is not known to the next.
    pub(super) fn iteration(&mut self, body: &ast::CompoundList) -> Result<(), ShellError> {
        let (before, exits) = (self.marks(), self.loop_exits);
        self.list(body)?;
        if self.loop_exits > exits {
            self.forget_changes_since(&before);
        }
        Ok(())
    }

    /// `while COND; do BODY; done` (and `until`): the condition and the body, once as they
    /// first run, then, if that changed the directory or a variable, once more from where
    /// every later pass may start (what changed not known): `while cd ..; do …; done` reaches
    /// a new directory at each pass.
    pub(super) fn while_loop(
        &mut self,
        condition: &ast::CompoundList,
        body: &ast::CompoundList,
    ) -> Result<(), ShellError> {
        let before = self.marks();
        self.list(condition)?;
        self.list(body)?;
        let after = self.marks();
        if after.cds > before.cds || after.var_changes > before.var_changes {
            self.forget_changes_since(&before);
            self.list(condition)?;
            self.list(body)?;
        }
        Ok(())
    }

    /// `f` in a subshell: the directory and variables it sets do not leave it.
    pub(super) fn subshell(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<(), ShellError>,
    ) -> Result<(), ShellError> {
        let saved = (
            self.ctx.cwd.clone(),
            self.cwd_known,
            self.cds,
            self.ctx.vars.clone(),
            self.dir_stack.clone(),
        );
        let r = f(self);
        (
            self.ctx.cwd,
            self.cwd_known,
            self.cds,
            self.ctx.vars,
            self.dir_stack,
        ) = saved;
        r
    }

    /// `line`, inside the one being walked (a `bash -c` body, a command substitution), in a
    /// subshell.
    pub(super) fn nested(&mut self, line: &str) -> Result<(), ShellError> {
        self.deeper(|w| w.line(line))
    }

    /// A process substitution's commands (`diff <(sort a) <(sort b)`), in a subshell. Its
    /// word is a pipe to or from them, not a file: the command gets `-` in its place, which
    /// names no file ([`super::found`] and the analysis read it as standard input).
    pub(super) fn process_substitution(
        &mut self,
        sub: &ast::SubshellCommand,
    ) -> Result<(), ShellError> {
        self.deeper(|w| w.list(&sub.list))
    }

    /// `f` one level deeper, in a subshell; refused past [`MAX_DEPTH`].
    fn deeper(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<(), ShellError>,
    ) -> Result<(), ShellError> {
        if self.depth >= MAX_DEPTH {
            return Err(unanalysable(format!(
                "shells, command or process substitutions nested more than {MAX_DEPTH} deep"
            )));
        }
        self.depth += 1;
        // Its standard input is not the loop's list.
        let loop_input = self.loop_input.take();
        let r = self.subshell(f);
        self.loop_input = loop_input;
        self.depth -= 1;
        r
    }

    /// `cd ARGS`: the directory the next commands start from. One that is not there when
    /// the line is checked may fail ([`Walk::cds_that_may_fail`]); one relative to a
    /// directory that is not known leaves it unknown.
    pub(super) fn cd(&mut self, args: &[String]) -> Result<(), ShellError> {
        // `-P` makes the directory the physical one: `cd -P link/..` is the parent of where
        // the link leads, not the directory the line is in.
        let physical = args.iter().any(|a| a == "-P");
        let args: Vec<&String> = args
            .iter()
            .filter(|a| *a != "--" && *a != "-P" && *a != "-L")
            .collect();
        let target = match args.as_slice() {
            [] => self
                .ctx
                .home()
                .ok_or_else(|| unanalysable("`cd` to a home that is not known"))?,
            [d] if d.as_str() == "-" => return Err(unanalysable("`cd -`")),
            [d] if !self.cwd_known && !Path::new(d).is_absolute() => {
                self.cds += 1;
                return Ok(());
            }
            [d] => self.ctx.cwd.join(d),
            _ => return Err(unanalysable("`cd` with several operands")),
        };
        self.ctx.cwd = match std::fs::canonicalize(&target) {
            Ok(real) if physical => real,
            _ => lexical(&target),
        };
        self.cwd_known = true;
        self.cds += 1;
        if !self.ctx.cwd.is_dir() {
            self.cds_that_may_fail += 1;
        }
        Ok(())
    }

    /// `pushd DIR`: `cd DIR`, the directory left kept on the stack for `popd`. Its other
    /// forms (no operand, `+N`, `-N`, `-n`) turn the stack, which the walk does not follow.
    pub(super) fn pushd(&mut self, args: &[String]) -> Result<(), ShellError> {
        let args: Vec<&String> = args.iter().filter(|a| *a != "--").collect();
        let [dir] = args.as_slice() else {
            return Err(unanalysable("`pushd` without exactly one directory"));
        };
        if dir.starts_with(['+', '-']) {
            return Err(unanalysable(format!(
                "`pushd {dir}`, which turns the stack"
            )));
        }
        let left = (self.ctx.cwd.clone(), self.cwd_known);
        self.cd(&[(*dir).clone()])?;
        if let Some(stack) = self.dir_stack.as_mut() {
            stack.push(left);
        }
        Ok(())
    }

    /// `popd`: back to the directory the last `pushd` left. One the line did not push (the
    /// host shell's stack) is refused; after a `pushd` or `popd` that may not have run, the
    /// directory is not known.
    pub(super) fn popd(&mut self, args: &[String]) -> Result<(), ShellError> {
        if !args.is_empty() {
            return Err(unanalysable("`popd` with operands"));
        }
        self.cds += 1;
        match self.dir_stack.as_mut().map(Vec::pop) {
            Some(Some((dir, known))) => (self.ctx.cwd, self.cwd_known) = (dir, known),
            Some(None) => {
                return Err(unanalysable(
                    "`popd` of a directory the line did not `pushd`",
                ));
            }
            None => self.cwd_known = false,
        }
        Ok(())
    }
}

/// `p` with `.` and `..` resolved by name (as `cd` does with its logical path).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}
