"""Benchmark palaces built once, kept outside the repository, and cloned for each run (issue 37, item 1).

    python benchmarks/kept_palaces.py build --size 1000000                 # postgres: a template database
    python benchmarks/kept_palaces.py build --size 1000000 --written upsert   # as users write, see below
    python benchmarks/kept_palaces.py build --size 300000 --store chroma   # a Chroma palace directory
    python benchmarks/kept_palaces.py build --size 5100000 --until 1000000   # a palace too big for one
    python benchmarks/kept_palaces.py grow --size 5100000 --until 2000000    #   run of 30 minutes, in parts
    python benchmarks/kept_palaces.py grow --size 5100000 --written upsert   #   (the last 100k as users do)
    python benchmarks/kept_palaces.py upgrade --size 1000000   # the code's schema revisions, in place
    python benchmarks/kept_palaces.py list

A kept palace is :class:`skewed_palace.SkewedPalace` of that size with ``bench_commands``'s facts
(``--facts`` between ``--entities`` entities, each drawn from one of its drawers):

* **postgres**: in a database of its own, ``mpbench_<size>`` on the benchmark server, written by
  the plugin's bulk loader (what ``mempalace-pg migrate`` uses: binary COPY, each row built into the
  vector index once) and the facts through ``AgeKnowledgeGraph.add_triple``; its palace directory,
  MemPalace home and config beside it under ``KEEP`` (``/var/tmp/mempalace-pg-bench`` by default).
  A run clones it with ``CREATE DATABASE ... TEMPLATE ... STRATEGY FILE_COPY`` (the files copied,
  not the rows written again) and a copy of the directory, and drops the clone afterwards;
  With ``--written upsert`` the drawers go through MemPalace's ``upsert`` instead, in batches of 1,000
  as ``mempalace mine`` and MemPalace's own ``migrate`` write them (the vector index built by the
  folder beside the writer, the partition's rows in the order they came), and the palace is kept as
  the writer and the folder leave it: no VACUUM, what autovacuum did by then stays. ``settle_s`` is
  how long the folder ran after the writer exited;
* **chroma**: MemPalace's default backend, written through MemPalace's backend API in batches of
  1,000 (Chroma has no faster path), and the same facts in MemPalace's SQLite knowledge graph; a run
  copies the directory.

A palace built in parts (``build --until``, then ``grow``) is one collection written by several
processes in turn: each bulk load builds the index over what it loaded (the full segments of the parts
before it stay), and the facts are added by the part that completes it. ``manifest.json`` keeps each
part (drawers, seconds, how long the folder ran after it, the database's size then).

``manifest.json`` beside each records what was built, how long it took and the versions it was built
with; a run refuses a kept palace whose manifest does not match the size and facts it asks for.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from skewed_palace import SkewedPalace  # noqa: E402

KEEP = Path(os.environ.get("MEMPALACE_PG_BENCH_KEEP", "/var/tmp/mempalace-pg-bench"))
BATCH = 1000
MEMPALACE_PG = str(Path(sys.executable).parent / "mempalace-pg")
SCHEMA = "mempalace"  # the plugin's default schema: a kept palace is what a user's database holds
#: The embedder a palace records (RFC 001) when it is made, as the benchmarks query it: MemPalace's hash
#: embedder through its openai-compat setting (scripts/embedding_server.py, whose URL a run sets; a
#: build passes every vector, so nothing listens at the URL given here).
EMBEDDER = {
    "MEMPALACE_EMBEDDING_MODEL": "openai-compat",
    "MEMPALACE_EMBEDDING_API_MODEL": "hash",
    "MEMPALACE_EMBEDDING_API_URL": "http://127.0.0.1:9",
}
PREDICATES = ("works_on", "knows", "uses", "owns", "depends_on", "located_in", "reports_to", "mentions")


def fact_rows(palace: SkewedPalace, count: int, entities: int):
    """``count`` facts between ``entities`` entities (the first ones the busiest), each drawn from a drawer
    of the palace; about 8 % of them ended. The same on every run."""
    import numpy as np

    rng = np.random.default_rng((palace.seed, 9))
    weights = 1.0 / np.arange(1, entities + 1) ** 0.7
    weights /= weights.sum()
    ends = rng.random(count) < 0.08
    for i in range(count):
        s, o = (int(x) for x in rng.choice(entities, 2, replace=False, p=weights))
        year = 2012 + int(rng.integers(0, 13))
        yield {
            "subject": f"Entity {s}",
            "predicate": PREDICATES[i % len(PREDICATES)],
            "obj": f"Entity {o}",
            "valid_from": f"{year}-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}",
            "valid_to": f"{year + 1}-06-30" if ends[i] else None,
            "source_drawer_id": palace.drawer_id(int(rng.integers(0, palace.n))),
        }


def with_dbname(dsn: str, dbname: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(**{**conninfo_to_dict(dsn), "dbname": dbname})


def template_name(size: int) -> str:
    return f"mpbench_{size}"


@dataclass
class Kept:
    """A kept palace on disk: its directory (palace, home, config) and manifest."""

    store: str
    size: int

    @property
    def root(self) -> Path:
        return KEEP / f"{self.store}_{self.size}"

    @property
    def manifest(self) -> dict:
        path = self.root / "manifest.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def env(self, root: Path, dsn: str | None = None) -> dict:
        """The environment of a palace whose directories are under ``root``, as ``bench_mine.Palace``
        makes it (the embedder is the caller's to add)."""
        env = dict(
            os.environ, HOME=str(root / "home"), MEMPALACE_CONFIG_DIR=str(root / "config"), NO_COLOR="1"
        )
        for key in ("MEMPALACE_BACKEND", "MEMPALACE_BACKEND_EXPLICIT", "MEMPALACE_PALACE_PATH"):
            env.pop(key, None)
        env.update(EMBEDDER)
        if dsn:
            env.update(MEMPALACE_PG_DSN=dsn, MEMPALACE_PG_SCHEMA=SCHEMA)
        return env


def _admin(dsn: str):
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


def plugin_command(*args: str, env: dict) -> str:
    """``mempalace-pg ARGS``'s output; RuntimeError naming the command when it fails."""
    proc = subprocess.run([MEMPALACE_PG, *args], env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"mempalace-pg {' '.join(args)}: {proc.stderr[-2000:]}")
    return proc.stdout


def drop_database(dsn: str, name: str) -> None:
    with _admin(dsn) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _versions() -> dict:
    from importlib.metadata import version

    return {p: version(p) for p in ("mempalace", "mempalace-pg", "chromadb")}


def postgres_collection(palace_dir: str, *, create: bool = False):
    """The plugin's collection of a palace directory, opened as MemPalace opens it (``get_collection``
    with the environment's backend settings), unwrapped: MemPalace may hand out a wrapper."""
    from mempalace.palace import get_collection

    from mempalace_pg.store.collection import PostgresCollection

    col = get_collection(palace_dir, create=create, backend="postgres")
    while not isinstance(col, PostgresCollection):
        col = col._inner
    return col


# ----------------------------------------------------------------------------- building
def child_build_postgres(
    size: int, root: str, facts: int, entities: int, written: str = "bulk", start: int = 0, stop: int = -1
) -> dict:
    """In a child whose environment names the template database: drawers ``start..stop`` (all by
    default) through the bulk loader (or MemPalace's ``upsert``), then, once the palace is whole, the
    facts."""
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    palace = SkewedPalace(size)
    stop = size if stop < 0 else stop
    palace_dir = str(Path(root) / "palace")
    col = postgres_collection(palace_dir, create=True)
    t0 = time.perf_counter()
    if written == "upsert":
        for first in range(start, stop, BATCH):
            ids, docs, metas, vecs = palace.batch(first, min(BATCH, stop - first))
            col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    else:
        with col.bulk_load() as load:
            for first in range(start, stop, BATCH):
                ids, docs, metas, vecs = palace.batch(first, min(BATCH, stop - first))
                load(ids=ids, documents=docs, metadatas=metas, embeddings=vecs)
    drawers_s = time.perf_counter() - t0
    if stop < size:
        return {"drawers_s": drawers_s}
    kg = AgeKnowledgeGraph(palace_path=palace_dir)
    t0 = time.perf_counter()
    for row in fact_rows(palace, facts, entities):
        kg.add_triple(**row)
    facts_s = time.perf_counter() - t0
    stats = kg.stats()
    kg.close()
    return {"drawers_s": drawers_s, "facts_s": facts_s, "kg": {k: stats[k] for k in ("entities", "triples")}}


def child_build_chroma(size: int, root: str, facts: int, entities: int) -> dict:
    from mempalace.knowledge_graph import KnowledgeGraph
    from mempalace.palace import get_collection

    palace = SkewedPalace(size)
    palace_dir = str(Path(root) / "palace")
    col = get_collection(palace_dir, create=True, backend="chroma")
    t0 = time.perf_counter()
    for start in range(0, size, BATCH):
        ids, docs, metas, vecs = palace.batch(start, BATCH)
        col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    drawers_s = time.perf_counter() - t0
    kg = KnowledgeGraph(db_path=os.path.join(palace_dir, "knowledge_graph.sqlite3"))
    t0 = time.perf_counter()
    for row in fact_rows(palace, facts, entities):
        kg.add_triple(**row)
    facts_s = time.perf_counter() - t0
    stats = kg.stats()
    return {"drawers_s": drawers_s, "facts_s": facts_s, "kg": {k: stats[k] for k in ("entities", "triples")}}


def wait_folder(dsn: str, timeout: float = 3600) -> float:
    """Seconds until no folder of the database runs (the bulk loader's segment, any merge)."""
    t0 = time.time()
    with _admin(dsn) as conn:
        while time.time() - t0 < timeout:
            running = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name LIKE 'mempalace-pg folder%%'"
            ).fetchone()[0]
            if not running:
                return time.time() - t0
            time.sleep(2)
    raise TimeoutError(f"a folder still runs after {timeout} s")


