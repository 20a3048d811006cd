//! C and C++ compiler drivers (`cc gcc g++ c++ clang clang++`) and Java's `javac` and
//! `java`: their sources are read, what they make is written, and an option that runs,
//! loads or reads something the check cannot follow is forbidden.
//!
//! The drivers' options are many and single-dash (`-Wall`, `-std=c11`, `-fPIC`), so they are
//! read here by name rather than from a table: the options that take a separate value are
//! listed ([`C_VALUES`]); of the others, those that name a file are handled (`-o`, `-MF`,
//! `-include`), those that run or load code are forbidden ([`C_FORBIDDEN`]), and the rest
//! only tune the compilation, unless their value names a path (`-fprofile-generate=/x`),
//! which is forbidden too: such a file is not one the check knows.
use std::path::{Path, PathBuf};

use super::findings::Findings;

/// Options of the C drivers whose value is the next word (or attached: `-Iinclude`).
const C_VALUES: &[&str] = &[
    "-o",
    "-MF",
    "-include",
    "-imacros",
    "-T",
    "-I",
    "-L",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-iprefix",
    "-iwithprefix",
    "-iwithprefixbefore",
    "-x",
    "-D",
    "-U",
    "-l",
    "-MT",
    "-MQ",
    "-u",
    "-e",
    "-z",
    "-arch",
    "-target",
];

/// Options of the C drivers (as prefixes) that run or load a program of their choosing,
/// take more options from elsewhere, or pass options on to the assembler and linker, which
/// the check does not read (`-Wl,-Map,FILE` writes a file).
const C_FORBIDDEN: &[(&str, &str)] = &[
    (
        "-wrapper",
        "runs the compiler's programs through another program",
    ),
    ("-B", "takes the compiler's own programs from a directory"),
    ("-fplugin", "loads a plugin into the compiler"),
    ("-specs", "reads a specs file, which may run programs"),
    ("--specs", "reads a specs file, which may run programs"),
    (
        "-Xclang",
        "passes options on to the compiler proper (`-load` loads code)",
    ),
    ("-load", "loads code into the compiler"),
    (
        "-Wl,",
        "passes options on to the linker, which the check does not read",
    ),
    (
        "-Xlinker",
        "passes options on to the linker, which the check does not read",
    ),
    (
        "-Wa,",
        "passes options on to the assembler, which the check does not read",
    ),
    (
        "-Xassembler",
        "passes options on to the assembler, which the check does not read",
    ),
    (
        "-Wp,",
        "passes options on to the preprocessor, which the check does not read",
    ),
    (
        "-Xpreprocessor",
        "passes options on to the preprocessor, which the check does not read",
    ),
    (
        "-save-temps",
        "writes intermediate files where the check does not follow",
    ),
    (
        "-fdump-",
        "writes dump files where the check does not follow",
    ),
];

/// Long options of the C drivers taken as they are; any other `--` option is refused (gcc's
/// `--output=FILE` is `-o FILE`).
const C_LONG: &[&str] = &["--std=", "--target=", "--version", "--help", "--verbose"];

/// Whether `name` is a C or C++ compiler driver: `cc gcc g++ c++ clang clang++`, or one of
/// them with a version after a dash (`gcc-12`, `clang-16`).
pub(super) fn is_c_driver(name: &str) -> bool {
    const DRIVERS: [&str; 6] = ["cc", "gcc", "g++", "c++", "clang", "clang++"];
    let base = match name.rsplit_once('-') {
        Some((base, version)) if version.chars().all(|c| c.is_ascii_digit() || c == '.') => base,
        _ => name,
    };
    DRIVERS.contains(&base)
}

/// What a C driver makes, from its mode options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CMode {
    /// An executable (`a.out` unless `-o`).
    Link,
    /// One object file per source (`-c`), or assembly (`-S`).
    PerSource(&'static str),
    /// Output to stdout (`-E`, `-M`, `-MM`) or nothing (`-fsyntax-only`).
    NoFile,
}

