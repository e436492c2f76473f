// SPDX-License-Identifier: GPL-2.0-only
//! The source tree by kind: the scheduler (src/sched, src/bpf) never depends on a shipped
//! tool (src/tools, src/bpf/tools) or on test-only code (src/testing, src/bpf/testing).

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `dir` (not recursive) whose name ends with `ext`.
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.to_string_lossy().ends_with(ext))
        .collect();
    out.sort();
    out
}

/// The module names of the `.rs` files of `dir`.
fn modules(dir: &Path) -> Vec<String> {
    files(dir, ".rs")
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect()
}

/// Rust source without comments (line comments only: the tree has no block comments).
fn rust_code(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths in Rust `code` that reach one of `mods` (of folder `room`): `crate::m`,
/// `room::m`, `crate::room`, `super::m`.
fn reaches(code: &str, room: &str, mods: &[String]) -> Vec<String> {
    let mut hits = vec![];
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut paths = vec![format!("crate::{room}")];
    for m in mods {
        for p in ["crate", room, "super"] {
            paths.push(format!("{p}::{m}"));
        }
    }
    for p in paths {
        for (i, _) in code.match_indices(&p) {
            let before = code[..i].chars().next_back();
            let after = code[i + p.len()..].chars().next();
            if !before.is_some_and(|c| is_ident(c) || c == ':') && !after.is_some_and(is_ident) {
                hits.push(p.clone());
            }
        }
    }
    hits
}

/// The names `crate::NAME` in Rust `code` reaches (the first path segment after `crate::`).
fn crate_names(code: &str) -> Vec<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices("crate::")
        .filter(|(i, _)| {
            !code[..*i]
                .chars()
                .next_back()
                .is_some_and(|c| is_ident(c) || c == ':')
        })
        .map(|(i, p)| {
            code[i + p.len()..]
                .chars()
                .take_while(|&c| is_ident(c))
                .collect()
        })
        .collect()
}

/// The headers a BPF source includes from another folder (`tools/...`, `testing/...`).
fn bpf_includes_out(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("#include"))
        .map(|r| r.trim().trim_matches(|c| c == '"' || c == '<' || c == '>'))
        .filter(|h| h.contains("tools/") || h.contains("testing/"))
        .map(str::to_string)
        .collect()
}

/// A Rust file's path (from the repository) and its code: no comments, and none of its own
/// unit tests (a module's tests may use test-only code).
fn production_code(f: &Path) -> (String, String) {
    let text = std::fs::read_to_string(f).unwrap();
    let code = rust_code(text.split("#[cfg(test)]").next().unwrap());
    (f.strip_prefix(root()).unwrap().display().to_string(), code)
}

