#!/usr/bin/env bash
# The release a user installs, checked as they would use it:
#   1. `python -m build` makes the wheel and the sdist; the sdist holds what a release must (LICENSE,
#      CHANGELOG, README, the SQL under sql/, the Alembic revisions) and builds a wheel of its own;
#   2. the wheel installs into a clean venv outside the repository, beside MemPalace 3.11 from PyPI
#      (versions as scripts/constraints.txt pins them), and nothing of the clone is on its path;
#   3. the demo's smoke, there: MemPalace lists the backend, its real CLI mines a small corpus into a new
#      database on the server given, searches it, a knowledge-graph fact filed through MemPalace's own
#      KnowledgeGraph comes back from `mempalace-pg kg query`, and `mempalace-pg doctor` finds nothing to fix.
#
#   scripts/release-check.sh DSN     # a superuser's DSN of a server with pgvector and Apache AGE
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
dsn=${1:?usage: scripts/release-check.sh DSN (a superuser of a server with pgvector and AGE)}
py="${MEMPALACE_PG_PYTHON:-$repo/.venv/bin/python}"
py=$(realpath -s "$py")   # absolute: the smoke runs from a directory outside the repository
work=$(mktemp -d /tmp/mempalace-pg-release-XXXXXX)
database="release_$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
server=""
log() { printf '[release] %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
admin() { "$py" - "$dsn" "$1" "$database" <<'PY'
import sys, psycopg
from psycopg import sql
dsn, action, name = sys.argv[1:]
with psycopg.connect(dsn, autocommit=True) as conn:
    if action == "create":
        conn.execute(sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(name)))
    else:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
PY
}
cleanup() {
    [[ -z "$server" ]] || kill "$server" 2>/dev/null || true
    admin drop || true
    rm -rf "$work"
}
trap cleanup EXIT

log "python -m build (wheel and sdist)"
"$py" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; die "build"; }
wheel=$(ls "$work"/dist/*.whl)
sdist=$(ls "$work"/dist/*.tar.gz)
listing=$(tar tzf "$sdist")
for f in LICENSE CHANGELOG.md README.md sql/0001_drawers.sql sql/bootstrap/01_extensions.sql migrations/env.py \
    pyproject.toml; do
    grep -q "^[^/]*/$f\$" <<<"$listing" || die "the sdist lacks $f"
done
"$py" -m pip wheel -q --disable-pip-version-check --no-deps -w "$work/from-sdist" "$sdist" >"$work/sdist.log" 2>&1 \
    || { cat "$work/sdist.log" >&2; die "the sdist does not build a wheel"; }
log "built $(basename "$wheel") and $(basename "$sdist"); the sdist builds a wheel too"

log "a clean venv outside the repository, the wheel beside MemPalace from PyPI"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check -c "$repo/scripts/constraints.txt" "$wheel" \
    >"$work/pip.log" 2>&1 || { tail -n 30 "$work/pip.log" >&2; die "pip install of the wheel"; }
cd "$work"
export HOME="$work/home" PATH="$work/venv/bin:$PATH"
mkdir -p "$HOME"
where=$(python -c "import mempalace_pg, mempalace; print(mempalace_pg.__file__, mempalace.__version__)")
[[ "$where" == "$work/venv/"* ]] || die "mempalace_pg imported from $where, not the clean venv"
log "installed: $where"
python -c "from mempalace.backends.registry import available_backends as a; assert 'postgres' in a(), a()" \
    || die "MemPalace does not list the postgres backend"

log "the demo's smoke: mine, search, a fact, doctor"
"$py" "$repo/scripts/embedding_server.py" --model hash --port 0 --port-file "$work/port" --quiet \
    >/dev/null 2>"$work/embedding.log" &
server=$!
for _ in $(seq 1 300); do [[ -s "$work/port" ]] && break; kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
[[ -s "$work/port" ]] || { cat "$work/embedding.log" >&2; die "the embedding server did not start"; }
admin create
export MEMPALACE_EMBEDDING_MODEL=openai-compat MEMPALACE_EMBEDDING_API_MODEL=all-MiniLM-L6-v2
export MEMPALACE_EMBEDDING_API_URL="http://127.0.0.1:$(cat "$work/port")"
export MEMPALACE_PG_DSN
MEMPALACE_PG_DSN=$("$py" -c "import sys; from psycopg.conninfo import conninfo_to_dict as d, make_conninfo as m; \
print(m(**{**d(sys.argv[1]), 'dbname': sys.argv[2]}))" "$dsn" "$database")
cp -r "$repo/examples/corpus" "$work/corpus"
palace="$HOME/palace-pg"
mempalace --palace "$palace" --backend postgres mine "$work/corpus" </dev/null >"$work/mine.log" 2>&1 \
    || { tail -n 30 "$work/mine.log" >&2; die "mempalace mine"; }
found=$(mempalace --palace "$palace" search "how do I get my data back after the disk dies" --results 2 </dev/null)
grep -q "Source: backups.md" <<<"$found" || { echo "$found" >&2; die "mempalace search did not find backups.md"; }
python - "$palace" <<'PY' || die "a fact through MemPalace's KnowledgeGraph"
import os, sys
from mempalace.knowledge_graph import KnowledgeGraph
kg = KnowledgeGraph(db_path=os.path.join(sys.argv[1], "knowledge_graph.sqlite3"))
kg.add_triple("Homelab NAS", "powered_by", "UPS", valid_from="2024-01-01")
PY
facts=$(mempalace-pg kg query "Homelab NAS" --palace "$palace")
grep -q "Homelab NAS —powered_by→ UPS" <<<"$facts" || { echo "$facts" >&2; die "kg query"; }
mempalace-pg doctor --palace "$palace" >"$work/doctor.log" 2>&1 || { cat "$work/doctor.log" >&2; die "doctor"; }
log "ok: the wheel installs outside the repository and runs the demo's smoke"
