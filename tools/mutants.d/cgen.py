# SPDX-License-Identifier: GPL-2.0-only
"""Generated one-line mutants of the BPF C production code, and their run.

Run by tools/mutants --generate (as /usr/bin/python3 -I); see its --help. Nothing here
chooses a mutant by hand: every operator below is applied at every place it fits in the
function bodies of the production files, the list is sorted, and a seeded random sample of
it is taken (random.Random(seed).sample), so a (seed, sample, tree) triple names the same
mutants on any machine.

Operators: ROR (== != < <= > >=), AOR (binary + - * / % << >>, += -=, ++ --), LCR (&& ||),
bitwise & | (binary), negation removed (!x -> x), constant +1 / -1 (integer literals),
true <-> false, statement deleted (a one-line call or assignment), first two arguments of a
call swapped.
"""
import json
import os
import random
import re
import struct
import subprocess
import sys
import time

# The production BPF C: what the scheduler runs (main.bpf.c and the headers it includes).
# intf.h's definitions, testing/ and tools/ (the tracers, the cost benchmark and
# tools/synth.bpf.h, the host objects' synthetic machine) are not the scheduler.
PROD = [
    "src/bpf/main.bpf.c",
    "src/bpf/calib.bpf.h",
    "src/bpf/ctx.bpf.h",
    "src/bpf/idle.bpf.h",
    "src/bpf/idle_time.bpf.h",
    "src/bpf/kick.bpf.h",
    "src/bpf/knobs.bpf.h",
    "src/bpf/queue.bpf.h",
    "src/bpf/scx_prims.bpf.h",
    "src/bpf/shards.bpf.h",
    "src/bpf/sis.bpf.h",
    "src/bpf/sis_ctx.bpf.h",
    "src/bpf/steal.bpf.h",
    "src/bpf/vtime.bpf.h",
    "src/bpf/wait_hist.bpf.h",
    "src/bpf/wake.bpf.h",
]

# The objects build.rs compiles (source, skeleton name).
OBJECTS = [
    ("src/bpf/main.bpf.c", "bpf"),
    ("src/bpf/testing/sis_test.bpf.c", "sis_test"),
    ("src/bpf/tools/waitlat.bpf.c", "waitlat"),
    ("src/bpf/tools/cost.bpf.c", "cost"),
    ("src/bpf/tools/shadow.bpf.c", "shadow"),
    ("src/bpf/tools/shadow_replay.bpf.c", "shadow_replay"),
]

TOKEN = re.compile(
    r"0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*|[A-Za-z_]\w*|"
    r"->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|&=|\|=|\^=|"
    r"\s+|.",
)
TYPES = {
    "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "int", "bool", "char", "void",
    "long", "unsigned", "signed", "struct", "const", "static", "enum", "union", "__u32",
    "__u64", "__s32", "__s64", "volatile", "register",
}
NO_SWAP = {
    "bpf_for", "bpf_for_each", "bpf_repeat", "READ_ONCE", "WRITE_ONCE", "sizeof", "if",
    "while", "for", "switch", "return", "__builtin_memcpy", "__builtin_memset", "BPF_PROG",
    "BPF_STRUCT_OPS", "BPF_STRUCT_OPS_SLEEPABLE", "SEC", "__sync_fetch_and_add",
    "__sync_fetch_and_or", "__sync_fetch_and_and", "__sync_val_compare_and_swap",
    "BPF_CORE_READ", "bpf_core_type_matches",
}
ROR = {"==": "!=", "!=": "==", "<": "<=", "<=": "<", ">": ">=", ">=": ">"}
AOR = {"+": "-", "-": "+", "*": "/", "/": "*", "%": "/", "<<": ">>", ">>": "<<",
       "+=": "-=", "-=": "+=", "++": "--", "--": "++"}
LCR = {"&&": "||", "||": "&&"}
BIT = {"&": "|", "|": "&"}


