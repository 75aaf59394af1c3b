#!/usr/bin/env bash
# Install Debian's documentation packages that tests and benchmarks read as real text (tests/real_text.py),
# unless they are installed already:
#   scripts/real-text.sh python3.11-doc postgresql-doc-15     # what the test suite reads
#   scripts/real-text.sh linux-doc-6.1                        # the lexical benchmark's larger corpus
set -euo pipefail
missing=()
for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
echo "[real-text] apt-get install ${missing[*]}" >&2
[[ "$(id -u)" == 0 ]] || { echo "[real-text] ERROR: run as root, or install ${missing[*]} yourself" >&2; exit 1; }
apt-get update -qq >&2 || true
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
