# SPDX-License-Identifier: GPL-2.0-only
"""tools/mutants --generate: generated mutants of the BPF C (cgen.py) and of the Rust
(cargo-mutants), run against the host tests, with a baseline beside them.

The Rust mutants are cargo-mutants' (its --list --json, with each mutant's diff), the BPF
ones cgen.py's; both are applied, built and tested here, the same way.

Two worktrees of HEAD under WORK: base/ (never mutated: the baseline, and the re-run of a
mutant's failing tests on the unmutated tree, at the same moment and load) and mut/ (where
each mutant is applied, built and tested, one at a time, then restored). A test that fails
on the baseline is broken: it is skipped in every mutant's run, and a test that fails with a
mutant but also fails when re-run on base right after is a flake: neither is a catch.

The fast BPF path (the default; --bpf-path full turns it off): a BPF mutant's objects are
compiled alone (cgen.Compiler, build.rs's flags) and its tests are the unit-test binary built
once from base/, run with SISUTIL_TEST_BPF_OBJS naming a directory of the mutated objects
(src/bpf_skel.rs obj_data(): the test binary opens NAME.bpf.o from there instead of the
embedded object). No crate rebuild per mutant: seconds of clang, then the test run. Its test
set is the unit-test binary's whatever --tests says (the CLI and placement-cost tests run the
scheduler's binary, which has no such read). Before it is trusted the path checks itself:
the unmutated objects compiled this way must give the baseline's results, and a broken
sis_test object must fail a test; otherwise the run falls back to the full path and says so.

Outcomes: caught (a test that passes unmutated fails), survived, timeout (the test run took
longer than --timeout: a hang, counted apart), build-failure (the mutant does not compile:
not a mutant), equivalent (the BPF objects are identical to the unmutated ones, code and
data, debug information aside: no test can tell them apart; or listed, with its reason, in
tools/mutants.d/equivalent.txt). The score is caught / (caught + survived), per language.
Results are appended as they come to OUT/results.jsonl (a run resumes from it), and
OUT/results.json and OUT/results.md are written at the end.
"""
import argparse
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cgen  # noqa: E402

TEST_SETS = {
    # the binary's unit tests and host BPF tests
    "unit": ["--bin", "scx_sisutil"],
    # CI's host tiers: those, the CLI tests and the placement-cost tests (tools/test)
    "host": ["--bin", "scx_sisutil", "--test", "tools_cli", "--test", "placement_cost"],
}
RUST_FILES = ["src/sched/**", "src/main.rs", "src/tools/**"]

