use crate::shell::test_support::{clean, forbidden, paths};

#[test]
fn a_c_driver_reads_its_sources_and_writes_what_it_makes() {
    let a = clean("gcc src/main.c -o build/main");
    assert_eq!(a.reads, paths(&["src/main.c"]));
    assert_eq!(a.writes, paths(&["build/main"]));
    assert_eq!(clean("cc -O2 main.c").writes, paths(&["a.out"]));
    assert_eq!(clean("clang -omain main.c").writes, paths(&["main"]));
    let a = clean("g++ -std=c++17 -Wall -Iinclude -c src/a.cpp lib/b.cc");
    assert_eq!(a.reads, paths(&["src/a.cpp", "lib/b.cc"]));
    assert_eq!(a.writes, paths(&["a.o", "b.o"]));
    assert_eq!(clean("gcc -S x.c").writes, paths(&["x.s"]));
    assert_eq!(
        clean("gcc -MMD -c x.c -o out/x.o").writes,
        paths(&["out/x.o", "out/x.d"])
    );
    assert!(clean("gcc -E x.c").writes.is_empty());
    assert!(clean("gcc --version").writes.is_empty());
    assert!(clean("gcc-12 -fsyntax-only x.c").writes.is_empty());
    let a = clean("gcc -include /etc/hosts -lm -L lib x.c -o x");
    assert_eq!(a.reads, paths(&["/etc/hosts", "x.c"]));
    assert_eq!(a.writes, paths(&["x"]));
}

#[test]
fn a_c_driver_refuses_what_runs_loads_or_names_an_unseen_file() {
    for (line, named) in [
        ("gcc -wrapper /tmp/w x.c", "-wrapper"),
        ("gcc -B/tmp/bin x.c", "-B/tmp/bin"),
        ("gcc -fplugin=/tmp/p.so x.c", "-fplugin"),
        ("gcc -specs=/tmp/s x.c", "-specs"),
        ("clang -Xclang -load -Xclang /tmp/p.so x.c", "-Xclang"),
        ("gcc -Wl,-Map,/home/u/.bashrc x.c", "-Wl,"),
        ("gcc @/tmp/args x.c", "@/tmp/args"),
        ("gcc --output=/home/u/.bashrc x.c", "--output"),
        ("gcc -fprofile-generate=/home/u/p x.c", "-fprofile-generate"),
        ("gcc -save-temps x.c", "-save-temps"),
    ] {
        assert!(
            forbidden(line).contains(named),
            "{line}: {}",
            forbidden(line)
        );
    }
    clean("gcc -fsanitize=address -march=native -std=c11 -Werror=format x.c");
}

#[test]
fn javac_and_java() {
    let a = clean("javac -d out src/Main.java");
    assert_eq!(a.reads, paths(&["src/Main.java"]));
    assert_eq!(a.writes, paths(&["out"]));
    assert_eq!(clean("javac Main.java").writes, paths(&["Main.class"]));
    assert!(clean("java -cp out Main a b").writes.is_empty());
    assert_eq!(clean("java -jar app.jar").reads, paths(&["app.jar"]));
    assert_eq!(clean("java Main.java").reads, paths(&["Main.java"]));
    assert!(forbidden("javac -J-javaagent:/tmp/a.jar Main.java").contains("-J"));
    assert!(forbidden("java -javaagent:/tmp/a.jar Main").contains("-javaagent"));
    assert!(forbidden("java @/tmp/args Main").contains('@'));
}

#[test]
fn versioned_drivers_are_drivers() {
    for name in [
        "cc",
        "gcc",
        "g++",
        "c++",
        "clang",
        "clang++",
        "gcc-12",
        "clang-16.0",
    ] {
        assert!(super::is_c_driver(name), "{name}");
    }
    for name in ["gccgo", "x86_64-linux-gnu-gcc", "ccache", "clang-format"] {
        assert!(!super::is_c_driver(name), "{name}");
    }
}
