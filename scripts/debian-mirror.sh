# Sourced (not run) by scripts/provision-postgres.sh and scripts/debian-minbase.sh: the Debian mirrors a
# root is bootstrapped and updated from.
#
#   host_mirror            MEMPALACE_PG_MIRROR, else the host's apt mirror, else deb.debian.org's
#   host_mirror security   MEMPALACE_PG_SECURITY_MIRROR, else the host's security mirror, else deb.debian.org's
host_mirror() {
    local given fallback found pick=(grep -v -- '-security')
    if [[ "${1:-}" == security ]]; then
        given="${MEMPALACE_PG_SECURITY_MIRROR:-}" fallback=http://deb.debian.org/debian-security
        pick=(grep -- '-security')
    else
        given="${MEMPALACE_PG_MIRROR:-}" fallback=http://deb.debian.org/debian
    fi
    if [[ -n "$given" ]]; then
        printf '%s\n' "$given"
        return
    fi
    found=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
            | awk '{print $2}' | "${pick[@]}" | head -n1 || true)
    printf '%s\n' "${found:-$fallback}"
}
