#!/bin/sh
# Debian's apt sources for the image, run by docker/Dockerfile:
#
#   apt-sources.sh trixie   add trixie-updates and trixie-security
#   apt-sources.sh sid      replace the sources with sid alone
#
# A stable suite gets its security fixes through <suite>-security and its point-release fixes through
# <suite>-updates. Docker Hub's debian:trixie-slim lists both, but a `debootstrap trixie` root (the base
# scripts/docker-stack.sh imports under that name) lists trixie alone, so an image built on it would never
# take a fix: a suite the base lists already is not added twice, whatever base this runs on. sid has no
# such suites: it is fixed in place.
#
# The archive is the base's own (the first one it lists that is not the security archive), else
# deb.debian.org; DEBIAN_SECURITY_MIRROR names the security archive.
set -eu

stack="${1:?usage: apt-sources.sh trixie | sid}"
ours=/etc/apt/sources.list.d/mempalace-pg.list

# Both formats: one-line `deb [options] URI suite...` and deb822 `URIs:` / `Suites:` (the .sources files).
listed() {
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | grep -v '^[[:space:]]*#' || true
}
mirror=$(listed \
         | sed -n -e 's/^deb \(\[[^]]*\] \)\{0,1\}\(https\{0,1\}:[^ ]*\) .*/\2/p' \
                  -e 's/^URIs: *\(https\{0,1\}:[^ ]*\).*/\1/p' \
         | grep -v -- '-security' | head -n 1)
mirror="${mirror:-http://deb.debian.org/debian}"
security_mirror="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"

case "$stack" in
    trixie)
        : >"$ours"
        for suite in trixie-updates trixie-security; do
            if listed | grep -E '^(deb |Suites:)' | grep -qE "[[:space:]]$suite([[:space:]]|\$)"; then
                continue
            fi
            case "$suite" in
                *-security) echo "deb $security_mirror $suite main" >>"$ours" ;;
                *) echo "deb $mirror $suite main" >>"$ours" ;;
            esac
        done
        ;;
    sid)
        rm -f /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list
        echo "deb $mirror sid main" >/etc/apt/sources.list
        ;;
    *)
        echo "apt-sources.sh: the stack must be trixie or sid, not $stack" >&2
        exit 1
        ;;
esac
echo "apt-sources.sh: $stack from $mirror" >&2
listed | grep -E '^(deb|deb-src|URIs:|Suites:)' >&2 || true