/// `cc gcc g++ c++ clang clang++` (and their versioned names, `gcc-12`): the sources and
/// objects are read; the output is written: `-o FILE`, else `a.out`, or with `-c`/`-S` each
/// source's `.o`/`.s` where the command runs; `-MD`/`-MMD` write a `.d` beside it.
pub(super) fn c_driver(args: &[String], findings: &mut Findings) {
    let mut output: Option<PathBuf> = None;
    let mut sources: Vec<PathBuf> = Vec::new();
    let mut mode = CMode::Link;
    let mut dependency_files = false;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let w = word.as_str();
        if let Some((_, why)) = C_FORBIDDEN.iter().find(|(p, _)| w.starts_with(p)) {
            findings.forbid(w, why);
            continue;
        }
        if w.starts_with('@') {
            findings.forbid(
                w,
                "reads more options from a file, which the check does not see",
            );
            continue;
        }
        if w == "-" || !w.starts_with('-') {
            if w != "-" {
                findings.read(Path::new(w));
                sources.push(PathBuf::from(w));
            }
            continue;
        }
        if w.starts_with("--") {
            if !C_LONG
                .iter()
                .any(|l| w == *l || (l.ends_with('=') && w.starts_with(l)))
            {
                findings.forbid(w, "is an option the check does not read");
            }
            continue;
        }
        // An option with its value, separate or attached.
        if let Some(option) = C_VALUES.iter().find(|o| w.starts_with(*o)) {
            let attached = &w[option.len()..];
            // `-include` is not `-I nclude`, nor `-x` `-xc`… the longest name wins.
            let longer = C_VALUES
                .iter()
                .any(|o| o.len() > option.len() && w.starts_with(o));
            if !longer {
                let value = if attached.is_empty() {
                    words.next().map(String::as_str)
                } else {
                    Some(attached)
                };
                c_option_value(option, value, &mut output, findings);
                continue;
            }
        }
        match w {
            "-c" => mode = CMode::PerSource("o"),
            "-S" if mode != CMode::PerSource("o") => mode = CMode::PerSource("s"),
            "-E" | "-M" | "-MM" | "-fsyntax-only" => mode = CMode::NoFile,
            "-MD" | "-MMD" => dependency_files = true,
            _ => {
                // `-std=c11`, `-fsanitize=address`: a value that names a path is a file
                // the check does not know.
                if w.split_once('=').is_some_and(|(_, v)| v.contains('/')) {
                    findings.forbid(w, "names a file the check does not read");
                }
            }
        }
    }
    c_outputs(output, &sources, mode, dependency_files, findings);
}

/// One value option of a C driver.
fn c_option_value(
    option: &str,
    value: Option<&str>,
    output: &mut Option<PathBuf>,
    findings: &mut Findings,
) {
    let Some(value) = value else {
        findings.forbid(option, "takes a value, and none is given");
        return;
    };
    match option {
        "-o" => *output = Some(PathBuf::from(value)),
        "-MF" => findings.write(Path::new(value)),
        "-include" | "-imacros" | "-T" => findings.read(Path::new(value)),
        _ => {}
    }
}

/// The files a C driver writes.
fn c_outputs(
    output: Option<PathBuf>,
    sources: &[PathBuf],
    mode: CMode,
    dependency_files: bool,
    findings: &mut Findings,
) {
    let beside = |source: &Path, extension: &str| {
        PathBuf::from(source.file_name().unwrap_or(source.as_os_str())).with_extension(extension)
    };
    let made: Vec<PathBuf> = match (mode, output) {
        (_, Some(o)) => vec![o],
        (CMode::NoFile, None) => Vec::new(),
        // `gcc --version`, `cc -v`: no source, nothing made.
        (_, None) if sources.is_empty() => Vec::new(),
        (CMode::Link, None) => vec![PathBuf::from("a.out")],
        (CMode::PerSource(extension), None) => {
            sources.iter().map(|s| beside(s, extension)).collect()
        }
    };
    for file in &made {
        findings.write(file);
        if dependency_files {
            findings.write(&file.with_extension("d"));
        }
    }
}

