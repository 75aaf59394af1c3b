"""The scale curve of the real path: bench_real_path.py's runs at several sizes, as cost ratios and a chart.

    python benchmarks/scale_report.py benchmarks/out/real_path.json benchmarks/out/real_path_1m.json

Reads the JSON each bench_real_path.py run writes (one may hold several sizes), takes every backend's
upsert cases in batches of 1,000 and their last probe (+60 s after the writer exited), and writes:
a table per backend (k=10 p50 unfiltered, wing, wing+room with recall; get(ids), lexical_search,
facet_counts, get_recent; ingest rate; peak RSS; index size), the cost ratio between successive sizes,
and ``benchmarks/out/scale.png`` (log-log). Its section of RESULTS.md is replaced unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent
BATCH = 1000


def rows(files: list[Path]) -> tuple[dict, list[str]]:
    """{backend: {n: case}} over the files (a later file wins for the same size), and the files' commands."""
    out: dict = {}
    commands = []
    for f in files:
        data = json.loads(f.read_text())
        commands.append(f"`{data['meta']['command']}` ({data['meta']['date']})")
        for c in data["cases"]:
            if c["mode"] == "upsert" and c["batch"] == BATCH and c["probes"]:
                out.setdefault(c["store"], {})[c["n"]] = c
    return out, commands


def metrics(case: dict) -> dict:
    last = case["probes"][-1]
    q, ops = last["query"], last.get("ops", {})
    m = {f"{k} p50 ms": q[k]["p50"] for k in ("unfiltered", "wing", "wing_room")}
    m.update({f"{k} recall": q[k]["recall_at_10"] for k in ("unfiltered", "wing", "wing_room")})
    for key, label in (
        ("get_ids_10", "get 10 ids ms"),
        ("lexical_search", "lexical ms"),
        ("facet_counts_wing", "facet_counts ms"),
        ("get_recent_20", "get_recent ms"),
    ):
        if ops.get(key):
            m[label] = ops[key]["p50"]
    m["ingest rows/s"] = case["write"]["rows_per_s"]
    if "incremental_50_rows_per_s" in ops:
        m["50-row upserts into it, rows/s"] = ops["incremental_50_rows_per_s"]
    m["peak RSS MB (writer / search)"] = f"{case['write']['rss_mb']:.0f} / {last['rss_mb']:.0f}"
    if last.get("index"):
        m["vector index MB / table MB"] = f"{last['index']['index_mb']:.0f} / {last['index']['table_mb']:.0f}"
    return m


def fmt(v) -> str:
    if isinstance(v, str):
        return v
    return f"{v:,.0f}" if v >= 100 else f"{v:.2f}"


def render(data: dict, commands: list[str]) -> str:
    lines = [
        "## The scale curve: the real path at 10k, 100k, 1M drawers",
        "",
        "From " + "; ".join(commands) + ". Upserts in batches of 1,000 by a process that exits, then a new "
        "process 60 s later (p50 ms; recall@10 against exact). Ratio columns: the cost at the larger size "
        "over the smaller (for rates, the smaller over the larger, so above 1 is always a cost).",
        "",
        "![scale](out/scale.png)",
        "",
    ]
    for store, by_n in sorted(data.items()):
        sizes = sorted(by_n)
        ms = {n: metrics(by_n[n]) for n in sizes}
        keys = [k for k in ms[sizes[0]] if all(k in ms[n] for n in sizes)]
        ratio_cols = [(a, b) for a, b in zip(sizes, sizes[1:])]
        lines += [
            f"### {store}",
            "",
            "| | "
            + " | ".join(f"{n:,}" for n in sizes)
            + "".join(f" | {b // 1000:,}k / {a // 1000:,}k" for a, b in ratio_cols)
            + " |",
            "|---" * (1 + len(sizes) + len(ratio_cols)) + "|",
        ]
        for k in keys:
            cells = [fmt(ms[n][k]) for n in sizes]
            ratios = []
            for a, b in ratio_cols:
                va, vb = ms[a][k], ms[b][k]
                if isinstance(va, str) or "recall" in k or not va or not vb:
                    ratios.append("")
                else:
                    ratios.append(f"{(va / vb) if 'rows/s' in k else (vb / va):.2f}x")
            lines.append(f"| {k} | " + " | ".join(cells + ratios) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def chart(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, key in zip(axes, ("unfiltered", "wing", "wing_room")):
        for store, by_n in sorted(data.items()):
            sizes = sorted(by_n)
            ax.plot(
                sizes, [by_n[n]["probes"][-1]["query"][key]["p50"] for n in sizes], marker="o", label=store
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"k=10 {key.replace('_', '+')}, p50 (+60 s)")
        ax.set_xlabel("drawers")
        ax.set_ylabel("ms")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    data, commands = rows(args.files)
    chart(data, HERE / "out" / "scale.png")
    report = render(data, commands)
    print(report)
    if not args.no_write:
        common.record_report(HERE / "RESULTS.md", "scale", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
