#!/usr/bin/python3 -I
# SPDX-License-Identifier: GPL-2.0-only
"""plot.py PLOT-DATA.json OUTDIR [NAME.png ...]: tools/bench's PNG plots (needs matplotlib),
every one or the NAMEs given.

scan_per_wakeup.png   CPUs examined per wake-up past target/prev/recent
                      ((domain_scanned+kick_scanned)/search) vs load, per config
throughput_ratio.png  throughput (or 1/latency, 1/time) relative to the baseline vs load
wakeup_p99.png        p99 wake-up latency (every task, `scx_sisutil latency`) vs load, per
                      config, log scale; not drawn when no run recorded it (older raw logs)
One column of subplots per workload, one row per boot. Under each load, the samples behind
its points (plot-data.json's "n": wake-ups that searched, runs, traced waits), one figure
when every configuration had the same, else their range.
"""
import json
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
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: plot.py PLOT-DATA.json OUTDIR [NAME.png ...]")
    data = json.load(open(sys.argv[1]))
    out = sys.argv[2]
    names = ("scan_per_wakeup.png", "throughput_ratio.png", "wakeup_p99.png")
    want = sys.argv[3:] or names
    bad = [n for n in want if n not in names]
    if bad:
        sys.exit(f"plot.py: unknown plot {bad[0]} (known: {', '.join(names)})")
    if "scan_per_wakeup.png" in want:
        grid(data, "scan", "CPUs scanned / wake-up",
             "CPUs examined per wake-up: (domain_scanned + kick_scanned) / search",
             f"{out}/scan_per_wakeup.png", unit="wake-ups")
    base = next((d["baseline"] for d in data.values() if d.get("baseline")), "baseline")
    if "throughput_ratio.png" in want:
        grid(data, "ratio", f"relative to {base} (>1 better)",
             f"throughput ratio vs {base} (latency/time inverted; TCG: ratios only)",
             f"{out}/throughput_ratio.png", hline=1.0, unit="runs")
    if "wakeup_p99.png" in want and any(wd.get("wake_p99") for d in data.values()
                                        for wd in d["workloads"].values()):
        grid(data, "wake_p99", "p99 wake-up latency (us)",
             "p99 wake-up latency, every task (TCG: compare configurations)",
             f"{out}/wakeup_p99.png", logy=True, unit="waits")


if __name__ == "__main__":
    main()
