#!/usr/bin/python3 -I
# SPDX-License-Identifier: GPL-2.0-only
"""plot.py PLOT-DATA.json|- OUTDIR|fd:N [NAME.png ...]: tools/bench's PNG plots (needs
matplotlib), every one or the NAMEs given. The data come from the file (read without
following a symlink, a regular file of at most 64 MiB) or stdin (-); the PNGs are written
through the output directory opened once (O_DIRECTORY | O_NOFOLLOW, root's or the invoking
user's, not writable by others without the sticky bit), or through the directory fd N
tools/bench passes open: each under a fresh name (O_EXCL | O_NOFOLLOW) renamed over its own,
so no symlink planted there is followed.

scan_per_wakeup.png   CPUs examined per wake-up past target/prev/recent
                      ((domain_scanned+kick_scanned)/search) vs load, per config
throughput_ratio.png  throughput (or 1/latency, 1/time) relative to the baseline vs load
wakeup_p99.png        p99 wake-up latency (every task, `scx_sisutil latency`) vs load, per
                      config, log scale; not drawn when no run recorded it (older raw logs)
One column of subplots per workload, one row per boot. Under each load, the samples behind
its points (plot-data.json's "n": wake-ups that searched, runs, traced waits), one figure
when every configuration had the same, else their range.
"""
import io
import json
import os
import stat
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def short(n):
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e4 else str(n)


def sample_label(wd, key, unit):
    """Per load: the samples behind its points, over the configurations drawn there."""
    n = wd.get("n", {}).get(key, {})
    out = []
    for i in range(len(wd["loads"])):
        vals = [ns[i] for c, ns in n.items()
                if i < len(ns) and wd[key].get(c) and wd[key][c][i] is not None]
        if not vals:
            out.append("")
        elif min(vals) == max(vals):
            out.append(f"n={short(min(vals))} {unit}")
        else:
            out.append(f"n={short(min(vals))}-{short(max(vals))} {unit}")
    return out


def grid(data, key, ylabel, title, path, hline=None, logy=False, unit=""):
    """One figure; `path`: (directory fd, PNG name)."""
    boots = [b for b in data if data[b]["workloads"]]
    wls = sorted({w for b in boots for w in data[b]["workloads"]
                  if data[b]["workloads"][w][key]})
    if not boots or not wls:
        wls = ["none"]
    # At least 7.5 inches wide (825 px), so that one workload's title and legend fit; on
    # top, a band for the title (wrapped to the width) and the legend (as many rows as it
    # takes at 1.7 inches a column).
    width = max(7.5, 4.2 * len(wls))
    names = {c for b in boots for wd in data[b]["workloads"].values() for c in wd[key]}
    ncol = max(1, min(len(names), int(width / 1.7)))
    title_lines = textwrap.wrap(title, width=int(width * 11))
    band = 0.25 * len(title_lines) + 0.14 * -(-max(1, len(names)) // ncol) + 0.25
    height = 3.4 * max(1, len(boots)) + band
    fig, axes = plt.subplots(len(boots) or 1, len(wls), squeeze=False,
                             figsize=(width, height))
    for i, b in enumerate(boots):
        for j, w in enumerate(wls):
            ax = axes[i][j]
            wd = data[b]["workloads"].get(w)
            ax.set_title(f"{b}: {w}", fontsize=9)
            if not wd:
                ax.axis("off")
                continue
            x = list(range(len(wd["loads"])))
            for cfg, ys in wd[key].items():
                pts = [(xi, y) for xi, y in zip(x, ys) if y is not None]
                if pts:
                    style = "-o" if cfg in ("patched", "vanilla", "unbounded", "eevdf") else "--."
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=cfg,
                            linewidth=1.2, markersize=3)
            if hline is not None:
                ax.axhline(hline, color="grey", linewidth=0.6)
            ax.set_xticks(x)
            ax.set_xticklabels([f"{l}\n{n}" if n else l
                                for l, n in zip(wd["loads"], sample_label(wd, key, unit))],
                               rotation=30, fontsize=6, ha="right")
            ax.set_ylabel(ylabel, fontsize=8)
            if logy:
                ax.set_yscale("log")
            ax.tick_params(axis="y", labelsize=7)
            ax.grid(alpha=0.3)
    handles, labels = {}, {}
    for row in axes:
        for ax in row:
            for h, l in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(l, h)
    top = 1 - band / height
    fig.suptitle("\n".join(title_lines), fontsize=10, y=1 - 0.1 / height, va="top")
    fig.legend(list(handles.values()), list(handles.keys()), loc="upper center",
               bbox_to_anchor=(0.5, 1 - (0.15 + 0.25 * len(title_lines)) / height),
               ncol=ncol, fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, top))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_at(path[0], path[1], buf.getvalue())


