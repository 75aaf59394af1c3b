#!/usr/bin/env bash
# Fetch MemPalace's source distribution (the version scripts/constraints.txt pins) from PyPI and unpack it
# under .cache/, once; print the unpacked directory. The test suite runs MemPalace's own knowledge-graph
# tests, which ship in the sdist (tests/), against the AGE graph (tests/integration/test_mempalace_kg_suite.py).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^mempalace==//p' scripts/constraints.txt)
dir=".cache/mempalace-$version"
if [[ ! -f "$dir/tests/test_knowledge_graph.py" ]]; then
    python="${1:-.venv/bin/python}"
    mkdir -p .cache
    echo "[sdist] downloading mempalace $version's sdist from PyPI" >&2
    "$python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
        "mempalace==$version" -d .cache >&2
    tar -xzf ".cache/mempalace-$version.tar.gz" -C .cache
fi
printf '%s\n' "$(pwd)/$dir"
