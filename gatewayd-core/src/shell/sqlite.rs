//! `sqlite3`, the `SQLite` command-line shell: `sqlite3 [OPTIONS] DB [SQL…]`. The database
//! is read and written, with the journal files `SQLite` keeps beside it. Each SQL argument
//! (and `-cmd`'s) is text the shell runs, read here for what would reach beyond that
//! database: a dot command outside a list of those that only print or set how output looks
//! (`.shell`, `.output`, `.import`, `.read`, `.open`, `.load` run commands or open other
//! files), and SQL naming `ATTACH`, `VACUUM` (`INTO` a file), the shell's file functions
//! (`readfile`, `writefile`, `edit`, `load_extension`) or its tables of files (`fsdir`,
//! `zipfile`, `sqlar`; `fsdir('.env')` reads a file even in `-safe` mode, measured with
//! sqlite 3.40). SQL from the shell's input (no SQL argument) is not seen: forbidden. A
//! database's own views and triggers cannot use those tables (`SQLite` marks them
//! direct-only).
use std::path::{Path, PathBuf};

use super::{ShellError, findings::Findings};

/// sqlite3 3.40's options (`-name`, or `--name`), with how many values each takes.
const OPTIONS: &[(&str, usize)] = &[
    ("append", 0),
    ("ascii", 0),
    ("bail", 0),
    ("batch", 0),
    ("box", 0),
    ("column", 0),
    ("cmd", 1),
    ("csv", 0),
    ("deserialize", 0),
    ("echo", 0),
    ("header", 0),
    ("noheader", 0),
    ("help", 0),
    ("html", 0),
    ("interactive", 0),
    ("json", 0),
    ("line", 0),
    ("list", 0),
    ("lookaside", 2),
    ("markdown", 0),
    ("maxsize", 1),
    ("memtrace", 0),
    ("mmap", 1),
    ("newline", 1),
    ("nofollow", 0),
    ("nullvalue", 1),
    ("pagecache", 2),
    ("quote", 0),
    ("readonly", 0),
    ("safe", 0),
    ("separator", 1),
    ("stats", 0),
    ("table", 0),
    ("tabs", 0),
    ("version", 0),
    ("zip", 0),
];

/// Options that run SQL from a file (`-init`), an archive command (`-A`), or lift safe
/// mode's limits (`-nonce`), each with why.
const FORBIDDEN: &[(&str, &str)] = &[
    ("init", "runs the SQL of a file the check does not read"),
    ("A", "runs an archive command, which writes files"),
    ("nonce", "lifts safe mode's limits"),
    ("vfs", "chooses how SQLite opens files"),
];

/// Dot commands that only print or set how output looks.
const DOT_COMMANDS: &[&str] = &[
    "tables",
    "schema",
    "fullschema",
    "indexes",
    "indices",
    "headers",
    "header",
    "mode",
    "dump",
    "databases",
    "show",
    "help",
    "width",
    "nullvalue",
    "separator",
    "print",
    "timer",
    "changes",
    "stats",
    "dbinfo",
    "eqp",
    "explain",
    "quit",
    "exit",
    "bail",
    "echo",
    "version",
    "lint",
];

/// Words of SQL that reach beyond the database named (case does not matter).
const SQL_WORDS: &[&str] = &[
    "attach",
    "vacuum",
    "readfile",
    "writefile",
    "edit",
    "load_extension",
    "fsdir",
    "zipfile",
    "sqlar",
    "fts3_tokenizer",
    "temp_store_directory",
    "data_store_directory",
];

/// `sqlite3 [OPTIONS] DB [SQL…]`.
pub(super) fn sqlite3(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let mut operands = Vec::new();
    let mut commands = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let Some(name) = word.strip_prefix('-').filter(|n| !n.is_empty()) else {
            operands.push(word.as_str());
            continue;
        };
        let name = name.strip_prefix('-').unwrap_or(name);
        if let Some((_, why)) = FORBIDDEN.iter().find(|(n, _)| *n == name) {
            findings.forbid(word, why);
            return Ok(());
        }
        let Some((_, values)) = OPTIONS.iter().find(|(n, _)| *n == name) else {
            return Err(ShellError::UnknownOption {
                command: "sqlite3".into(),
                option: word.clone(),
            });
        };
        for _ in 0..*values {
            let value = words.next().map_or("", String::as_str);
            if name == "cmd" {
                commands.push(value);
            }
        }
    }
    let Some((db, sql)) = operands.split_first() else {
        findings.forbid("sqlite3", "reads its SQL from its input, which the check does not see: name the database and give each statement as an argument (`sqlite3 app.db '.tables'`)");
        return Ok(());
    };
    commands.extend(sql.iter().copied());
    if commands.is_empty() {
        findings.forbid("sqlite3", "reads its SQL from its input, which the check does not see: give each statement as an argument (`sqlite3 app.db '.tables'`)");
    }
    database(db, findings);
    for text in commands {
        if let Err(why) = check_command(text) {
            findings.forbid(text, &why);
        }
    }
    Ok(())
}