/// javac's options whose value is the next word.
const JAVAC_VALUES: &[&str] = &[
    "-d",
    "-s",
    "-h",
    "-cp",
    "-classpath",
    "--class-path",
    "-sourcepath",
    "--source-path",
    "-p",
    "--module-path",
    "--module-source-path",
    "--upgrade-module-path",
    "--system",
    "-processorpath",
    "--processor-path",
    "--processor-module-path",
    "-processor",
    "-encoding",
    "-source",
    "--source",
    "-target",
    "--target",
    "--release",
    "-implicit",
    "--add-modules",
    "--limit-modules",
    "--module",
    "-m",
    "--add-exports",
    "--add-reads",
    "--patch-module",
    "--default-module-for-created-files",
];

/// `javac SOURCES…`: the sources are read; the classes are written under `-d DIR`, else
/// beside each source (`-s` and `-h` name directories that are written too). `-J` (options
/// for the JVM javac runs in), `-Xplugin` and `@FILE` are forbidden.
pub(super) fn javac(args: &[String], findings: &mut Findings) {
    let mut class_dir: Option<PathBuf> = None;
    let mut sources = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let w = word.as_str();
        if w.starts_with("-J") || w.starts_with("-Xplugin") || w.starts_with('@') {
            findings.forbid(
                w,
                "runs or loads code, or reads options, the check does not see",
            );
        } else if JAVAC_VALUES.contains(&w) {
            let value = words.next().map(String::as_str).unwrap_or_default();
            match w {
                "-d" => class_dir = Some(PathBuf::from(value)),
                "-s" | "-h" => findings.write(Path::new(value)),
                _ => {}
            }
        } else if !w.starts_with('-') {
            findings.read(Path::new(w));
            sources.push(PathBuf::from(w));
        }
    }
    match class_dir {
        Some(dir) => findings.write(&dir),
        None => sources
            .iter()
            .for_each(|s| findings.write(&s.with_extension("class"))),
    }
}

/// java's options whose value is the next word.
const JAVA_VALUES: &[&str] = &[
    "-cp",
    "-classpath",
    "--class-path",
    "-p",
    "--module-path",
    "--upgrade-module-path",
    "--add-modules",
    "--enable-native-access",
    "--add-exports",
    "--add-opens",
    "--add-reads",
    "--limit-modules",
    "--patch-module",
    "--source",
];

/// `java [OPTIONS] CLASS [ARGS…]`, `java -jar JAR [ARGS…]`, `java FILE.java [ARGS…]`: the jar
/// or source file is read (a class is looked for on the class path); the program's
/// arguments are read where they may be paths, as an interpreter's are. `-agentpath`,
/// `-agentlib`, `-javaagent` (code loaded before the program) and `@FILE` are forbidden.
pub(super) fn java(args: &[String], findings: &mut Findings) {
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let w = word.as_str();
        if ["-agentpath", "-agentlib", "-javaagent", "@"]
            .iter()
            .any(|p| w.starts_with(p))
        {
            findings.forbid(
                w,
                "loads code before the program, or reads options, the check does not see",
            );
        } else if JAVA_VALUES.contains(&w) {
            words.next();
        } else if w == "-jar" {
            if let Some(jar) = words.next() {
                findings.read(Path::new(jar));
            }
            break;
        } else if !w.starts_with('-') {
            if Path::new(w)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("java"))
            {
                findings.read(Path::new(w));
            }
            break;
        }
    }
    for argument in words {
        findings.read_argument(argument, Path::new(argument));
    }
}

#[cfg(test)]
#[path = "compilers_tests.rs"]
mod tests;