def build(
    store: str, size: int, dsn: str, facts: int, entities: int, written: str = "bulk", until: int = 0
) -> dict:
    """Build the kept palace of ``size`` drawers; with ``until`` (postgres, bulk), only its first
    ``until`` drawers: :func:`grow` writes the rest in later runs."""
    kept = Kept(store, size)
    shutil.rmtree(kept.root, ignore_errors=True)
    for d in ("home", "config"):
        (kept.root / d).mkdir(parents=True, exist_ok=True)
    env = kept.env(kept.root)
    manifest: dict = {
        "store": store,
        "size": size,
        "facts": facts,
        "entities": entities,
        "written": written if store == "postgres" else "upsert",
        "versions": _versions(),
        "loaded": 0,
        "parts": [],
    }
    if store == "postgres":
        name = template_name(size)
        drop_database(dsn, name)
        with _admin(dsn) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        env.update(MEMPALACE_PG_DSN=with_dbname(dsn, name), MEMPALACE_PG_SCHEMA=SCHEMA)
        plugin_command("db", "bootstrap", env=env)
        manifest["database"] = name
    return _write_part(kept, manifest, dsn, until or size, manifest["written"])


def grow(size: int, dsn: str, until: int, written: str) -> dict:
    """Write the next drawers of a kept postgres palace begun with ``build --until``: up to ``until``
    (the whole palace by default), through the bulk loader or MemPalace's ``upsert``."""
    kept = Kept("postgres", size)
    manifest = kept.manifest
    if not manifest or manifest.get("loaded", size) >= size:
        raise RuntimeError(f"no kept postgres palace of {size:,} begun with build --until to grow")
    if not manifest["loaded"] < (until or size) <= size:
        raise RuntimeError(
            f"--until must lie above the {manifest['loaded']:,} drawers written, up to {size:,}"
        )
    if written not in manifest["written"].split(", then "):
        manifest["written"] += f", then {written}"
    return _write_part(kept, manifest, dsn, until or size, written)