/// The database: read and written, with the journal files beside it; an in-memory one is
/// no file; a `file:` URI is forbidden (its parameters choose how it is opened).
fn database(db: &str, findings: &mut Findings) {
    if db.is_empty() || db == ":memory:" {
        return;
    }
    if db.starts_with("file:") {
        findings.forbid(
            db,
            "is a URI, whose parameters choose how the database is opened: give its path",
        );
        return;
    }
    findings.read(Path::new(db));
    findings.write(Path::new(db));
    for suffix in ["-journal", "-wal", "-shm"] {
        findings.write(&PathBuf::from(format!("{db}{suffix}")));
    }
}

/// One SQL argument: a dot command on a line of its own from [`DOT_COMMANDS`], or SQL
/// without [`SQL_WORDS`]. Err: why not.
fn check_command(text: &str) -> Result<(), String> {
    if let Some(dot) = text.strip_prefix('.') {
        let name = dot.split_whitespace().next().unwrap_or("");
        if text.contains('\n') || !DOT_COMMANDS.contains(&name) {
            return Err(format!(
                "is a dot command the check does not take (only `.{}` and the like, which print); `.shell`, `.output`, `.read`, `.import`, `.open` and `.load` run commands or open other files",
                DOT_COMMANDS[..3].join("`, `.")
            ));
        }
        return Ok(());
    }
    let identifiers = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .map(str::to_ascii_lowercase);
    for word in identifiers {
        if SQL_WORDS.contains(&word.as_str()) {
            return Err(format!(
                "names `{word}`, which reaches files beyond the database (ATTACH and VACUUM INTO open others; the shell's file functions and tables read and write any file)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::shell::test_support::{clean, forbidden, paths};

    #[test]
    fn sqlite3_reads_and_writes_its_database_only() {
        let a = clean("sqlite3 app.db '.tables'");
        assert_eq!(a.reads, paths(&["app.db"]));
        assert_eq!(
            a.writes,
            paths(&["app.db", "app.db-journal", "app.db-wal", "app.db-shm"])
        );
        for line in [
            "sqlite3 -header -column app.db 'select count(*) from users;'",
            "sqlite3 app.db '.schema users' 'PRAGMA table_info(users);'",
            "sqlite3 --json app.db 'select * from t limit 3'",
            "sqlite3 -cmd '.mode box' app.db 'select 1'",
            "sqlite3 :memory: 'select sqlite_version()'",
            "sqlite3 -separator , app.db 'select a, b from t'",
        ] {
            clean(line);
        }
    }

    #[test]
    fn sqlite3_refuses_what_reaches_beyond_its_database() {
        for (line, why) in [
            ("sqlite3 app.db '.shell cat .env'", "dot command"),
            ("sqlite3 app.db '.output ~/.bashrc'", "dot command"),
            ("sqlite3 app.db '.read .env'", "dot command"),
            ("sqlite3 app.db '.tables\n.shell id'", "dot command"),
            (
                "sqlite3 app.db \"select data from fsdir('.env')\"",
                "`fsdir`",
            ),
            (
                "sqlite3 app.db \"SELECT * FROM \\\"FsDir\\\"('/root')\"",
                "`fsdir`",
            ),
            ("sqlite3 app.db \"attach '/tmp/x.db' as x\"", "`attach`"),
            (
                "sqlite3 app.db \"vacuum into '.git/hooks/pre-commit'\"",
                "`vacuum`",
            ),
            (
                "sqlite3 app.db \"select writefile('x', 'y')\"",
                "`writefile`",
            ),
            ("sqlite3 -cmd '.shell id' app.db 'select 1'", "dot command"),
            ("sqlite3 -init setup.sql app.db 'select 1'", "SQL of a file"),
            ("sqlite3 -nonce x app.db 'select 1'", "safe mode"),
            ("sqlite3 app.db", "input"),
            ("sqlite3", "input"),
            ("sqlite3 'file:app.db?mode=rw' 'select 1'", "URI"),
        ] {
            assert!(forbidden(line).contains(why), "{line}: {}", forbidden(line));
        }
        assert_eq!(
            crate::shell::test_support::unknown_option("sqlite3 -frob app.db 'select 1'"),
            crate::shell::test_support::named("sqlite3", "-frob")
        );
    }
}
