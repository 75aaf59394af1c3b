#!/usr/bin/env bash
# The main job, end to end, on a fresh machine: a PostgreSQL with pgvector and AGE, a venv with
# MemPalace and mempalace-pg, then the real `mempalace` CLI mines examples/corpus into PostgreSQL
# (real all-MiniLM-L6-v2 embeddings, computed offline) and searches it.
#
#   bash scripts/demo.sh                     # everything
#   MEMPALACE_PG_TEST_DSN=postgresql://... bash scripts/demo.sh   # your own server instead
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

dsn=$(bash scripts/provision-postgres.sh | tail -n 1)
py=$(bash scripts/setup-venv.sh | tail -n 1)
bin=$(dirname "$py")
work="${MEMPALACE_PG_DEMO_DIR:-/tmp/mempalace-pg-demo}"
rm -rf "$work"; mkdir -p "$work"

# Real MiniLM embeddings served offline through MemPalace's openai-compat setting.
"$py" scripts/embedding_server.py --model minilm --port 0 --port-file "$work/port" >"$work/embedding.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do [[ -s "$work/port" ]] && break; kill -0 $server 2>/dev/null || { cat "$work/embedding.log"; exit 1; }; sleep 0.1; done
[[ -s "$work/port" ]] || { echo "embedding server did not start"; cat "$work/embedding.log"; exit 1; }

export MEMPALACE_CONFIG_DIR="$work/config"
export MEMPALACE_EMBEDDING_MODEL=openai-compat
export MEMPALACE_EMBEDDING_API_URL="http://127.0.0.1:$(cat "$work/port")"
export MEMPALACE_EMBEDDING_API_MODEL=all-MiniLM-L6-v2
export MEMPALACE_PG_DSN="$dsn"
export MEMPALACE_PG_SCHEMA=demo
# A fresh demo every run: the schema and graph an earlier run left (none on a new server) go first.
"$bin/mempalace-pg" db drop --yes >/dev/null
cp -r examples/corpus "$work/corpus"
mp() { "$bin/mempalace" --palace "$work/palace" "$@" </dev/null; }

echo; echo "== mempalace init --backend postgres $work/corpus   (rooms from the folder layout)"
mp init --backend postgres --yes --no-llm "$work/corpus" | grep -E "ROOM|Config saved|rooms" || true
echo; echo "== mempalace --backend postgres mine $work/corpus"
mp --backend postgres mine "$work/corpus" | tail -n 12
echo; echo "== mempalace search \"how do I get my data back after the disk dies\""
mp search "how do I get my data back after the disk dies" --results 2
echo; echo "== mempalace search \"when should basil be planted\""
mp search "when should basil be planted" --results 1
echo; echo "== mempalace status"
mp status
echo; echo "== the same palace in SQL (schema demo)"
"$py" - <<'PY'
import os, psycopg
with psycopg.connect(os.environ["MEMPALACE_PG_DSN"]) as conn:
    print(f"{'wing':<10} {'room':<16} drawers")
    for wing, room, n in conn.execute("SELECT wing, room, count(*) FROM demo.drawers GROUP BY 1, 2 ORDER BY 1, 2"):
        print(f"{wing:<10} {room:<16} {n}")
PY

echo; echo "== the knowledge graph: facts written through MemPalace's own KnowledgeGraph class (as its MCP"
echo "   server and 'mine --source' do), stored in Apache AGE in the same database"
PALACE="$work/palace" "$py" - <<'PY'
import os
import mempalace.palace   # what MemPalace's CLI and MCP server import first: it loads the installed plugins
from mempalace.knowledge_graph import KnowledgeGraph   # now routed: a postgres palace gets the AGE graph
import psycopg
kg = KnowledgeGraph(db_path=os.path.join(os.environ["PALACE"], "knowledge_graph.sqlite3"))
print("graph:", kg)
assert not os.path.exists(os.path.join(os.environ["PALACE"], "knowledge_graph.sqlite3"))
with psycopg.connect(os.environ["MEMPALACE_PG_DSN"]) as conn:   # the drawers each fact was drawn from
    drawer = dict(conn.execute("SELECT DISTINCT ON (source_file) regexp_replace(source_file, '^.*/', ''), id "
                               "FROM demo.drawers ORDER BY source_file, id").fetchall())