def _write_part(kept: Kept, manifest: dict, dsn: str, until: int, written: str) -> dict:
    """Drawers ``manifest["loaded"]..until`` written by a child process that exits; once the palace is
    whole, its facts too and what it takes on disk. The manifest is written after every part."""
    store, size, start = manifest["store"], manifest["size"], manifest["loaded"]
    env = kept.env(kept.root)
    if store == "postgres":
        env.update(MEMPALACE_PG_DSN=with_dbname(dsn, manifest["database"]), MEMPALACE_PG_SCHEMA=SCHEMA)
    t0 = time.perf_counter()
    child = [store, size, kept.root, manifest["facts"], manifest["entities"], written, start, until]
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *map(str, child)], env=env, capture_output=True, text=True
    )
    if proc.returncode:
        raise RuntimeError(f"build of {store} {size}: {proc.stderr[-3000:]}")
    part = {
        "from": start,
        "to": until,
        "written": written,
        **json.loads(proc.stdout.strip().splitlines()[-1]),
    }
    if store == "postgres":
        tdsn = with_dbname(dsn, manifest["database"])
        part["settle_s"] = wait_folder(tdsn)  # how long the folder ran after the writer exited
        with _admin(tdsn) as conn:
            if written == "bulk" and until == size:
                conn.execute("VACUUM ANALYZE")
            part["bytes"] = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    else:
        part["bytes"] = sum(p.stat().st_size for p in kept.root.rglob("*") if p.is_file())
    part["seconds"] = time.perf_counter() - t0
    part["at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    manifest["parts"].append(part)
    manifest["loaded"] = until
    # the whole palace's figures: its last part's state, and the build's time over every part
    for key in ("kg", "facts_s", "settle_s", "bytes"):
        if key in part:
            manifest[key] = part[key]
    manifest["drawers_s"] = sum(p["drawers_s"] for p in manifest["parts"])
    manifest["build_s"] = sum(p["seconds"] for p in manifest["parts"])
    manifest["built_at"] = part["at"]
    (kept.root / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def upgrade(size: int, dsn: str) -> dict:
    """``mempalace-pg db upgrade`` of a kept postgres palace's database (a schema revision applied in
    place to a palace of that size), timed and recorded in its manifest."""
    kept = Kept("postgres", size)
    manifest = kept.manifest
    env = kept.env(kept.root, with_dbname(dsn, manifest["database"]))
    t0 = time.perf_counter()
    output = plugin_command("db", "upgrade", env=env)
    manifest.setdefault("upgrades", []).append(
        {"seconds": time.perf_counter() - t0, "output": output.strip()[-300:], "versions": _versions()}
    )
    (kept.root / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest["upgrades"][-1]


# ----------------------------------------------------------------------------- cloning
def _move_palace(dsn: str, kept_dir: Path, palace_dir: Path, dbname: str) -> None:
    """Make the copy at ``palace_dir`` the palace of the clone's database. A palace is known by its
    directory's path, and the plugin refuses a palace whose marker names another database or key (a
    palace begun afresh elsewhere); a clone is a deliberate copy, so its key and marker are moved."""
    from mempalace_pg.marker import MARKER_FILENAME

    with _admin(dsn) as conn:
        conn.execute(
            f"UPDATE {SCHEMA}.palaces SET palace_key = %s WHERE palace_key = %s",
            (str(palace_dir), str(kept_dir)),
        )
    path = palace_dir / MARKER_FILENAME
    marker = json.loads(path.read_text())
    marker["postgres"].update(dbname=dbname, palace_key=str(palace_dir))
    path.write_text(json.dumps(marker, indent=2))


@contextlib.contextmanager
def clone(store: str, size: int, dsn: str, work: Path, tag: str, facts: int | None = None):
    """``(palace directory, environment, dsn)`` of a fresh copy of the kept palace, for one run; the copy
    (and its database) removed afterwards."""
    kept = Kept(store, size)
    manifest = kept.manifest
    if not manifest:
        raise RuntimeError(
            f"no kept {store} palace of {size:,}: "
            f"python benchmarks/kept_palaces.py build --size {size} --store {store}"
        )
    if manifest.get("loaded", size) < size:
        raise RuntimeError(
            f"the kept {store} palace of {size:,} holds {manifest['loaded']:,} drawers so far: "
            f"python benchmarks/kept_palaces.py grow --size {size}"
        )
    if facts is not None and manifest["facts"] != facts:
        raise RuntimeError(
            f"the kept {store} palace of {size:,} holds {manifest['facts']} facts, not {facts}"
        )
    root = work / tag
    shutil.copytree(kept.root, root, symlinks=True)
    rdsn = None
    try:
        if store == "postgres":
            name = f"{template_name(size)}_{tag}"
            with _admin(dsn) as conn:
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{manifest["database"]}" STRATEGY FILE_COPY')
            rdsn = with_dbname(dsn, name)
            _move_palace(rdsn, kept.root / "palace", root / "palace", name)
        yield root / "palace", kept.env(root, rdsn), rdsn
    finally:
        if rdsn:
            drop_database(dsn, f"{template_name(size)}_{tag}")
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def in_place(store: str, size: int, dsn: str, facts: int | None = None):
    """``(palace directory, environment, dsn)`` of the kept palace itself, as :func:`clone` yields a copy:
    for a palace whose copy would not fit beside it (5M). What a run writes stays in it."""
    kept = Kept(store, size)
    manifest = kept.manifest
    if manifest.get("loaded", 0) < size or (facts is not None and manifest["facts"] != facts):
        raise RuntimeError(f"no whole kept {store} palace of {size:,} with {facts} facts")
    kdsn = with_dbname(dsn, manifest["database"]) if store == "postgres" else None
    yield kept.root / "palace", kept.env(kept.root, kdsn), kdsn


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        store, size, root, facts, entities, written, start, stop = sys.argv[2:10]
        if store == "postgres":
            built = child_build_postgres(
                int(size), root, int(facts), int(entities), written, int(start), int(stop)
            )
            print(json.dumps(built))
        else:
            print(json.dumps(child_build_chroma(int(size), root, int(facts), int(entities))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build (or rebuild) one kept palace")
    b.add_argument("--size", type=int, required=True)
    b.add_argument("--store", choices=["postgres", "chroma"], default="postgres")
    b.add_argument("--facts", type=int, default=3000)
    b.add_argument("--entities", type=int, default=600)
    b.add_argument(
        "--written",
        choices=["bulk", "upsert"],
        default="bulk",
        help="postgres: through the bulk loader (default) or MemPalace's upsert, as users write",
    )
    b.add_argument("--until", type=int, default=0, help="postgres: only the first N drawers (then: grow)")
    g = sub.add_parser("grow", help="write the next drawers of a palace begun with build --until")
    g.add_argument("--size", type=int, required=True)
    g.add_argument("--until", type=int, default=0, help="up to N drawers (default: the whole palace)")
    g.add_argument("--written", choices=["bulk", "upsert"], default="bulk")
    u = sub.add_parser("upgrade", help="apply the code's schema revisions to a kept postgres palace")
    u.add_argument("--size", type=int, required=True)
    sub.add_parser("list", help="the kept palaces and their manifests")
    args = ap.parse_args()
    if args.command == "list":
        for path in sorted(KEEP.glob("*/manifest.json")):
            m = json.loads(path.read_text())
            built = f"built {m['built_at']} in {m['build_s']:.0f} s ({m.get('written', 'bulk')})"
            print(f"{path.parent.name}: {built}, {m['bytes'] / 1e9:.2f} GB")
        return 0
    sys.path.insert(0, str(HERE))
    import common

    dsn = os.environ.get("MEMPALACE_PG_DSN") or common.provisioned_dsn()
    if args.command == "upgrade":
        print(json.dumps(upgrade(args.size, dsn), indent=1))
        return 0
    if args.command == "build" and args.until and (args.store != "postgres" or args.written != "bulk"):
        ap.error("--until builds a postgres palace through the bulk loader in parts")
    if args.command == "grow":
        manifest = grow(args.size, dsn, args.until, args.written)
    else:
        manifest = build(args.store, args.size, dsn, args.facts, args.entities, args.written, args.until)
    print(json.dumps(manifest, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
