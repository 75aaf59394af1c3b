"""Backup and restore of a kept palace too big to restore in one run (5M drawers), against PostgreSQL's
own pg_dump/pg_restore, each step a run of its own under 30 minutes, its figure on disk as it ends.

A restore is cut into parts along pg_restore's own table of contents, the same parts for both files so
that they compare part by part; the report adds them up:

* ``data``: the pre-data and data sections into a new database (the plugin's file into one made by
  ``mempalace-pg db bootstrap``, untimed; PostgreSQL's whole-database dump into an empty one): the
  tables and their rows (AGE's catalog rows first, see :func:`data_lists`);
* ``post:I/K``: ``-L`` a list of the post-data entries (indexes, constraints, triggers), the vector
  index's segments dealt over the K parts in turn, every other entry in the first;
* ``finish`` (the plugin's file): what ``mempalace-pg restore`` does after pg_restore
  (``backup.finish_restore``: the graph registered again with AGE, counted, the tables analyzed).

The plugin's parts run with the settings ``mempalace-pg restore --jobs N`` gives pg_restore's sessions
(``backup.session_options``); PostgreSQL's with the server's own. The source is the kept palace in
place (a copy of a 5M palace would not fit beside it).

    python benchmarks/bench_restore_parts.py --size 5100000 dump plugin      # then: dump postgres
    python benchmarks/bench_restore_parts.py --size 5100000 --compress zstd:1 dump postgres
    python benchmarks/bench_restore_parts.py --size 5100000 restore plugin data
    python benchmarks/bench_restore_parts.py --size 5100000 restore plugin post:1/2   # post:2/2, finish
    python benchmarks/bench_restore_parts.py --size 5100000 --report
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import common
import kept_palaces as kp
import psycopg

TOOLS = {
    "plugin": "`mempalace-pg backup` / `restore`",
    "postgres": "`pg_dump -Fc` / `pg_restore` (PostgreSQL's own)",
}
#: The report's name of each step.
STEPS = {
    "dump": "the file written (`backup` / `pg_dump -Fc`)",
    "data": "restore: tables and rows",
    "finish": "restore: the graph registered again, the tables analyzed",
}
#: A segment's index in pg_restore's list: ``<partition>_vec_<hi>_<6 hex>`` (indexing.segment_name).
SEGMENT = re.compile(r" INDEX \S+ \S+_vec_\d+_[0-9a-f]{6} ")


def state_path(size: int) -> Path:
    return kp.KEEP / f"restore_parts_{size}.json"


def dump_path(size: int, tool: str) -> Path:
    return kp.KEEP / "dumps" / f"{size}_{tool}.dump"


def target_name(size: int, tool: str) -> str:
    return f"mprestore_{tool}_{size}"


def record(size: int, tool: str, step: str, figures: dict, dsn: str) -> None:
    """Keep one step's figures in the size's state file at once (a later run of a step replaces it)."""
    path = state_path(size)
    state = json.loads(path.read_text()) if path.exists() else {"steps": {}}
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    state["versions"] = ", ".join(f"{k} {v}" for k, v in common.versions(dsn).items())
    state["steps"].setdefault(tool, {})[step] = {**figures, "at": when}
    path.write_text(json.dumps(state, indent=1))
    print(json.dumps({tool: {step: state["steps"][tool][step]}}))


#: The bound of one step (seconds): a run of this benchmark stays under 30 minutes.
LIMIT_S = 29 * 60


class OverLimit(Exception):
    """A step ran past :data:`LIMIT_S` and was stopped."""


def timed(argv: list[str], env: dict) -> float:
    """Seconds ``argv`` took; :class:`OverLimit` (the process group killed) past :data:`LIMIT_S`."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _out, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise OverLimit from None
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"{argv[0]} exited {proc.returncode}: {err[-3000:]}")
    return seconds


def dump_step(compress: str | None) -> str:
    """The step's name: ``dump``, or ``dump -Z <compress>`` for pg_dump given a compression of its own
    (its default, gzip at level 6, may not finish a 5M palace in a run; both figures are kept)."""
    return f"dump -Z {compress}" if compress else "dump"


