#!/usr/bin/env bash
# Install Debian packages on this machine (the host, not a stack's root) unless they are installed already,
# in one apt transaction:
#   scripts/host-packages.sh debootstrap docker.io docker-compose
# The test command installs everything its steps need this way first, so that the steps it then runs
# side by side (servers provisioned, the image built) never wait on, or fight over, the host's apt lock.
set -euo pipefail
missing=()
for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
echo "[host-packages] apt-get install ${missing[*]}" >&2
[[ "$(id -u)" == 0 ]] || { echo "[host-packages] ERROR: run as root, or install ${missing[*]} yourself" >&2; exit 1; }
apt-get update -qq >&2 || true
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
