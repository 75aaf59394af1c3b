#!/usr/bin/env bash
# Install Debian's documentation packages that tests and benchmarks read as real text (tests/real_text.py),
# unless they are installed already:
#   scripts/real-text.sh python3.11-doc postgresql-doc-15     # what the test suite reads
#   scripts/real-text.sh linux-doc-6.1                        # the lexical benchmark's larger corpus
set -euo pipefail
exec bash "$(dirname "$0")/host-packages.sh" "$@"