def dumped(done: dict) -> dict:
    """The tool's dump step that wrote its file (the last one run to the end)."""
    runs = [f for s, f in done.items() if s.startswith("dump") and "source" in f]
    if not runs:
        raise SystemExit("no finished dump: run `dump TOOL` first")
    return max(runs, key=lambda f: f["at"])


def dump(size: int, tool: str, dsn: str, compress: str | None) -> None:
    pg_dump, _ = common.server_dump_tools(dsn)
    out = dump_path(size, tool)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with kp.in_place("postgres", size, dsn) as (_palace, env, kdsn):
        if tool == "plugin":
            argv = [kp.MEMPALACE_PG, "backup", str(out), "--pg-dump", pg_dump]
        else:
            level = f" --compress={compress}" if compress else ""
            argv = ["sh", "-c", f'{pg_dump} -Fc{level} > "$0"', str(out)]
            env = {**env, **common.libpq_vars(kdsn)}
        seconds = timed(argv, env)
        # what the file holds, for `check`: a 5M palace and its restored copy do not both fit on a small
        # disk beside the two files, so the source may be gone by then
        source = counts(kdsn)
    figures = {"seconds": seconds, "bytes": out.stat().st_size, "source": source}
    record(size, tool, dump_step(compress), figures, dsn)


def toc(pg_restore: str, path: Path, *sections: str) -> list[str]:
    """The entries of ``path``'s table of contents in ``sections``, as ``pg_restore -l`` lists them."""
    argv = [*pg_restore.split(), "-l", *(f"--section={s}" for s in sections), str(path)]
    lines = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()
    return [line for line in lines if line and not line.startswith(";")]


def write_list(entries: list[str], out: Path) -> Path:
    out.write_text("\n".join(entries) + "\n")
    return out


def post_list(pg_restore: str, path: Path, part: int, parts: int, out: Path) -> int:
    """Write the list of post-data part ``part`` of ``parts`` to ``out``; the segments it holds."""
    entries = toc(pg_restore, path, "post-data")
    segments = [line for line in entries if SEGMENT.search(line)]
    chosen = segments[part - 1 :: parts] + ([e for e in entries if e not in segments] if part == 1 else [])
    write_list(chosen, out)
    return len(segments[part - 1 :: parts])


def data_lists(pg_restore: str, path: Path, stem: Path) -> tuple[Path, Path]:
    """The data part as two lists: the definitions and AGE's catalog rows, restored by one session (in
    parallel, ``ag_label``'s rows can go in before the ``ag_graph`` rows its foreign key names, which
    AGE's extension script made: seen with ``pg_restore --jobs 2`` of a whole database), then every other
    table's rows, by the sessions side by side."""
    pre = toc(pg_restore, path, "pre-data")
    data = toc(pg_restore, path, "data")
    catalog = [e for e in data if " TABLE DATA ag_catalog " in e]
    rest = [e for e in data if e not in catalog]
    return write_list(pre + catalog, stem.with_suffix(".first.list")), write_list(
        rest, stem.with_suffix(".rows.list")
    )