MAX_INPUT = 64 << 20


def open_out(spec):
    """The output directory's fd: `fd:N` as passed, or the path opened once and checked."""
    if spec.startswith("fd:") and spec[3:].isdigit():
        fd = int(spec[3:])
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            sys.exit(f"plot.py: {spec} is not a directory")
        return fd
    try:
        fd = os.open(spec, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        sys.exit(f"plot.py: output directory {spec}: "
                 + ("a symlink: refusing to write through it" if os.path.islink(spec)
                    else e.strerror))
    st = os.fstat(fd)
    uids = {0, os.getuid()}
    if os.environ.get("SUDO_UID", "").isdigit():
        uids.add(int(os.environ["SUDO_UID"]))
    if st.st_uid not in uids:
        sys.exit(f"plot.py: output directory {spec} is owned by uid {st.st_uid}, neither root "
                 "nor you: refusing to write there")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        sys.exit(f"plot.py: output directory {spec} is writable by others without the sticky "
                 "bit: refusing to write there")
    return fd


def write_at(dfd, name, data):
    """`name` in directory `dfd` holds `data`: a fresh file, renamed over the name."""
    tmp = f".{name}.{os.urandom(8).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644, dir_fd=dfd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        os.unlink(tmp, dir_fd=dfd)
        raise


def read_data(spec):
    if spec == "-":
        return json.loads(sys.stdin.read(MAX_INPUT + 1))
    try:
        fd = os.open(spec, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        sys.exit(f"plot.py: cannot read {spec}: {e.strerror}")
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_INPUT:
            sys.exit(f"plot.py: {spec} is not a regular file of at most 64 MiB")
        return json.loads(f.read(MAX_INPUT + 1))


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: plot.py PLOT-DATA.json|- OUTDIR|fd:N [NAME.png ...]")
    data = read_data(sys.argv[1])
    out = open_out(sys.argv[2])
    names = ("scan_per_wakeup.png", "throughput_ratio.png", "wakeup_p99.png")
    want = sys.argv[3:] or names
    bad = [n for n in want if n not in names]
    if bad:
        sys.exit(f"plot.py: unknown plot {bad[0]} (known: {', '.join(names)})")
    if "scan_per_wakeup.png" in want:
        grid(data, "scan", "CPUs scanned / wake-up",
             "CPUs examined per wake-up: (domain_scanned + kick_scanned) / search",
             (out, "scan_per_wakeup.png"), unit="wake-ups")
    base = next((d["baseline"] for d in data.values() if d.get("baseline")), "baseline")
    if "throughput_ratio.png" in want:
        grid(data, "ratio", f"relative to {base} (>1 better)",
             f"throughput ratio vs {base} (latency/time inverted; TCG: ratios only)",
             (out, "throughput_ratio.png"), hline=1.0, unit="runs")
    if "wakeup_p99.png" in want and any(wd.get("wake_p99") for d in data.values()
                                        for wd in d["workloads"].values()):
        grid(data, "wake_p99", "p99 wake-up latency (us)",
             "p99 wake-up latency, every task (TCG: compare configurations)",
             (out, "wakeup_p99.png"), logy=True, unit="waits")


if __name__ == "__main__":
    main()