#[test]
fn the_scheduler_imports_no_tool_and_no_test_code() {
    let src = root().join("src");
    let rooms = [
        ("tools", modules(&src.join("tools"))),
        ("testing", modules(&src.join("testing"))),
    ];
    assert!(rooms[0].1.contains(&"calibrate".to_string()), "{rooms:?}");
    let mut sched = files(&src.join("sched"), ".rs");
    sched.extend(
        files(&src, ".rs")
            .into_iter()
            .filter(|p| !p.ends_with("main.rs")),
    );
    assert!(sched.len() >= 8, "{sched:?}");
    let mut bad = vec![];
    for f in &sched {
        let (path, code) = production_code(f);
        for (room, mods) in &rooms {
            bad.extend(
                reaches(&code, room, mods)
                    .iter()
                    .map(|h| format!("{path}: {h}")),
            );
        }
    }
    let bpf = src.join("bpf");
    for f in files(&bpf, ".h").into_iter().chain(files(&bpf, ".c")) {
        for h in bpf_includes_out(&std::fs::read_to_string(&f).unwrap()) {
            bad.push(format!(
                "{}: #include {h}",
                f.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert_none(&bad, "the scheduler reaches into a tool or test code");
}

/// A scheduler file reaches only the scheduler's modules and the generated bindings: not
/// the entry point's items (main.rs dispatches to the tools), so nothing of the scheduler
/// depends on a tool through main.rs either.
#[test]
fn the_scheduler_reaches_only_scheduler_modules() {
    let src = root().join("src");
    let allowed = ["sched", "bpf_intf", "bpf_skel"];
    let mut bad = vec![];
    for f in files(&src.join("sched"), ".rs") {
        let (path, code) = production_code(&f);
        let out = crate_names(&code)
            .into_iter()
            .filter(|n| !allowed.contains(&n.as_str()));
        bad.extend(out.map(|n| format!("{path}: crate::{n}")));
    }
    assert_none(&bad, "the scheduler reaches outside src/sched");
}

/// Does Rust `code` define item `name` (not merely import it)?
fn defined_in(code: &str, name: &str) -> bool {
    ["fn", "struct", "enum", "const", "static", "type", "trait"]
        .iter()
        .any(|k| {
            code.match_indices(&format!("{k} {name}")).any(|(i, p)| {
                !code[i + p.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
}

/// Every module is reached by its full path (`crate::sched::loader`, `crate::tools::cost`):
/// main.rs re-exports no short name, so `crate::NAME` is a folder, a binding or an item
/// main.rs itself defines (`crate::Cli`).
#[test]
fn every_module_is_reached_by_its_full_path() {
    let src = root().join("src");
    let roots = ["sched", "tools", "testing", "bpf_intf", "bpf_skel"];
    let mut rs = files(&src, ".rs");
    for room in ["sched", "tools", "testing"] {
        rs.extend(files(&src.join(room), ".rs"));
    }
    assert!(rs.len() >= 20, "{rs:?}");
    let main = rust_code(&std::fs::read_to_string(src.join("main.rs")).unwrap());
    assert!(defined_in(&main, "Cli") && !defined_in(&main, "RunOpts"));
    let mut bad = vec![];
    // this file's own paths are the scans' test data
    let skip = ["testing/layout_test.rs"];
    for f in rs.iter().filter(|f| !skip.iter().any(|s| f.ends_with(s))) {
        let text = std::fs::read_to_string(f).unwrap();
        let path = f.strip_prefix(root()).unwrap().display().to_string();
        let short = crate_names(&rust_code(&text))
            .into_iter()
            .filter(|n| !roots.contains(&n.as_str()) && !defined_in(&main, n));
        bad.extend(short.map(|n| format!("{path}: crate::{n}")));
    }
    assert_none(
        &bad,
        "a module reached by a short name (main.rs re-exports none)",
    );
}

/// The mutation check of the scan: each way of naming a tool module is seen, a
/// comment, a longer name or a production module is not.
#[test]
fn the_layout_scan_sees_imports_not_comments() {
    let mods = vec!["calibrate".to_string(), "cost".to_string()];
    let r = |t: &str| reaches(&rust_code(t), "tools", &mods);
    assert_eq!(r("use crate::calibrate::BUCKETS;"), ["crate::calibrate"]);
    assert_eq!(r("let x = crate::tools::cost::f();"), ["crate::tools"]);
    assert_eq!(r("use super::cost;"), ["super::cost"]);
    assert!(r("// crate::calibrate::fit_on").is_empty());
    assert!(r("use crate::costs; use crate::sis_fit::fit_on;").is_empty());
    assert_eq!(
        bpf_includes_out("#include \"tools/cost.bpf.h\"\n#include \"intf.h\""),
        ["tools/cost.bpf.h"]
    );
    assert!(bpf_includes_out("#include \"sis.bpf.h\"").is_empty());
    assert_eq!(
        crate_names("use crate::RunOpts; x = crate::opts::full_version(); // crate::ab"),
        ["RunOpts", "opts", "ab"]
    );
    assert_eq!(
        crate_names("use scx_crate::x; y::crate::z"),
        Vec::<String>::new()
    );
    assert_eq!(
        crate_names(&rust_code("// crate::ab")),
        Vec::<String>::new()
    );
    assert_eq!(
        crate_names("use crate::sched::loader; crate::tools::cost::f(); crate::loader::g()"),
        ["sched", "tools", "loader"]
    );
}

/// The 64-byte line of `off` in a struct aligned to 64 (intf.h's aligned(64)).
fn line(off: usize) -> usize {
    off / 64
}

/// What the loader rewrites every interval sits on a line of its own, apart from what
/// BPF writes on the CPU's own events (cpu_ctx: idle transitions, wake-ups, switches) and
/// from what every wake-up reads (llc_ctx's first line): a loader write invalidates only
/// its own line. Each struct stays two lines.
#[test]
fn loader_writes_sit_off_bpf_lines() {
    use crate::bpf_intf::{cpu_ctx, llc_ctx};
    use std::mem::{align_of, offset_of, size_of};
    assert_eq!((size_of::<cpu_ctx>(), align_of::<cpu_ctx>()), (128, 64));
    assert_eq!((size_of::<llc_ctx>(), align_of::<llc_ctx>()), (128, 64));
    let bpf_cpu = [
        ("idle_ns", offset_of!(cpu_ctx, idle_ns)),
        ("idle_start", offset_of!(cpu_ctx, idle_start)),
        ("avg_idle", offset_of!(cpu_ctx, avg_idle)),
        ("wake_avg_idle", offset_of!(cpu_ctx, wake_avg_idle)),
        ("wake_stamp", offset_of!(cpu_ctx, wake_stamp)),
        ("avg_scan_cost", offset_of!(cpu_ctx, avg_scan_cost)),
        ("last_pid", offset_of!(cpu_ctx, last_pid)),
        ("nr_queued", offset_of!(cpu_ctx, nr_queued)),
    ];
    let sharing = |util: usize| -> Vec<&str> {
        bpf_cpu
            .iter()
            .filter(|(_, off)| line(*off) == line(util))
            .map(|(name, _)| *name)
            .collect()
    };
    let none: Vec<&str> = vec![];
    assert_eq!(sharing(offset_of!(cpu_ctx, util)), none, "cpu_ctx.util");
    // the check sees the older layout (util at byte 40, after wake_stamp, on the CPU's line)
    assert_eq!(sharing(40)[..2], ["idle_ns", "idle_start"]);
    let wake_llc = [
        ("nr_idle_scan", offset_of!(llc_ctx, nr_idle_scan)),
        ("has_idle_cores", offset_of!(llc_ctx, has_idle_cores)),
        ("weight", offset_of!(llc_ctx, weight)),
    ];
    let util_sum = line(offset_of!(llc_ctx, util_sum));
    for (name, off) in wake_llc {
        assert_ne!(
            line(off),
            util_sum,
            "llc_ctx.util_sum shares a line with {name}"
        );
    }
}

/// C source without comments (`/* */` and `//`), line breaks kept.
fn c_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                out.push_str(&rest[..b]);
                let end = rest[b..].find("*/").map_or(rest.len(), |e| b + e + 2);
                out.extend(rest[b..end].chars().filter(|&c| c == '\n'));
                rest = &rest[end..];
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                rest = &rest[rest[l..].find('\n').map_or(rest.len(), |e| l + e)..];
            }
            _ => {
                out.push_str(rest);
                rest = "";
            }
        }
    }
    out
}

/// The feature bits (`FEAT_*`) in C `code` that are not the bit argument of `feat_on(word,
/// F)` or `sis_feat(c, F)`: a test of a feature bit written another way (`feat & F`).
fn raw_feature_bit_tests(code: &str) -> Vec<String> {
    let mut bad = vec![];
    for l in code.lines() {
        for (i, _) in l.match_indices("FEAT_") {
            if l[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let before = l[..i].trim_end();
            let call = ["feat_on(", "sis_feat("]
                .iter()
                .filter_map(|h| before.rfind(h).map(|k| k + h.len() - 1))
                .max();
            let inside = call.is_some_and(|k| {
                let depth = before[k..].chars().fold(0i32, |d, c| match c {
                    '(' => d + 1,
                    ')' => d - 1,
                    _ => d,
                });
                depth == 1 && before.ends_with(',')
            });
            if !inside {
                bad.push(l.trim().to_string());
            }
        }
    }
    bad
}

/// One idiom for testing a feature bit in BPF: `feat_on(word, FEAT_X)` (sis_ctx.bpf.h), or
/// `sis_feat(c, FEAT_X)` over a wake-up's word, which calls it; intf.h only defines them.
#[test]
fn every_feature_bit_test_goes_through_feat_on() {
    let bpf = root().join("src/bpf");
    let mut srcs = vec![];
    for d in [bpf.clone(), bpf.join("tools"), bpf.join("testing")] {
        srcs.extend(files(&d, ".h"));
        srcs.extend(files(&d, ".c"));
    }
    let mut bad = vec![];
    let mut seen = 0;
    for f in srcs.iter().filter(|f| !f.ends_with("intf.h")) {
        let code = c_code(&std::fs::read_to_string(f).unwrap());
        seen += code.matches("FEAT_").count();
        let path = f.strip_prefix(root()).unwrap().display().to_string();
        bad.extend(
            raw_feature_bit_tests(&code)
                .into_iter()
                .map(|l| format!("{path}: {l}")),
        );
    }
    assert!(seen >= 10, "only {seen} feature bits seen in src/bpf");
    assert_none(&bad, "a feature bit tested without feat_on()");
}

/// The mutation check of the scan: each other way of testing a bit is seen, the helpers'
/// arguments and comments are not.
#[test]
fn the_feature_bit_scan_sees_raw_tests() {
    let r = |t: &str| raw_feature_bit_tests(&c_code(t));
    assert_eq!(
        r("return (feat & FEAT_WAKE_RESCUE) && !pinned;"),
        ["return (feat & FEAT_WAKE_RESCUE) && !pinned;"]
    );
    scan_finds(
        r,
        &[
            ("if (!(features() & FEAT_X) || y)", 1),
            ("if (feat_on(features() & FEAT_X, FEAT_Y))", 1),
            ("if (feat_on(feat, FEAT_Y) && (feat & FEAT_Z))", 1),
            ("if (!feat_on(features(), FEAT_X) || y)", 0),
            ("if (sis_feat(c, FEAT_SIS_UTIL)) {", 0),
            ("/* (feat & FEAT_X) */ x = 1; // feat & FEAT_Y", 0),
            ("/*\n * feat & FEAT_X\n */", 0),
            ("u64 SIS_FEAT_X = 1;", 0),
        ],
    );
}

/// A scan's mutation check: `scan` finds in each text of `cases` the number beside it.
fn scan_finds(scan: impl Fn(&str) -> Vec<String>, cases: &[(&str, usize)]) {
    for &(text, n) in cases {
        assert_eq!(scan(text).len(), n, "{text:?}: {:?}", scan(text));
    }
}

/// What `scan` finds in the text of each of `files`, each line led by the file's path.
fn findings(files: &[PathBuf], scan: impl Fn(&str) -> Vec<String>) -> Vec<String> {
    let mut out = vec![];
    for f in files {
        let path = f.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(f).unwrap();
        out.extend(scan(&text).into_iter().map(|l| format!("{path}: {l}")));
    }
    out
}

/// The functions of Rust `text` (rustfmt's layout: a function ends at the first `}` at the
/// indentation of its `fn` line) longer than `max` lines with no reason: no comment line
/// `// long: WHY` (or `/// long: WHY`) among the comment and attribute lines above it.
/// Each as `NAME (N lines, line L)`.
fn long_functions(text: &str, max: usize) -> Vec<String> {
    let fn_line =
        regex::Regex::new(r"^(\s*)(pub(\([a-z]+\))? )?(const )?(unsafe )?fn (\w+)").expect("regex");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![];
    for (i, l) in lines.iter().enumerate() {
        let Some(m) = fn_line.captures(l) else {
            continue;
        };
        let indent = &m[1];
        let end = lines[i..]
            .iter()
            .position(|e| e.starts_with(indent) && e[indent.len()..].starts_with('}'))
            .map_or(lines.len() - 1, |k| i + k);
        let n = end - i + 1;
        if n <= max {
            continue;
        }
        let above = lines[..i]
            .iter()
            .rev()
            .map(|a| a.trim())
            .take_while(|a| a.starts_with("//") || a.starts_with("#["));
        let reason = above
            .map(|a| a.trim_start_matches('/').trim())
            .any(|a| a.starts_with("long:") && a.len() > "long:".len());
        if !reason {
            out.push(format!("{} ({n} lines, line {})", &m[6], i + 1));
        }
    }
    out
}

/// A shipped tool's steps are named functions: none longer than 80 lines unless a
/// `// long:` comment above it says why.
#[test]
fn no_tool_function_over_80_lines_without_a_reason() {
    let tools = files(&root().join("src/tools"), ".rs");
    assert!(tools.len() >= 8, "{tools:?}");
    let bad = findings(&tools, |text| long_functions(text, 80));
    assert_none(
        &bad,
        "functions over 80 lines in src/tools without a `// long:` reason",
    );
}

/// The mutation check of the length scan: 81 lines are seen, 80 are not, nor 81 with a
/// reason; a nested function ends at its own brace.
#[test]
fn the_length_scan_sees_long_functions() {
    let body = |n: usize| "    x();\n".repeat(n);
    let f = |head: &str, n: usize| format!("{head}fn f() {{\n{}}}\n", body(n - 2));
    assert_eq!(long_functions(&f("", 81), 80), ["f (81 lines, line 1)"]);
    assert!(long_functions(&f("", 80), 80).is_empty());
    assert!(long_functions(&f("/// Doc.\n// long: one table\n#[test]\n", 81), 80).is_empty());
    assert_eq!(long_functions(&f("// long:\n", 81), 80).len(), 1);
    let nested = format!(
        "mod m {{\n    pub fn g() {{\n    }}\n{}}}\n",
        "    const X: u8 = 0;\n".repeat(90)
    );
    assert!(long_functions(&nested, 80).is_empty());
}

/// The feature bits in Rust `code` spelled another way than `features::bit::NAME`: intf.h's
/// bindgen constant (`sis_feature_FEAT_X`: features.rs alone derives the bits from it), or a
/// number where a feature word is set, combined or compared (`feat = 0x10`,
/// `features: 1 << 8`, `feat_word & 4`, `.bit, 256`).
fn raw_feature_bits(code: &str) -> Vec<String> {
    let number = r"(0x[0-9a-fA-F_]+|[1-9][0-9_]*|1\s*<<\s*[0-9]+)\b";
    let word = regex::Regex::new(&format!(
        r"(\b\w*feat\w*\s*(=|:|\|=|\||&|&=|==|!=)|\.bit\s*(==|!=|,))\s*!?\(?{number}"
    ))
    .expect("regex");
    code.lines()
        .filter(|l| l.contains("sis_feature_FEAT_") || word.is_match(l))
        .map(|l| l.trim().to_string())
        .collect()
}

/// One idiom for a feature bit in Rust: `features::bit::NAME`, generated from intf.h's enum
/// through bindgen; never its number, nor the bindgen constant outside features.rs.
#[test]
fn every_rust_feature_bit_is_named_through_features_bit() {
    let src = root().join("src");
    let mut rs = files(&src, ".rs");
    for room in ["sched", "tools", "testing"] {
        rs.extend(files(&src.join(room), ".rs"));
    }
    // this file's strings are the scan's test data; features.rs derives the bits
    let skip = ["testing/layout_test.rs", "sched/features.rs"];
    rs.retain(|f| !skip.iter().any(|s| f.ends_with(s)));
    assert!(rs.len() >= 20, "{rs:?}");
    let bad = findings(&rs, |text| raw_feature_bits(&rust_code(text)));
    assert_none(
        &bad,
        "a feature bit spelled as a number or a bindgen constant (use features::bit::NAME)",
    );
}

/// The mutation check of the feature-bit scan.
#[test]
fn the_feature_bit_number_scan_sees_numbers() {
    scan_finds(
        |t| raw_feature_bits(&rust_code(t)),
        &[
            ("        d.feat = 0x10;", 1),
            ("features: 256,", 1),
            ("let w = feat_word | 1 << 8;", 1),
            ("assert_eq!(FEATURES[4].bit, 256);", 1),
            ("let b = bi::sis_feature_FEAT_SIS_UTIL as u64;", 1),
            ("d.feat = bit::SIS_UTIL | bit::SIS_CORE;", 0),
            ("d.feat = 0; let features = preset(p);", 0),
            ("// feat = 0x10", 0),
            ("let words = 4;", 0),
        ],
    );
}

/// The preprocessor conditionals of C `text` that switch code: every `#if`, `#ifdef`,
/// `#elif`, `#else` and `#error` line, and each `#ifndef X` not followed by `#define X` (an
/// include guard or a default) or that is not intf.h's test for the kernel's types.
fn preprocessor_switches(text: &str) -> Vec<String> {
    let code = c_code(text);
    let lines: Vec<&str> = code
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut bad = vec![];
    for (i, l) in lines.iter().enumerate() {
        let Some(d) = l.strip_prefix('#').map(str::trim_start) else {
            continue;
        };
        if let Some(name) = d.strip_prefix("ifndef ").map(str::trim) {
            let next = lines
                .get(i + 1)
                .map(|n| n.split_whitespace().collect::<Vec<_>>());
            let default = next.is_some_and(|n| n.len() >= 2 && n[0] == "#define" && n[1] == name);
            if default || name == "__VMLINUX_H__" {
                continue;
            }
        } else if !["if", "elif", "else", "error"].iter().any(|k| {
            d.split_whitespace()
                .next()
                .is_some_and(|w| w.starts_with(k))
        }) {
            continue;
        }
        bad.push(l.to_string());
    }
    bad
}

/// The quoted `#include "..."` names of C `text`, in order (comments aside).
fn quoted_includes(text: &str) -> Vec<String> {
    c_code(text)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#include"))
        .filter_map(|r| r.trim().strip_prefix('"'))
        .filter_map(|r| r.split('"').next())
        .map(str::to_string)
        .collect()
}

/// Does C `text` include a header after its first line of code (a mid-file include)?
fn includes_after_code(text: &str) -> bool {
    let code = c_code(text);
    let mut seen_code = false;
    for l in code.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if l.starts_with("#include") && seen_code {
            return true;
        }
        seen_code |= !l.starts_with('#');
    }
    false
}

/// The functions C `text` declares (`want_proto`: prototypes, `...);`) or defines, among
/// its `static __always_inline` functions.
fn inline_fns(text: &str, want_proto: bool) -> Vec<String> {
    c_code(text)
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("static __always_inline") && l.ends_with(");") == want_proto)
        .filter_map(|l| l.split('(').next())
        .filter_map(|l| l.split([' ', '*']).next_back())
        .map(str::to_string)
        .collect()
}

/// Fails, naming `what` and each finding on a line of its own, when there is any.
fn assert_none(bad: &[String], what: &str) {
    assert!(bad.is_empty(), "{what}:\n{}", bad.join("\n"));
}

/// The production BPF code (the scheduler's object: src/bpf's own files).
fn bpf_production() -> Vec<PathBuf> {
    let bpf = root().join("src/bpf");
    let mut out = files(&bpf, ".h");
    out.extend(files(&bpf, ".c"));
    assert!(out.len() >= 14, "{out:?}");
    out
}

fn rel(f: &Path) -> String {
    f.strip_prefix(root()).unwrap().display().to_string()
}

/// No switch between production and test code: a production header holds no `#if`/`#ifdef`
/// (nor `#else`, `#error`), only include guards and defaults (`#ifndef X` + `#define X`);
/// the host objects plug in through the seam's prototypes instead (sis_ctx.bpf.h).
#[test]
fn production_bpf_holds_no_preprocessor_switch() {
    let mut bad = vec![];
    for f in bpf_production() {
        for l in preprocessor_switches(&std::fs::read_to_string(&f).unwrap()) {
            bad.push(format!("{}: {l}", rel(&f)));
        }
    }
    assert_none(&bad, "a preprocessor switch in production BPF code");
}

/// One seam, one plug-in style: sis_ctx.bpf.h declares the knobs' accessors and the
/// primitives as prototypes; scx_prims.bpf.h (sched_ext) and tools/synth.bpf.h (the synthetic
/// machine) each define every one of them, the knobs' accessors through the one header both
/// include, knobs.bpf.h (`SIS_KNOBS(q)`, which each instantiates), and nothing else does;
/// only main.bpf.c includes the sched_ext implementation, no production file the synthetic
/// one, and nothing but the two implementations the knobs.
#[test]
fn both_implementations_define_every_primitive_of_the_seam() {
    let bpf = root().join("src/bpf");
    let read = |p: &str| std::fs::read_to_string(bpf.join(p)).unwrap();
    let mut protos = inline_fns(&read("sis_ctx.bpf.h"), true);
    protos.sort();
    assert!(protos.len() >= 15, "{protos:?}");
    let mut knobs = inline_fns(&read("knobs.bpf.h"), false);
    knobs.sort();
    let accessors = [
        "sis_imbalance_pct",
        "sis_shard_cpus",
        "sis_slice_ns",
        "sis_topo",
    ];
    assert_eq!(
        knobs, accessors,
        "knobs.bpf.h defines the knobs' accessors, no more"
    );
    for imp in ["scx_prims.bpf.h", "tools/synth.bpf.h"] {
        let text = read(imp);
        let mut defs: Vec<String> = inline_fns(&text, false)
            .into_iter()
            .filter(|d| protos.contains(d))
            .collect();
        if quoted_includes(&text).iter().any(|h| h == "knobs.bpf.h") {
            assert!(
                c_code(&text).contains("SIS_KNOBS("),
                "{imp} includes knobs.bpf.h without SIS_KNOBS(q)"
            );
            defs.extend(knobs.iter().cloned());
        }
        defs.sort();
        assert_eq!(
            defs, protos,
            "{imp} defines these of sis_ctx.bpf.h's primitives"
        );
    }
    let mut srcs = bpf_production();
    for d in ["tools", "testing"] {
        srcs.extend(files(&bpf.join(d), ".h"));
        srcs.extend(files(&bpf.join(d), ".c"));
    }
    let mut bad = vec![];
    for f in &srcs {
        let path = rel(f);
        let text = std::fs::read_to_string(f).unwrap();
        let implementation = path.ends_with("scx_prims.bpf.h") || path.ends_with("synth.bpf.h");
        if !implementation && !path.ends_with("/knobs.bpf.h") {
            for d in inline_fns(&text, false)
                .iter()
                .filter(|d| protos.contains(d))
            {
                bad.push(format!("{path}: defines the primitive {d}"));
            }
        }
        if !implementation && quoted_includes(&text).iter().any(|h| h == "knobs.bpf.h") {
            bad.push(format!("{path}: #include \"knobs.bpf.h\""));
        }
        if path.starts_with("src/bpf/tools/") || path.starts_with("src/bpf/testing/") {
            continue;
        }
        for h in quoted_includes(&text) {
            if h.ends_with("synth.bpf.h")
                || (h == "scx_prims.bpf.h" && !path.ends_with("main.bpf.c"))
            {
                bad.push(format!("{path}: #include \"{h}\""));
            }
        }
    }
    assert_none(&bad, "the seam plugged in elsewhere");
}

/// No object depends on include order beyond "interface, then implementation, then users":
/// every object that runs the scheduler's code includes sis_ctx.bpf.h first (intf.h aside),
/// one implementation next, and no header after its first line of code.
#[test]
fn every_object_includes_interface_then_implementation_then_users() {
    let bpf = root().join("src/bpf");
    let mut objs = files(&bpf, ".c");
    for d in ["tools", "testing"] {
        objs.extend(files(&bpf.join(d), ".c"));
    }
    let mut bad = vec![];
    let mut seam_users = 0;
    for f in &objs {
        let path = rel(f);
        let text = std::fs::read_to_string(f).unwrap();
        if includes_after_code(&text) {
            bad.push(format!("{path}: a header included after code"));
        }
        let inc: Vec<String> = quoted_includes(&text)
            .into_iter()
            // the interfaces shared with Rust (intf.h, the tools' tool_intf.h, the host
            // test's test_intf.h) hold no code
            .filter(|h| {
                let name = h.rsplit('/').next().unwrap_or(h);
                !["intf.h", "tool_intf.h", "test_intf.h"].contains(&name)
            })
            .collect();
        // a tracer: none of the seam, only the seam-free headers (pure functions of intf.h's
        // types: the wait buckets, the idle time's writes)
        if inc
            .iter()
            .all(|h| ["wait_hist.bpf.h", "idle_time.bpf.h"].contains(&h.as_str()))
        {
            continue;
        }
        seam_users += 1;
        let imp = inc
            .get(1)
            .is_some_and(|h| h == "scx_prims.bpf.h" || h.ends_with("synth.bpf.h"));
        if inc.first().map(String::as_str) != Some("sis_ctx.bpf.h") || !imp {
            bad.push(format!("{path}: includes {inc:?}"));
        }
    }
    assert!(seam_users >= 4, "{seam_users} objects use the seam");
    assert_none(&bad, "include order");
}

/// The features of `feats` (`FEAT_NAME`) not decided in exactly one of `files` (path, code
/// without comments): a BPF file names the bit `FEAT_NAME`, a loader file `bit::NAME`.
fn misplaced_features(feats: &[String], files: &[(String, String)]) -> Vec<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let names = |c: &str, name: &str| {
        c.match_indices(name)
            .any(|(i, _)| !c[..i].ends_with(is_ident) && !c[i + name.len()..].starts_with(is_ident))
    };
    let mut bad = vec![];
    for feat in feats {
        let rust = format!("bit::{}", feat.strip_prefix("FEAT_").unwrap());
        let at: Vec<&str> = files
            .iter()
            .filter(|(p, c)| names(c, if p.ends_with(".rs") { &rust } else { feat }))
            .map(|(p, _)| p.as_str())
            .collect();
        if at.len() != 1 {
            bad.push(format!("{feat}: {at:?}"));
        }
    }
    bad
}

/// The rule of where a decision lives (docs/DESIGN.md): each feature's bit is tested in one
/// production file, the one named for its component: a BPF component, or the loader's depth
/// (src/sched/sis_util_depth.rs) for the features that change the depth it writes.
#[test]
fn every_feature_is_decided_in_one_file() {
    let intf = std::fs::read_to_string(root().join("src/bpf/intf.h")).unwrap();
    let feats: Vec<String> = c_code(&intf)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("FEAT_"))
        .filter_map(|l| {
            l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
        })
        .filter(|n| *n != "ALL")
        .map(|n| format!("FEAT_{n}"))
        .collect();
    assert!(feats.len() >= 10, "{feats:?}");
    let mut code: Vec<(String, String)> = bpf_production()
        .iter()
        .filter(|f| !f.ends_with("intf.h"))
        .map(|f| (rel(f), c_code(&std::fs::read_to_string(f).unwrap())))
        .collect();
    // the loader: the scheduler's Rust files, their unit tests left out
    code.extend(
        files(&root().join("src/sched"), ".rs")
            .iter()
            .map(|f| production_code(f)),
    );
    assert_none(
        &misplaced_features(&feats, &code),
        "a feature decided in no file or in several",
    );
}

/// The mutation check of the decision scan: a feature tested in a second file, or in none,
/// is seen; a longer name, another path's `bit`, or a Rust file's `FEAT_` name are not.
#[test]
fn the_decision_scan_sees_a_feature_in_two_files() {
    let f = |files: &[(&str, &str)]| {
        let files: Vec<(String, String)> = files
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect();
        misplaced_features(&["FEAT_X".to_string()], &files).len()
    };
    assert_eq!(f(&[("a.bpf.h", "feat_on(w, FEAT_X)")]), 0);
    assert_eq!(
        f(&[("a.bpf.h", "feat_on(w, FEAT_X)"), ("b.bpf.h", "w & FEAT_X")]),
        1
    );
    assert_eq!(
        f(&[
            ("a.bpf.h", "feat_on(w, FEAT_X)"),
            ("l.rs", "w & bit::X != 0")
        ]),
        1
    );
    assert_eq!(f(&[("l.rs", "w & bit::X != 0")]), 0);
    assert_eq!(f(&[("a.bpf.h", "feat_on(w, FEAT_XY)")]), 1);
    assert_eq!(
        f(&[
            ("l.rs", "w & bit::X != 0"),
            ("m.rs", "FEAT_X; features::bit::X")
        ]),
        1
    );
    assert_eq!(
        f(&[("l.rs", "w & bit::X != 0"), ("m.rs", "bit::XY | my_bit::X")]),
        0
    );
}

/// The lines of C `text`'s enums that hold a member with a comment after it (a member's
/// comment goes above it, as the kernel writes them and build.rs reads intf.h's).
fn member_comments_after(text: &str) -> Vec<String> {
    let mut in_enum = false;
    let mut bad = vec![];
    for t in text.lines().map(str::trim) {
        if t.starts_with("enum ") && t.ends_with('{') {
            in_enum = true;
        } else if t.starts_with("};") {
            in_enum = false;
        } else if in_enum
            && !t.starts_with("/*")
            && !t.starts_with('*')
            && (t.contains("/*") || t.contains("//"))
        {
            bad.push(t.to_string());
        }
    }
    bad
}

/// The headers shared with Rust (intf.h, tool_intf.h, test_intf.h) comment each enum member
/// above it.
#[test]
fn shared_headers_comment_enum_members_above_them() {
    let intf = std::fs::read_to_string(root().join("src/bpf/intf.h")).unwrap();
    assert!(intf.matches("enum ").count() >= 5);
    let mut bad = vec![];
    for h in ["intf.h", "tools/tool_intf.h", "testing/test_intf.h"] {
        let text = std::fs::read_to_string(root().join("src/bpf").join(h)).unwrap();
        bad.extend(
            member_comments_after(&text)
                .iter()
                .map(|l| format!("{h}: {l}")),
        );
    }
    assert_none(&bad, "an enum member with its comment after it");
}

/// The mutation check of the member-comment scan: a comment after a member is seen, one
/// above it, a continued comment and a struct field's are not.
#[test]
fn the_member_comment_scan_sees_a_comment_after() {
    let r = member_comments_after;
    assert_eq!(r("enum e {\n\tA = 1,\t/* a */\n};\n"), ["A = 1,\t/* a */"]);
    assert_eq!(r("enum e {\n\tA, // a\n};\n").len(), 1);
    assert!(r("enum e {\n\t/* a\n\t * b */\n\tA = 1,\n};\n").is_empty());
    assert!(r("struct s {\n\tu64 a; /* a */\n};\n").is_empty());
}

/// The `names` that `text` does not name (each as `prefix` then the name).
fn unnamed(names: &[String], text: &str, prefix: &str) -> Vec<String> {
    let named = |n: &String| text.contains(&format!("{prefix}{n}"));
    names.iter().filter(|n| !named(n)).cloned().collect()
}

/// The indexes a newcomer reads first name everything they index: main.bpf.c's comment every
/// production header of src/bpf, docs/results/README.md every results folder.
#[test]
fn the_indexes_name_every_component_and_result() {
    let bpf = root().join("src/bpf");
    let headers: Vec<String> = files(&bpf, ".bpf.h")
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert!(headers.len() >= 12, "{headers:?}");
    let main = std::fs::read_to_string(bpf.join("main.bpf.c")).unwrap();
    let head = &main[..main.find("#include").unwrap()];
    assert_none(&unnamed(&headers, head, ""), "main.bpf.c's list misses");
    let results = root().join("docs/results");
    let mut folders: Vec<String> = std::fs::read_dir(&results)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    folders.sort();
    assert!(folders.len() >= 30, "{folders:?}");
    let index = std::fs::read_to_string(results.join("README.md")).unwrap();
    assert_none(
        &unnamed(&folders, &index, "`"),
        "docs/results/README.md misses",
    );
}

/// The mutation check of the index scan: a name left out is seen, one named is not.
#[test]
fn the_index_scan_sees_a_missing_name() {
    let names = ["a.bpf.h".to_string(), "b.bpf.h".to_string()];
    assert_eq!(unnamed(&names, " *   a.bpf.h   x\n", ""), ["b.bpf.h"]);
    assert!(unnamed(&names, "a.bpf.h b.bpf.h", "").is_empty());
    assert_eq!(unnamed(&names, "`a.bpf.h` b.bpf.h", "`"), ["b.bpf.h"]);
}

/// The top-level variables C `code` (comments stripped) defines, by name.
fn c_globals(code: &str) -> Vec<String> {
    let re = regex::Regex::new(
        r"(?m)^(?:struct \w+|u64|u32|s32|u8) (\w+)(?:\[[^\]]*\])?(?:, *(\w+))?[ =;]",
    )
    .expect("regex");
    re.captures_iter(code)
        .flat_map(|c| [c.get(1), c.get(2)])
        .flatten()
        .map(|m| m.as_str().to_string())
        .collect()
}

/// The structs C `code` defines (`struct NAME {`).
fn c_structs(code: &str) -> Vec<String> {
    let re = regex::Regex::new(r"(?m)^struct (\w+) \{").expect("regex");
    re.captures_iter(code).map(|c| c[1].to_string()).collect()
}

/// One idiom for a test's inputs (docs/DESIGN.md): a host test program's inputs and outputs
/// are its argument. Every program of the host test object takes a struct of
/// testing/test_intf.h or tools/tool_intf.h's sis_test_args, the synthetic machine's wake-up
/// (`void *`: it reads no input); the tests
/// reach none of the test object's own globals but the task state it keeps for the
/// scheduler's task storage (the machine is tools/synth.bpf.h's); and intf.h, the
/// scheduler's interface, defines no struct only the host objects use.
#[test]
fn test_inputs_are_the_programs_argument() {
    let bpf = root().join("src/bpf");
    let read = |p: &str| c_code(&std::fs::read_to_string(bpf.join(p)).unwrap());
    let obj = read("testing/sis_test.bpf.c");
    let mut args = c_structs(&read("testing/test_intf.h"));
    assert!(args.contains(&"dec_io".to_string()), "{args:?}");
    let synth = c_structs(&read("tools/tool_intf.h"));
    assert!(synth.contains(&"sis_test_args".to_string()), "{synth:?}");
    args.push("sis_test_args".into());
    // a program, or DEC_OUT's (a decision of one answer: its argument is dec_io)
    let prog =
        regex::Regex::new(r#"SEC\("syscall"\)\s*(?:\\\s*)?int (\w+)\(([^)]*)\)"#).expect("regex");
    let mut bad = vec![];
    let mut progs = 0;
    for c in prog.captures_iter(&obj) {
        progs += 1;
        let param = c[2].trim();
        let ok = param.starts_with("void *")
            || args
                .iter()
                .any(|a| param.starts_with(&format!("struct {a} *")));
        if !ok {
            bad.push(format!("program {} takes {param}", &c[1]));
        }
    }
    assert!(progs >= 10, "{progs} programs");
    // the task's load: the scheduler's task storage, the host test's .bss
    let state = ["task_load_io"];
    let own: Vec<String> = c_globals(&obj)
        .into_iter()
        .filter(|g| !state.contains(&g.as_str()))
        .collect();
    assert!(own.contains(&"test_waker".to_string()), "{own:?}");
    for f in files(&root().join("src/testing"), ".rs") {
        let code = rust_code(&std::fs::read_to_string(&f).unwrap());
        for g in &own {
            let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
            let pat = format!(".{g}");
            if code
                .match_indices(&pat)
                .any(|(i, _)| !code[i + pat.len()..].starts_with(is_ident))
            {
                bad.push(format!(
                    "{}: reads or writes the test object's {g}",
                    rel(&f)
                ));
            }
        }
    }
    let intf = read("intf.h");
    let mut users: Vec<String> = bpf_production()
        .iter()
        .filter(|f| !f.ends_with("intf.h"))
        .map(|f| c_code(&std::fs::read_to_string(f).unwrap()))
        .collect();
    for f in files(&root().join("src/sched"), ".rs") {
        users.push(rust_code(&std::fs::read_to_string(&f).unwrap()));
    }
    for st in c_structs(&intf) {
        if !users.iter().any(|u| u.contains(&st)) {
            bad.push(format!("intf.h: struct {st} is the host objects' alone"));
        }
    }
    assert_none(&bad, "a test input not in its program's argument");
}

/// The scans above see a one-line violation, and not what they allow.
#[test]
fn the_seam_scans_see_one_line_violations() {
    assert_eq!(
        preprocessor_switches("#ifdef SIS_TEST\n"),
        ["#ifdef SIS_TEST"]
    );
    assert_eq!(preprocessor_switches("#if 0\n").len(), 1);
    assert_eq!(
        preprocessor_switches("#ifndef KICK_ENV_DEFINED\nx\n#endif").len(),
        1
    );
    assert!(preprocessor_switches("#ifndef X\n#define X 1\n#endif\n/* #ifdef Y */").is_empty());
    assert!(includes_after_code(
        "#include \"a.h\"\nint x;\n#include \"b.h\"\n"
    ));
    assert!(!includes_after_code(
        "#include \"a.h\"\n/* x; */\n#include \"b.h\"\nint x;\n"
    ));
    assert_eq!(
        quoted_includes("#include <scx/common.bpf.h>\n#include \"tools/synth.bpf.h\"\n"),
        ["tools/synth.bpf.h"]
    );
    let protos = "static __always_inline u64 sis_dsq_nr(u64 dsq);\n";
    assert_eq!(inline_fns(protos, true), ["sis_dsq_nr"]);
    let def = "static __always_inline const volatile struct sis_topo *sis_topo(void)\n{\n";
    assert_eq!(inline_fns(def, false), ["sis_topo"]);
    assert_eq!(
        c_globals("u32 a, b;\nu64 c[4];\nstruct x d = {};\nstatic u32 e;\nint f(void)\n"),
        ["a", "b", "c", "d"]
    );
    assert_eq!(c_structs("struct x {\n\tu32 a;\n};\nstruct y z;\n"), ["x"]);
}