kg.add_triple("Homelab NAS", "runs", "ZFS", valid_from="2023-02-01", source_drawer_id=drawer.get("network.md"))
kg.add_triple("Homelab NAS", "backs_up_to", "USB disk", valid_from="2023-02-01", source_drawer_id=drawer.get("backups.md"))
kg.supersede("Homelab NAS", "backs_up_to", "USB disk", "Offsite B2 bucket", at="2025-09-01",
             source_drawer_id=drawer.get("backups.md"))
kg.add_triple("Offsite B2 bucket", "holds", "pg_dump archives", source_drawer_id=drawer.get("backups.md"))
kg.add_triple("Homelab NAS", "powered_by", "UPS", source_drawer_id=drawer.get("power.md"))
kg.add_triple("Basil", "planted_in", "Balcony box", valid_from="2026-05-10", source_drawer_id=drawer.get("garden.md"))
print("stats:", kg.stats())
PY
echo; echo "== mempalace-pg kg query 'Homelab NAS' --as-of 2024-06-01   (what was true then)"
"$bin/mempalace-pg" kg query "Homelab NAS" --as-of 2024-06-01 --palace "$work/palace"
echo; echo "== mempalace-pg kg query 'homelab nas'   (everything, current and ended)"
"$bin/mempalace-pg" kg query "homelab nas" --palace "$work/palace"
echo; echo "== the same facts through Cypher (what psql shows)"
"$py" - <<'PY'
import os, psycopg
with psycopg.connect(os.environ["MEMPALACE_PG_DSN"], autocommit=True) as conn:
    conn.execute("LOAD 'age'")
    conn.execute('SET search_path = ag_catalog, "$user", public')
    for row in conn.execute(
            "SELECT * FROM cypher('demo_kg', $$ MATCH (s:Entity)-[f:Fact]->(o:Entity) "
            "RETURN s.name, f.predicate, o.name, f.valid_from, f.valid_to ORDER BY f.valid_from, o.name $$) "
            "AS (s agtype, p agtype, o agtype, vf agtype, vt agtype)"):
        print(" | ".join("-" if v is None else v for v in row))
PY
echo; echo "== mempalace-pg search around 'Homelab NAS' \"what happens when the power goes out\" --hops 2"
echo "   (drawers that facts within 2 hops of the NAS were drawn from, ranked by similarity: one SQL statement)"
"$bin/mempalace-pg" search around "Homelab NAS" "what happens when the power goes out" --hops 2 -n 3 --palace "$work/palace"
echo; echo "== mempalace-pg search hybrid \"pg_dump restore\"   (vector + full-text ranks fused)"
"$bin/mempalace-pg" search hybrid "pg_dump restore" -n 3 --palace "$work/palace"
echo; echo "== an AI client over MCP: mempalace-pg mcp, started and spoken to by the official MCP SDK's client"
echo "   (files a memory and its fact in one transaction, then finds it around the NAS, which it never names:"
echo "    the graph links the NAS to the UPS, and the new fact is about the UPS)"
PALACE="$work/palace" "$py" - <<'PY'
import os, sys
import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    server = StdioServerParameters(command=os.path.join(os.path.dirname(sys.executable), "mempalace-pg"),
                                   args=["mcp", "--palace", os.environ["PALACE"]], env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        print("tools:", ", ".join(t.name for t in (await client.list_tools()).tools))
        filed = (await client.call_tool("pg_file_memory", {
            "wing": "corpus", "room": "homelab",
            "content": "New batteries went into the UPS on 28 November; a test run held the rack for 65 minutes.",
            "facts": [{"subject": "UPS", "predicate": "battery_replaced", "object": "New UPS batteries",
                       "valid_from": "2026-11-28"}]})).structured_content
        print(f"pg_file_memory: drawer {filed['drawer']}, {len(filed['facts'])} fact")
        found = (await client.call_tool("pg_search_around_entity", {
            "entity": "Homelab NAS", "query": "how long does the NAS run on battery now", "hops": 2,
            "limit": 2})).structured_content
        for hit in found["hits"]:
            facts = "; ".join(f"{f['subject']} —{f['predicate']}→ {f['object']}" for f in hit["facts"])
            text = " ".join(hit["document"].split())
            print(f"  similarity {hit['similarity']:.3f}  {text[:58]}…\n      {facts}")

anyio.run(main)
PY