# Every build here is the release profile without LTO and incremental (cargo's profile
# "mutants", defined by these variables, in target/mutants): a mutant rebuilds the crate
# from its incremental cache instead of relinking everything with thin LTO.
PROFILE = "mutants"
# the unit-test binary's object directory (src/bpf_skel.rs OBJ_OVERRIDE_ENV)
OBJS_ENV = "SISUTIL_TEST_BPF_OBJS"
os.environ.update({
    "CARGO_PROFILE_MUTANTS_INHERITS": "release",
    "CARGO_PROFILE_MUTANTS_LTO": "false",
    "CARGO_PROFILE_MUTANTS_INCREMENTAL": "true",
    "BPF_CLANG": os.environ.get("BPF_CLANG", "clang-19"),
})


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd, cwd, timeout=None, env=None):
    """Run cmd (nice 19) in its own process group; (rc or None on timeout, output, secs)."""
    t0 = time.time()
    p = subprocess.Popen(["nice", "-n", "19"] + cmd, cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out, time.time() - t0
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out, time.time() - t0
    except BaseException:
        # Ctrl-C or a kill of the runner: its child (its own session) goes with it
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise


def test_results(out):
    """{test name: 'ok' | 'FAILED'} from libtest's lines."""
    res = {}
    for m in re.finditer(r"^test (\S+) \.\.\. (ok|FAILED)$", out, re.M):
        res[m.group(1)] = m.group(2)
    return res


def cargo_test(tree, tests, skip, only=None, timeout=None):
    cmd = ["cargo", "test", "--profile", PROFILE, "--locked", "--no-fail-fast"] + tests + ["--"]
    if only:
        cmd += ["--exact"] + sorted(only)
    else:
        cmd += ["--exact"]
        for s in sorted(skip):
            cmd += ["--skip", s]
    return sh(cmd, tree, timeout)


def test_binary(tree, tests):
    """The unit-test binary of tree (cargo's --no-run JSON: the bin target's test executable)."""
    rc, out, _ = sh(["cargo", "test", "--profile", PROFILE, "--locked", "--no-run",
                     "--message-format=json"] + tests[:2], tree)
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        if m.get("reason") == "compiler-artifact" and m.get("executable") and \
                m.get("profile", {}).get("test") and "bin" in m["target"]["kind"]:
            return m["executable"]
    return None


def worktree(root, path, sha, seed):
    """A worktree of commit sha at path; its target seeded once from seed/target."""
    if not os.path.isdir(path):
        subprocess.run(["git", "-C", root, "worktree", "add", "--detach", "--force", path, sha],
                       check=True, capture_output=True)
    # --force: a run stopped mid-mutant (killed, the machine stopped) left its file mutated
    subprocess.run(["git", "-C", path, "checkout", "-q", "--force", "--detach", sha],
                   check=True)
    subprocess.run(["git", "-C", path, "reset", "-q", "--hard", sha], check=True)
    tgt = os.path.join(path, "target")
    if not os.path.isdir(tgt) and os.path.isdir(os.path.join(seed, "target")):
        log(f"seeding {tgt} from {seed}/target")
        subprocess.run(["cp", "-a", os.path.join(seed, "target"), tgt], check=True)


class Run:
    def __init__(self, a):
        self.a = a
        self.root = a.root
        self.sha = subprocess.run(["git", "-C", self.root, "rev-parse", "HEAD"], check=True,
                                  capture_output=True, text=True).stdout.strip()
        self.base = os.path.join(a.work, "base")
        self.mut = os.path.join(a.work, "mut")
        self.tests = TEST_SETS[a.tests]
        os.makedirs(a.out, exist_ok=True)
        self.jsonl = os.path.join(a.out, "results.jsonl")
        self.done = {}
        if os.path.exists(self.jsonl):
            for line in open(self.jsonl):
                r = json.loads(line)
                # an "error" (the run killed from outside) is run again on resume
                if r.get("commit") == self.sha and r.get("outcome") != "error":
                    self.done[r["id"]] = r
        self.equivalent = {}
        eq = os.path.join(self.root, "tools/mutants.d/equivalent.txt")
        if os.path.exists(eq):
            for line in open(eq):
                line = line.rstrip("\n")
                if line.strip() and not line.startswith("#") and " | " in line:
                    mid, why = line.split(" | ", 1)
                    self.equivalent[mid.strip()] = why.strip()

    def record(self, r):
        r["commit"] = self.sha
        with open(self.jsonl, "a") as f:
            f.write(json.dumps(r) + "\n")
        self.done[r["id"]] = r
        log(f"{r['lang']} {r['outcome']:<13} {r['id']}"
            + (f"  by {' '.join(r['caught_by'][:3])}" if r.get("caught_by") else ""))

    def prepare(self):
        # mut/ first, seeded from the clone's target; base/ from mut/'s (the same profile)
        for t, seed in ((self.mut, self.root), (self.base, self.mut)):
            worktree(self.root, t, self.sha, seed)
            log(f"building {t}")
            rc, out, secs = sh(["cargo", "test", "--profile", PROFILE, "--locked", "--no-run"]
                               + self.tests, t)
            if rc != 0:
                sys.stderr.write(out[-3000:])
                raise SystemExit(f"tools/mutants: the unmutated tree does not build ({t})")
        log("baseline: the test set on the unmutated tree")
        rc, out, secs = cargo_test(self.base, self.tests, [])
        res = test_results(out)
        if not res:
            sys.stderr.write(out[-3000:])
            raise SystemExit("tools/mutants: the baseline ran no test")
        self.broken = sorted(k for k, v in res.items() if v == "FAILED")
        self.base_secs = secs
        self.timeout = self.a.timeout or max(600, int(3 * secs) + 300)
        log(f"baseline: {len(res)} tests in {secs:.0f} s, broken (fail unmutated): "
            f"{self.broken or 'none'}; per-mutant timeout {self.timeout} s")
        with open(os.path.join(self.a.out, "baseline.json"), "w") as f:
            json.dump({"commit": self.sha, "tests": res, "broken": self.broken,
                       "secs": round(secs), "timeout": self.timeout,
                       "test_set": self.tests}, f, indent=1)

    # ---- the fast BPF path: the prebuilt unit-test binary, objects from a directory ----
    def bin_test(self, objs, only=None):
        """The unit-test binary (base/'s, copied) with OBJS_ENV=objs (None: the
        embedded objects), every test but the broken ones, or `only`."""
        cmd = [self.binary, "--exact"]
        if only:
            cmd += sorted(only)
        else:
            for t in sorted(self.broken):
                cmd += ["--skip", t]
        env = dict(os.environ)
        env.pop(OBJS_ENV, None)
        if objs:
            env[OBJS_ENV] = objs
        return sh(cmd, self.base, self.timeout, env=env)

    def objs_dir(self, name, files):
        """A fresh directory WORK/NAME holding NAME.bpf.o links to `files` {name: path}."""
        d = os.path.join(self.a.work, name)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        for n, path in files.items():
            os.symlink(path, os.path.join(d, f"{n}.bpf.o"))
        return d

    def fast_check(self):
        """Whether the fast BPF path can be trusted here (module docstring); logs why not."""
        exe = test_binary(self.base, self.tests)
        if not exe:
            log("fast BPF path off: no unit-test binary found in base/")
            return False
        self.binary = os.path.join(self.a.work, "scx_sisutil-unit-tests")
        subprocess.run(["cp", "-f", exe, self.binary], check=True)
        base = {n: os.path.join(self.scratch, f"{n}.base.o") for _, n in cgen.OBJECTS}
        rc, out, secs = self.bin_test(self.objs_dir("fast-base", base))
        res = test_results(out)
        failed = sorted(k for k, v in res.items() if v == "FAILED")
        if rc != 0 or not res:
            log(f"fast BPF path off: the unmutated objects compiled alone fail {failed or rc}")
            return False
        bad = os.path.join(self.a.work, "garbage.o")
        with open(bad, "w") as f:
            f.write("not an ELF object\n")
        rc2, out2, _ = self.bin_test(self.objs_dir("fast-garbage", {"sis_test": bad}))
        if rc2 == 0:
            log("fast BPF path off: a broken sis_test object failed no test "
                f"(the binary does not read {OBJS_ENV})")
            return False
        log(f"fast BPF path on: {len(res)} unit tests in {secs:.0f} s on the objects compiled "
            f"alone; a broken object fails {sum(1 for v in test_results(out2).values() if v == 'FAILED')}")
        return True

    def judge(self, rc, out, secs, rerun=None):
        """(outcome, caught_by, flaky) of one mutant's test run (in mut/, or through the
        fast path: `rerun` runs given tests unmutated)."""
        if rc is None:
            return "timeout", [], []
        res = test_results(out)
        if rc == 0:
            return "survived", [], []
        failed = sorted(k for k, v in res.items() if v == "FAILED")
        if not failed and rc < 0:
            # killed by a signal from outside (no test said FAILED): not a catch
            return "error", [f"(the test run was killed by signal {-rc})"], []
        if not failed:
            if re.search(r"^error(\[E\d+\])?:|could not compile|failed to run custom build",
                         out, re.M):
                return "build-failure", [], []
            return "caught", ["(a test binary failed without a failing test line)"], []
        # the same tests on the unmutated tree, now, under the same load
        if rerun:
            brc, bout, _ = rerun(failed)
        else:
            brc, bout, _ = cargo_test(self.base, self.tests, [], only=failed,
                                      timeout=self.timeout)
        bres = test_results(bout)
        flaky = sorted(t for t in failed if bres.get(t) != "ok")
        caught_by = [t for t in failed if t not in flaky]
        return ("caught" if caught_by else "survived"), caught_by, flaky

    # ---- BPF C ----
    def bpf_list(self):
        allm = cgen.generate(self.mut)
        muts = cgen.sample(allm, self.a.seed, self.a.sample)
        self.scratch = scratch = os.path.join(self.a.work, "objs")
        os.makedirs(scratch, exist_ok=True)
        self.comp = comp = cgen.Compiler(self.mut, scratch, PROFILE)
        for src, name in cgen.OBJECTS:
            ok, err = comp.compile(src, os.path.join(scratch, f"{name}.base.o"))
            if not ok:
                raise SystemExit(f"tools/mutants: {src} does not compile unmutated:\n{err}")
        log(f"BPF: {len(muts)} mutants (seed {self.a.seed}, sample {self.a.sample} of "
            f"{len(allm)})")
        self.fast = self.a.bpf_path == "fast" and self.fast_check()
        return muts

    def bpf_one(self, m):
        comp, scratch = self.comp, self.scratch
        path = os.path.join(self.mut, m["file"])
        orig = open(path).read()
        lines = orig.split("\n")
        assert lines[m["line"] - 1] == m["old"], m["id"]
        lines[m["line"] - 1] = m["new"]
        r = dict(lang="bpf", id=m["id"], file=m["file"], line=m["line"], op=m["op"],
                 old=m["old"].strip(), new=m["new"].strip())
        t0 = time.time()
        try:
            open(path, "w").write("\n".join(lines))
            differs, failed = [], False
            for src, name in cgen.OBJECTS:
                if m["file"] not in comp.depends(src):
                    continue
                out = os.path.join(scratch, f"{name}.mut.o")
                ok, err = comp.compile(src, out)
                if not ok:
                    failed = True
                    r["detail"] = next((ln for ln in err.split("\n") if "error:" in ln),
                                       err.strip()[:300])[:300]
                    break
                if cgen.elf_code(os.path.join(scratch, f"{name}.base.o")) != \
                        cgen.elf_code(out):
                    differs.append(name)
            if failed:
                r["outcome"] = "build-failure"
            elif not differs:
                r["outcome"] = "equivalent"
                r["detail"] = "identical object code (every object that includes the file)"
            elif self.fast:
                r["objects"], r["path"] = differs, "fast"
                objs = self.objs_dir("fast-mut", {
                    n: os.path.join(scratch, f"{n}.mut.o") for n in differs})
                rc, out, secs = self.bin_test(objs)
                r["outcome"], r["caught_by"], r["flaky"] = self.judge(
                    rc, out, secs, rerun=lambda only: self.bin_test(None, only))
            else:
                r["objects"] = differs
                rc, out, secs = cargo_test(self.mut, self.tests, self.broken,
                                           timeout=self.timeout)
                r["outcome"], r["caught_by"], r["flaky"] = self.judge(rc, out, secs)
                if r["outcome"] == "build-failure":
                    r["detail"] = next((ln for ln in out.split("\n")
                                        if ln.startswith("error")), "")[:300]
        finally:
            open(path, "w").write(orig)
        r["secs"] = round(time.time() - t0)
        self.record(r)

    # ---- Rust ----
    def rust_list(self):
        allm = rust_list(self.mut)
        for m in allm:
            m["_id"] = self.rust_id(m)
        muts = cgen.sample(allm, self.a.seed, self.a.sample)
        log(f"Rust: {len(muts)} mutants (seed {self.a.seed}, sample {self.a.sample} of "
            f"{len(allm)})")
        return muts

    def rust_one(self, m):
        """cargo-mutants generates (its --list's diff); the mutant is applied, built, tested
        and judged here as a BPF one is (cargo-mutants 27.1.0's -F/-E filters do not select
        its "delete field" mutants, so its own runner cannot run one chosen mutant)."""
        diff = m.get("diff", "")
        r = dict(lang="rust", id=m["_id"], file=m["file"],
                 line=m["span"]["start"]["line"], op=m.get("genre", ""),
                 old=" ".join(ln[1:].strip() for ln in diff.split("\n")
                              if ln.startswith("-") and not ln.startswith("---"))[:200],
                 new=" ".join(ln[1:].strip() for ln in diff.split("\n")
                              if ln.startswith("+") and not ln.startswith("+++"))[:200])
        path = os.path.join(self.mut, m["file"])
        orig = open(path).read()
        t0 = time.time()
        try:
            open(path, "w").write(apply_diff(orig, diff))
            rc, out, secs = cargo_test(self.mut, self.tests, self.broken, timeout=self.timeout)
            r["outcome"], r["caught_by"], r["flaky"] = self.judge(rc, out, secs)
            if r["outcome"] == "build-failure":
                r["detail"] = next((ln for ln in out.split("\n") if ln.startswith("error")),
                                   "")[:300]
        finally:
            open(path, "w").write(orig)
        r["secs"] = round(time.time() - t0)
        self.record(r)

    @staticmethod
    def rust_id(m):
        return m["name"]

    def report(self):
        rows = [r for r in self.done.values() if r.get("commit") == self.sha]
        for r in rows:
            if r["outcome"] == "survived" and r["id"] in self.equivalent:
                r["outcome"] = "equivalent"
                r["detail"] = "recorded: " + self.equivalent[r["id"]]
        summary = {}
        for lang in ("bpf", "rust"):
            rs = [r for r in rows if r["lang"] == lang]
            if not rs:
                continue
            c = {k: sum(1 for r in rs if r["outcome"] == k) for k in
                 ("caught", "survived", "timeout", "build-failure", "equivalent", "error")}
            judged = c["caught"] + c["survived"]
            c["mutants"] = len(rs)
            c["score"] = round(100.0 * c["caught"] / judged, 1) if judged else None
            summary[lang] = c
        res = {"commit": self.sha, "seed": self.a.seed, "sample": self.a.sample,
               "tests": self.tests, "summary": summary, "mutants": sorted(
                   rows, key=lambda r: (r["lang"], r["id"]))}
        with open(os.path.join(self.a.out, "results.json"), "w") as f:
            json.dump(res, f, indent=1)
        md = [f"# Generated mutants, commit {self.sha[:12]}", "",
              f"seed {self.a.seed}, sample {self.a.sample} per language; tests: "
              f"`cargo test --profile {PROFILE} --locked {' '.join(self.tests)}` (release without "
        "LTO, incremental)", "",
              "| | mutants | caught | survived | timeout | build failure | equivalent "
              "| score caught/(caught+survived) |",
              "|---|---|---|---|---|---|---|---|"]
        for lang, c in summary.items():
            md.append(f"| {lang} | {c['mutants']} | {c['caught']} | {c['survived']} | "
                      f"{c['timeout']} | {c['build-failure']} | {c['equivalent']} | "
                      f"{c['score']} % |")
        md += ["", "| outcome | mutant | change | caught by / detail |", "|---|---|---|---|"]
        for r in res["mutants"]:
            ch = f"`{r.get('old', '')}` -> `{r.get('new', '')}`".replace("|", "\\|")
            by = " ".join(r.get("caught_by", [])[:2]) or r.get("detail", "")
            if r.get("flaky"):
                by += f" (failed unmutated too: {' '.join(r['flaky'])})"
            md.append(f"| {r['outcome']} | {r['id']} | {ch} | {by.replace('|', '/')} |")
        with open(os.path.join(self.a.out, "results.md"), "w") as f:
            f.write("\n".join(md) + "\n")
        for lang, c in summary.items():
            print(f"{lang}: {c['mutants']} mutants: {c['caught']} caught, {c['survived']} "
                  f"survived, {c['timeout']} timeout, {c['build-failure']} build failure, "
                  f"{c['equivalent']} equivalent; score {c['score']} %")
        return 1 if any(c["survived"] for c in summary.values()) else 0


def apply_diff(text, diff):
    """text with the unified diff's hunks applied (each hunk's old lines found at or near
    its stated line)."""
    lines = text.split("\n")
    hunks = re.split(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@.*$", diff, flags=re.M)
    shift = 0
    for k in range(1, len(hunks), 2):
        start = int(hunks[k]) - 1 + shift
        body = hunks[k + 1].split("\n")
        if body and body[0] == "":
            body = body[1:]
        old = [ln[1:] for ln in body if ln[:1] in (" ", "-")]
        new = [ln[1:] for ln in body if ln[:1] in (" ", "+")]
        while old and old[-1] == "" and new and new[-1] == "" and \
                (not body or body[-1] == ""):
            old.pop()
            new.pop()
            body.pop()
        at = next((i for i in sorted(range(len(lines)), key=lambda i: abs(i - start))
                   if lines[i:i + len(old)] == old), None)
        if at is None:
            raise ValueError("the diff does not apply")
        lines[at:at + len(old)] = new
        shift += len(new) - len(old)
    return "\n".join(lines)


def rust_list(tree):
    files = []
    for f in RUST_FILES:
        files += ["-f", f]
    p = subprocess.run(["cargo", "mutants", "--dir", tree, "--list", "--json"] + files,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit("tools/mutants: cargo mutants --list failed (tools/setup installs "
                         "cargo-mutants)")
    allm = json.loads(p.stdout)
    allm.sort(key=lambda m: m["name"])
    return allm


def list_mutants(a):
    if a.lang in ("bpf", "both"):
        allm = cgen.generate(a.root)
        muts = cgen.sample(allm, a.seed, a.sample)
        print(f"# BPF: {len(muts)} of {len(allm)} (seed {a.seed})")
        for m in muts:
            print(f"{m['id']}\n    - {m['old'].strip()}\n    + {m['new'].strip()}")
    if a.lang in ("rust", "both"):
        allm = rust_list(a.root)
        muts = cgen.sample(allm, a.seed, a.sample)
        print(f"# Rust: {len(muts)} of {len(allm)} (seed {a.seed})")
        for m in muts:
            print(m["name"])
    return 0


def main():
    ap = argparse.ArgumentParser(prog="tools/mutants --generate")
    ap.add_argument("--root", required=True)
    ap.add_argument("--lang", choices=["bpf", "rust", "both"], default="both")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--timeout", type=int, default=0)
    ap.add_argument("--tests", choices=sorted(TEST_SETS), default="host")
    ap.add_argument("--bpf-path", choices=["fast", "full"], default="fast")
    ap.add_argument("--work", default="/var/tmp/scx_sisutil-mutants")
    ap.add_argument("--out", default="")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.sample < 0:
        ap.error("--sample must be >= 0")
    if a.timeout < 0:
        ap.error("--timeout must be >= 0")
    a.work = os.path.abspath(a.work)
    # the work directory is written as root (worktrees, objects, links): it must be ours
    # alone, never a path another user could have made first (it lives under /var/tmp)
    if not a.list and not a.report_only:
        try:
            os.mkdir(a.work, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(a.work)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            print(f"tools/mutants: --work {a.work}: not a directory of ours alone (owner "
                  f"{st.st_uid}, mode {oct(st.st_mode & 0o777)}): remove it or pick another",
                  file=sys.stderr)
            return 2
    if not a.out:
        a.out = os.path.join(a.root, "docs/results", "mutants-" + time.strftime("%Y-%m-%d"))
    if a.list:
        return list_mutants(a)
    if not a.report_only and os.geteuid() != 0:
        print("tools/mutants: --generate runs the host BPF tests: run it as root",
              file=sys.stderr)
        return 2
    run = Run(a)
    if not a.report_only:
        run.prepare()
        # one of each language in turn, each in its sample's random order: a run stopped
        # early has run a random sample of each
        todo = []
        if a.lang in ("bpf", "both"):
            todo.append([(run.bpf_one, m, m["id"]) for m in run.bpf_list()])
        if a.lang in ("rust", "both"):
            todo.append([(run.rust_one, m, m["_id"]) for m in run.rust_list()])
        for i in range(max(len(t) for t in todo)):
            for t in todo:
                if i < len(t) and t[i][2] not in run.done:
                    t[i][0](t[i][1])
    return run.report()


if __name__ == "__main__":
    sys.exit(main())
