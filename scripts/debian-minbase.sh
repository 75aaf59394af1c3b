#!/usr/bin/env bash
# A `debootstrap --variant=minbase SUITE` root as a tarball, made once and shared, and its path on the last
# line of stdout. The servers' roots (scripts/provision-postgres.sh) and the Docker image's base
# (scripts/docker-stack.sh) start from it, so a fresh machine bootstraps each Debian suite once.
#
#   scripts/debian-minbase.sh trixie
#
# Settings (environment):
#   MEMPALACE_PG_MIRROR        Debian mirror (default: the host's apt mirror, else deb.debian.org)
#   MEMPALACE_PG_MINBASE_DIR   where the tarballs live (default /var/tmp/mempalace-pg/minbase)
# Two callers at once (test.sh prepares the servers and the image side by side): the second waits for the
# first's tarball, then uses it. The root's package lists and downloaded packages are left out: every user
# of it runs apt-get update first.
set -euo pipefail
suite="${1:?usage: $0 SUITE}"
log() { printf '[minbase] %s\n' "$*" >&2; }
die() { printf '[minbase] ERROR: %s\n' "$*" >&2; exit 1; }
[[ "$(id -u)" == 0 ]] || die "run as root (debootstrap needs it)"

source "$(dirname "$0")/debian-mirror.sh"
mirror=$(host_mirror)
dir="${MEMPALACE_PG_MINBASE_DIR:-/var/tmp/mempalace-pg/minbase}"
mkdir -p "$dir"
# the mirror is written into the root's sources.list: one tarball per suite and mirror
tarball="$dir/$suite-$(printf '%s' "$mirror" | md5sum | cut -c1-8).tar"

exec 9>"$tarball.lock"
flock 9
if [[ ! -s "$tarball" ]]; then
    if ! command -v debootstrap >/dev/null; then
        log "installing debootstrap from the host's apt archive"
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >&2
    fi
    work=$(mktemp -d "$dir/$suite-root.XXXXXX")
    chmod 755 "$work"   # the root's own mode, as a user inside it (postgres) must traverse it; mktemp made 700
    log "debootstrap --variant=minbase $suite (from $mirror)"
    if ! debootstrap --variant=minbase "$suite" "$work" "$mirror" >"$dir/debootstrap-$suite.log" 2>&1; then
        tail -n 20 "$dir/debootstrap-$suite.log" >&2
        rm -rf "$work"
        die "debootstrap failed (log: $dir/debootstrap-$suite.log)"
    fi
    rm -rf "$work"/var/cache/apt/archives/*.deb "$work"/var/lib/apt/lists/*
    tar -C "$work" --numeric-owner -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    rm -rf "$work"
fi
printf '%s\n' "$tarball"
