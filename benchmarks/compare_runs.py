"""Before and after a change: the same benchmarks run from two checkouts on one machine, side by side.

    python benchmarks/compare_runs.py --label "issue 14" --command "..." \\
        before=/tmp/before after=/tmp/after        # each dir: backends.json kg.json retrieval.json

Each directory holds the JSON of ``bench_backends.py --json``, ``bench_kg.py`` (its
``benchmarks/out/bench_kg.json``) and ``bench_retrieval.py --json`` from one checkout. Runs are listed in
the order given (so an A-B-A-B order shows the machine's drift), every figure a p50 in ms (rates in
rows/s); the last column is the median of the runs named ``after*`` over the median of those named
``before*``. The section "Before and after" of RESULTS.md is replaced unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent


def figures(run_dir: Path) -> dict[str, float]:
    """{row label: value} of one checkout's runs."""
    out: dict[str, float] = {}
    backends = json.loads((run_dir / "backends.json").read_text())["results"][0]
    n = backends["n"]
    for kind, q in backends["query"].items():
        out[f"store {n:,}: query k=10 {kind.replace('_', '+')}"] = q["p50"]
    for op, stats in backends["ops"].items():
        if isinstance(stats, dict) and "p50" in stats:
            out[f"store {n:,}: {op}"] = stats["p50"]
    out[f"store {n:,}: bulk ingest, rows/s"] = backends["ingest"]["rows_per_s"]
    kg = json.loads((run_dir / "kg.json").read_text())["runs"][0]
    for op in ("query_entity", "query_entity_as_of", "timeline_100", "cypher_match_out"):
        out[f"graph {kg['triples']:,}: {op}"] = kg["age"][op]["p50_ms"]
    out[f"graph {kg['triples']:,}: add_triple, per s"] = kg["age"]["add_triple_per_s"]
    retrieval = json.loads((run_dir / "retrieval.json").read_text())["result"]
    for op, stores in retrieval["ops"].items():
        out[f"retrieval {retrieval['drawers']:,}: {op}"] = stores["postgres"]["p50"]
    return out


def render(runs: list[tuple[str, dict]], label: str, command: str) -> str:
    names = [name for name, _ in runs]
    rows = list(runs[0][1])
    lines = [
        f"## Before and after: {label} ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        f"The same benchmarks from each checkout, one after the other on this machine: {command}. "
        "p50 ms unless the row says otherwise; the last column is the median of the after runs over the "
        "median of the before runs (for rates, above 1 is faster; for times, below 1 is faster).",
        "",
        "| | " + " | ".join(names) + " | after / before |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for row in rows:
        values = [figures_of.get(row) for _, figures_of in runs]
        cells = ["" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.2f}") for v in values]
        before = [v for (name, _), v in zip(runs, values) if name.startswith("before") and v is not None]
        after = [v for (name, _), v in zip(runs, values) if name.startswith("after") and v is not None]
        ratio = statistics.median(after) / statistics.median(before) if before and after else None
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {'' if ratio is None else f'{ratio:.2f}'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="NAME=DIR, in the order they ran")
    ap.add_argument("--label", required=True)
    ap.add_argument("--command", required=True, help="how the runs were made, for the reader")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    runs = []
    for spec in args.runs:
        name, _, path = spec.partition("=")
        runs.append((name, figures(Path(path))))
    report = render(runs, args.label, args.command)
    print(report)
    if not args.no_write:
        common.record_report(HERE / "RESULTS.md", "before_after", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