def strip_comments(text):
    """The text with comments and string literals blanked (same length, newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(text[i] + " " * (j - i - 2) + text[j - 1])
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def body_lines(code):
    """Indexes of the lines inside function bodies (not the opening or closing line)."""
    lines = code.split("\n")
    depth, in_fn, res = 0, False, set()
    prev_sig = ""
    for idx, line in enumerate(lines):
        start_depth, start_fn = depth, in_fn
        if line.lstrip().startswith("#"):
            if start_fn and depth > 0:
                pass
            continue
        for ch in line:
            if ch == "{":
                if depth == 0:
                    in_fn = prev_sig == ")"
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    in_fn = False
            if not ch.isspace():
                prev_sig = ch
        if start_fn and start_depth > 0 and depth > 0:
            res.add(idx)
    return res


def tokens(code_line):
    """(start, text) of each non-space token."""
    return [(m.start(), m.group()) for m in TOKEN.finditer(code_line) if not m.group().isspace()]


def is_operand_end(toks, k):
    """Does the token before toks[k] end an operand (so toks[k] is a binary operator)?"""
    if k == 0:
        return False
    t = toks[k - 1][1]
    if t in (")", "]") or re.match(r"^\d", t):
        return True
    if not re.match(r"^[A-Za-z_]\w*$", t) or t in TYPES or t in ("return", "case", "sizeof"):
        return False
    # a declaration's '*': `struct x *p`, `u64 *w`, `foo_t *p`
    before = toks[k - 2][1] if k >= 2 else ""
    return not (toks[k][1] == "*" and (before in TYPES or t.endswith("_t")))


# the verifier's bounds masks, `x & (MAX_CPUS - 1)`, `(MAX_CPUS / 64 - 1)`: not decisions
MASK = re.compile(r"(&\s*)?\(\s*[A-Z_][A-Z0-9_]*\s*(/\s*64\s*)?-\s*1\s*\)")


def call_args(code_line, open_idx):
    """Top-level argument spans [(s, e)] of the call whose '(' is at open_idx, or None."""
    depth, spans, s = 0, [], open_idx + 1
    for i in range(open_idx, len(code_line)):
        c = code_line[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth == 0:
                spans.append((s, i))
                return spans
        elif c == "," and depth == 1:
            spans.append((s, i))
            s = i + 1
    return None


STMT = re.compile(r"^\s*[A-Za-z_][\w.\->\[\]\s*]*(\(|=|\+=|-=|\|=|&=|\+\+|--)")


def line_mutants(code_line, src_line):
    """(column, operator, new source line) for one line (code_line: comments blanked)."""
    out = []
    toks = tokens(code_line)
    masked = set()
    for m in MASK.finditer(code_line):
        masked.update(range(m.start(), m.end()))

    def repl(start, old, new, op):
        out.append((start, op, src_line[:start] + new + src_line[start + len(old):]))

    for k, (s, t) in enumerate(toks):
        prev = toks[k - 1][1] if k else ""
        nxt = toks[k + 1][1] if k + 1 < len(toks) else ""
        binary = is_operand_end(toks, k)
        if s in masked:
            continue
        if t in ROR and binary:
            repl(s, t, ROR[t], f"ror {t} -> {ROR[t]}")
        elif t in ("++", "--"):
            repl(s, t, AOR[t], f"aor {t} -> {AOR[t]}")
        elif t in AOR and t not in ("++", "--") and (binary or t in ("+=", "-=")):
            repl(s, t, AOR[t], f"aor {t} -> {AOR[t]}")
        elif t in LCR:
            repl(s, t, LCR[t], f"lcr {t} -> {LCR[t]}")
        elif t in BIT and binary:
            repl(s, t, BIT[t], f"bit {t} -> {BIT[t]}")
        elif t == "!" and (re.match(r"^\w+$", nxt) or nxt == "("):
            repl(s, t, "", "negation removed")
        elif re.match(r"^(0[xX][0-9a-fA-F]+|\d+)[uUlL]*$", t):
            num = re.match(r"^(0[xX][0-9a-fA-F]+|\d+)", t).group()
            suffix = t[len(num):]
            v = int(num, 16) if num.lower().startswith("0x") else int(num)
            fmt = (lambda x: hex(x)) if num.lower().startswith("0x") else str
            repl(s, t, fmt(v + 1) + suffix, f"constant {t} -> {fmt(v + 1)}{suffix}")
            if v > 0:
                repl(s, t, fmt(v - 1) + suffix, f"constant {t} -> {fmt(v - 1)}{suffix}")
        elif t in ("true", "false"):
            o = "false" if t == "true" else "true"
            repl(s, t, o, f"{t} -> {o}")
        elif re.match(r"^[A-Za-z_]\w*$", t) and nxt == "(" and t not in NO_SWAP and \
                prev not in TYPES and not t.isupper():
            open_idx = toks[k + 1][0]
            spans = call_args(code_line, open_idx)
            if spans and 2 <= len(spans) <= 4:
                (a0, a1), (b0, b1) = spans[0], spans[1]
                a, b = src_line[a0:a1].strip(), src_line[b0:b1].strip()
                # a constant (STAT_X, FEAT_X) for a pointer: a type error, not a mutant
                if a and b and a != b and not any(re.match(r"^[A-Z][A-Z0-9_]+$", x)
                                                  for x in (a, b)):
                    # each slot keeps its spacing
                    new = src_line[:a0] + src_line[a0:a1].replace(a, b) + src_line[a1:b0] + \
                        src_line[b0:b1].replace(b, a) + src_line[b1:]
                    out.append((s, f"arguments of {t}() swapped", new))
    st = code_line.strip()
    if st.endswith(";") and st.count("(") == st.count(")") and STMT.match(code_line) and \
            st.split()[0].rstrip("(") not in TYPES | {"return", "break", "continue", "goto"} \
            and not re.match(r"^\w+\s+\**\w+\s*(=|;|\[)", st):
        indent = src_line[:len(src_line) - len(src_line.lstrip())]
        out.append((len(indent), "statement deleted", indent + ";"))
    return out


def generate(root, files=PROD):
    muts = []
    for f in files:
        with open(os.path.join(root, f)) as fh:
            text = fh.read()
        code = strip_comments(text)
        src_lines, code_lines = text.split("\n"), code.split("\n")
        for idx in sorted(body_lines(code)):
            seen = set()
            for col, op, new in line_mutants(code_lines[idx], src_lines[idx]):
                if new == src_lines[idx] or new in seen:
                    continue
                seen.add(new)
                muts.append({
                    "id": f"{f}:{idx + 1}:{col + 1}: {op}",
                    "file": f, "line": idx + 1, "col": col + 1, "op": op,
                    "old": src_lines[idx], "new": new,
                })
    muts.sort(key=lambda m: (m["file"], m["line"], m["col"], m["op"], m["new"]))
    return muts


def sample(muts, seed, n):
    """n of muts (all for n = 0), in the sample's random order: a run stopped early has run a
    random sample too."""
    n = len(muts) if n <= 0 or n >= len(muts) else n
    return [muts[i] for i in random.Random(seed).sample(range(len(muts)), n)]


# ---- object comparison: is a mutant's object code the unmutated one's? ----

def elf_code(path):
    """The object's code and data, without debug information and BTF (which carry source
    lines): {section name: bytes}, relocations resolved to symbol names, and the symbols."""
    b = open(path, "rb").read()
    if b[:5] != b"\x7fELF\x02":
        raise ValueError(f"{path}: not an ELF64 object")
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    secs = []
    for i in range(shnum):
        name, kind, flags, addr, off, size, link, info, align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", b, shoff + i * shentsize)
        secs.append((name, kind, off, size, link, info, entsize))
    shstr = secs[shstrndx]

    def cstr(tab_off, o):
        e = b.index(b"\0", tab_off + o)
        return b[tab_off + o:e].decode()

    names = [cstr(shstr[2], s[0]) for s in secs]
    syms = []
    symtab = next((s for s in secs if s[1] == 2), None)
    if symtab:
        stroff = secs[symtab[4]][2]
        for k in range(symtab[3] // 24):
            st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from(
                "<IBBHQQ", b, symtab[2] + k * 24)
            sname = cstr(stroff, st_name) if st_name else ""
            if not sname and st_info & 0xF == 3 and st_shndx < len(names):
                sname = names[st_shndx]
            syms.append((sname, st_info, st_shndx, st_value, st_size))
    res = {}
    for i, (s, nm) in enumerate(zip(secs, names)):
        if nm.startswith((".BTF", ".debug", ".rel.BTF", ".rel.debug", ".llvm")) or \
                s[1] in (2, 3):
            continue
        if s[1] == 9:  # SHT_REL
            rels = []
            for k in range(s[3] // 16):
                r_off, r_info = struct.unpack_from("<QQ", b, s[2] + k * 16)
                sym = syms[r_info >> 32][0] if (r_info >> 32) < len(syms) else "?"
                rels.append((r_off, r_info & 0xFFFFFFFF, sym))
            res[nm] = repr(rels)
        elif s[1] == 8:  # NOBITS
            res[nm] = f"nobits {s[3]}"
        else:
            res[nm] = b[s[2]:s[2] + s[3]]
    res["<symbols>"] = repr(sorted((n, i, names[x] if x < len(names) else x, v, z)
                                   for n, i, x, v, z in syms if n))
    return res


class Compiler:
    """clang-19 with build.rs's flags (read from the build script's output), one object at
    a time, into a scratch directory."""

    def __init__(self, tree, scratch, profile="release"):
        self.tree, self.scratch = tree, scratch
        outs = []
        bdir = os.path.join(tree, "target", profile, "build")
        for d in os.listdir(bdir):
            p = os.path.join(bdir, d, "output")
            if d.startswith("scx_sisutil-") and os.path.exists(p):
                outs.append((os.path.getmtime(p), p))
        if not outs:
            raise SystemExit("tools/mutants: no build script output under target/release/build "
                             "(build the tree first)")
        text = open(max(outs)[1]).read()
        m = re.search(r"^scx_utils:clang=ClangInfo \{ clang: \"([^\"]+)\".*?\} (\[.*\])$", text,
                      re.M)
        if not m:
            raise SystemExit("tools/mutants: no scx_utils:clang= line in the build output")
        self.clang = m.group(1)
        self.cflags = json.loads(m.group(2))
        self.deps = {}
        # libbpf-cargo adds libbpf's headers (libbpf-sys's, extracted to a temporary
        # directory as bpf/*.h) and -fno-stack-protector: the same from the registry's copy
        lock = open(os.path.join(tree, "Cargo.lock")).read()
        ver = re.search(r'name = "libbpf-sys"\nversion = "([^"]+)"', lock).group(1)
        home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
        srcs = [os.path.join(home, "registry/src", d, f"libbpf-sys-{ver}", "libbpf/src")
                for d in os.listdir(os.path.join(home, "registry/src"))]
        srcs = [d for d in srcs if os.path.isdir(d)]
        if not srcs:
            raise SystemExit(f"tools/mutants: libbpf-sys {ver}'s sources not in {home}/registry")
        inc = os.path.join(scratch, "libbpf")
        os.makedirs(os.path.join(inc, "bpf"), exist_ok=True)
        for h in os.listdir(srcs[0]):
            if h.endswith(".h"):
                with open(os.path.join(srcs[0], h), "rb") as fi, \
                        open(os.path.join(inc, "bpf", h), "wb") as fo:
                    fo.write(fi.read())
        self.cflags += ["-I", inc, "-fno-stack-protector"]

    def compile(self, src, out):
        # libbpf-cargo's compile_single(): the flags, then -g -O2 -target bpf
        cmd = [self.clang] + self.cflags + ["-Isrc/bpf", "-g", "-O2", "-target", "bpf", "-c",
                                            src, "-o", out]
        p = subprocess.run(cmd, cwd=self.tree, capture_output=True, text=True)
        return p.returncode == 0, p.stderr

    def depends(self, src):
        """The files object src includes (clang -MM), relative to the tree."""
        if src not in self.deps:
            cmd = [self.clang] + self.cflags + ["-Isrc/bpf", "-target", "bpf", "-MM", src]
            p = subprocess.run(cmd, cwd=self.tree, capture_output=True, text=True, check=True)
            files = p.stdout.replace("\\\n", " ").split(":", 1)[1].split()
            self.deps[src] = {os.path.normpath(f) for f in files}
        return self.deps[src]


def main():
    import argparse
    ap = argparse.ArgumentParser(prog="tools/mutants.d/cgen.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("list")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--sample", type=int, default=0)
    g.add_argument("--root", default=".")
    g.add_argument("--json", action="store_true")
    c = sub.add_parser("objects")
    c.add_argument("--tree", required=True)
    c.add_argument("--scratch", required=True)
    c.add_argument("--file", required=True)
    c.add_argument("--baseline", action="store_true")
    a = ap.parse_args()
    if a.cmd == "list":
        muts = sample(generate(a.root), a.seed, a.sample)
        if a.json:
            json.dump(muts, sys.stdout, indent=1)
            print()
        else:
            for m in muts:
                print(f"{m['id']}\n    - {m['old'].strip()}\n    + {m['new'].strip()}")
    elif a.cmd == "objects":
        # compile every object that includes FILE; print "same", "differs NAMES" or
        # "build-failure" (and clang's message on stderr)
        comp = Compiler(a.tree, a.scratch)
        os.makedirs(a.scratch, exist_ok=True)
        differs = []
        for src, name in OBJECTS:
            if a.file not in comp.depends(src):
                continue
            base = os.path.join(a.scratch, f"{name}.base.o")
            out = base if a.baseline else os.path.join(a.scratch, f"{name}.mut.o")
            ok, err = comp.compile(src, out)
            if not ok:
                sys.stderr.write(err)
                print("build-failure")
                return 0
            if not a.baseline and elf_code(base) != elf_code(out):
                differs.append(name)
        print("differs " + " ".join(differs) if differs else "same")
    return 0


if __name__ == "__main__":
    sys.exit(main())