def restore(size: int, tool: str, step: str, dsn: str, jobs: int) -> None:
    _, pg_restore = common.server_dump_tools(dsn)
    path = dump_path(size, tool)
    if not path.exists():
        raise SystemExit(f"no {tool} dump of {size:,}: run `dump {tool}` first")
    name = target_name(size, tool)
    tdsn = kp.with_dbname(dsn, name)
    env = dict(os.environ, MEMPALACE_PG_DSN=tdsn, MEMPALACE_PG_SCHEMA=kp.SCHEMA)
    figures: dict = {"jobs": jobs}
    if step == "data":
        kp.drop_database(dsn, name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        if tool == "plugin":
            kp.plugin_command("db", "bootstrap", env=env)
    if tool == "plugin" and step != "finish":
        from mempalace_pg.tools.backup import pgoptions, session_options

        with psycopg.connect(tdsn) as conn:
            options = session_options(conn, jobs)
        env["PGOPTIONS"] = pgoptions(options)
        figures["settings"] = options
    tools_env = {**env, **common.libpq_vars(tdsn)}
    argv = [*pg_restore.split(), "--no-owner", "--exit-on-error", f"--jobs={jobs}", "-d", name]
    if step == "data":
        first, rows = data_lists(pg_restore, path, kp.KEEP / f"restore_parts_{size}_{tool}_data")
        one = [a if not a.startswith("--jobs=") else "--jobs=1" for a in argv]
        seconds = timed([*one, "-L", str(first), str(path)], tools_env) + timed(
            [*argv, "-L", str(rows), str(path)], tools_env
        )
    elif step.startswith("post:"):
        part, parts = (int(x) for x in step[5:].split("/"))
        listing = kp.KEEP / f"restore_parts_{size}_{tool}_{part}of{parts}.list"
        figures["segments"] = post_list(pg_restore, path, part, parts, listing)
        seconds = timed([*argv, "-L", str(listing), str(path)], tools_env)
    elif step == "finish" and tool == "plugin":
        code = (
            "import json; from mempalace_pg.config import Settings; "
            "from mempalace_pg.tools.backup import finish_restore; "
            "print(json.dumps(finish_restore(Settings.load({}))))"
        )
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        seconds = time.perf_counter() - start
        figures["answer"] = json.loads(proc.stdout)
    else:
        raise SystemExit(f"no step {step!r} for {tool}: data, post:I/K, finish (the plugin's)")
    record(size, tool, step, {**figures, "seconds": seconds}, dsn)


def counts(dsn: str) -> dict:
    """What a restore must bring back: the drawers, the indexes of the palace's two schemas, the facts as
    Cypher counts them (AGE finds the graph through its catalog, which keys it by the schema's OID: a
    plain pg_restore gives the schema a new one, and Cypher then fails; its error is kept instead) and
    as rows of the graph's edge table."""
    graph = f"{kp.SCHEMA}_kg"
    with psycopg.connect(dsn, autocommit=True) as conn:
        out = {
            "drawers": conn.execute(f"SELECT count(*) FROM {kp.SCHEMA}.records").fetchone()[0],
            "indexes": conn.execute(
                "SELECT count(*) FROM pg_indexes WHERE schemaname IN (%s, %s)", (kp.SCHEMA, graph)
            ).fetchone()[0],
            "edge_rows": conn.execute(f'SELECT count(*) FROM "{graph}"._ag_label_edge').fetchone()[0],
        }
        conn.execute("LOAD 'age'")
        conn.execute("SET search_path = ag_catalog, public")
        try:
            facts = conn.execute(
                f"SELECT * FROM cypher('{graph}', $$ MATCH ()-[r]->() RETURN count(r) $$) AS (c agtype)"
            ).fetchone()[0]
        except psycopg.Error as exc:
            return {**out, "cypher": str(exc).splitlines()[0]}
    return {**out, "facts": int(str(facts))}


def check(size: int, tool: str, dsn: str) -> None:
    """The restored database against what the kept palace held when it was dumped (untimed)."""
    source = dumped(json.loads(state_path(size).read_text())["steps"][tool])["source"]
    restored = counts(kp.with_dbname(dsn, target_name(size, tool)))
    same = all(restored.get(k) == v for k, v in source.items() if k in ("drawers", "indexes", "facts"))
    record(size, tool, "check", {"source": source, "restored": restored, "same": same}, dsn)


def step_title(step: str) -> str:
    if step.startswith("dump -Z "):
        return f"the file written, pg_dump `--compress={step[8:]}`"
    return STEPS.get(step, step.replace("post:", "restore: post-data, part "))


def render(size: int, state: dict) -> str:
    steps = state["steps"]
    names = list(dict.fromkeys(s for tool in steps.values() for s in tool))
    ats = [f["at"] for tool in steps.values() for f in tool.values()]
    dumps = sorted(n for n in names if n.startswith("dump"))
    order = [*dumps, "data", *sorted(n for n in names if n.startswith("post:")), "finish"]
    lines = [
        f"## Backup and restore of {size:,} drawers, in parts",
        "",
        f"`python benchmarks/bench_restore_parts.py --size {size} ...`, one step a run "
        f"({min(ats)} to {max(ats)}, {state['versions']}). The kept palace in place "
        "(`benchmarks/kept_palaces.py`); its backup by "
        "`mempalace-pg backup` against PostgreSQL's `pg_dump -Fc` of the whole database, then each file "
        "restored into a new database in parts along pg_restore's table of contents (the tables and "
        "rows; the post-data entries with the vector index's segments dealt over the parts; then what "
        "`mempalace-pg restore` does after pg_restore), the plugin's parts with the settings `mempalace-pg "
        "restore --jobs N` gives pg_restore's sessions, PostgreSQL's with the server's. Seconds.",
        "",
        "| step | " + " | ".join(TOOLS[t] for t in steps) + " |",
        "|---|" + "---|" * len(steps),
    ]
    for step in (s for s in order if s in names):
        cells = []
        for tool in steps:
            f = steps[tool].get(step)
            if not f:
                cells.append("—")
                continue
            extra = [f"{f['bytes'] / 1e6:,.0f} MB"] if "bytes" in f else []
            extra += [f"{f['segments']} segment" + "s" * (f["segments"] != 1)] if "segments" in f else []
            extra += [f"--jobs {f['jobs']}"] if step != "dump" and "jobs" in f and step != "finish" else []
            took = f"over {f['over_s']:,.0f} (stopped)" if "over_s" in f else f"{f['seconds']:,.1f}"
            cells.append(took + (f" ({', '.join(extra)})" if extra else ""))
        lines.append(f"| {step_title(step)} | " + " | ".join(cells) + " |")
    totals = []
    for done in steps.values():
        parts = [f for s, f in done.items() if not s.startswith("dump") and s != "check"]
        total = sum(f.get("seconds", f.get("over_s", 0)) for f in parts)
        over = "over " if any("over_s" in f for f in parts) else ""
        totals.append(f"**{over}{total:,.1f}**" if parts else "—")  # none of its restore run yet
    lines += ["| restore, all parts | " + " | ".join(totals) + " |", ""]
    for tool, done in steps.items():
        if "check" in done:
            c = done["check"]
            held = ", ".join(f"{v:,} {k}" for k, v in c["restored"].items() if k != "cypher")
            if "cypher" in c["restored"]:
                held += f"; Cypher fails on it: `{c['restored']['cypher']}`"
            source = ", ".join(f"{v:,} {k}" for k, v in c["source"].items())
            lines.append(
                f"Checked, {TOOLS[tool]}: the restored database holds {held}"
                + (", as the source does." if c["same"] else f"; the source {source}: NOT the same.")
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    global LIMIT_S
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="pg_restore's sessions")
    ap.add_argument("--report", action="store_true", help="the report of the steps run so far")
    ap.add_argument("--no-write", action="store_true", help="with --report: do not update RESULTS.md")
    ap.add_argument("action", nargs="?", choices=["dump", "restore"])
    ap.add_argument("tool", nargs="?", choices=list(TOOLS))
    ap.add_argument("step", nargs="?", help="restore: data, post:I/K, finish (the plugin's), then check")
    ap.add_argument("--limit", type=float, default=LIMIT_S, help="stop a step after this many seconds")
    ap.add_argument("--compress", help="dump postgres: pg_dump's --compress (its default: gzip, level 6)")
    args = ap.parse_args()
    LIMIT_S = args.limit
    if args.report:
        state = json.loads(state_path(args.size).read_text())
        common.save_run(
            "bench_restore_parts",
            {"size": args.size},
            state,
            render(args.size, state),
            write=not args.no_write,
        )
        return 0
    dsn = os.environ.get("MEMPALACE_PG_DSN") or common.provisioned_dsn()
    step = dump_step(args.compress) if args.action == "dump" else args.step or "data"
    try:
        if args.action == "dump":
            dump(args.size, args.tool, dsn, args.compress)
        elif args.action == "restore" and step == "check":
            check(args.size, args.tool, dsn)
        elif args.action == "restore":
            restore(args.size, args.tool, step, dsn, args.jobs)
        else:
            ap.error("dump TOOL, restore TOOL STEP, or --report")
    except OverLimit:
        # a bound, measured: the step took longer than a run may
        record(args.size, args.tool, step, {"over_s": LIMIT_S}, dsn)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
