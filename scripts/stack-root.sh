# Sourced (not run) by scripts/provision-postgres.sh and by the scripts that work beside the server it
# provisions (provision-standby.sh, provision-pgbouncer.sh): its Debian root for MEMPALACE_PG_STACK, and
# how to run that root's programs. The sourcing script defines die() first.
#
# Sets: stack, pgmajor, base, root, pgbin (inside the root). Defines:
#   in_root CMD...             run CMD in the root as root, with a clean environment
#   as_pg CMD...               the same as the postgres user
#   stack_port TRIXIE SID      the one of two ports that belongs to this stack
#   port_taken PORT            true when a server could not listen on 127.0.0.1:PORT
#   free_port_near PORT        prints a free port from PORT+200 on, every other one (nothing: none free)
#   primary                    provision (or reuse) the server; sets primary_dsn, pw, primary_port
stack="${MEMPALACE_PG_STACK:-trixie}"
case "$stack" in
    trixie) pgmajor=17 ;;
    sid)    pgmajor=18 ;;
    *) die "MEMPALACE_PG_STACK must be 'trixie' or 'sid', not '$stack'" ;;
esac
base="${MEMPALACE_PG_ROOT_BASE:-/var/tmp/mempalace-pg}"   # every stack's root, and their logs
root="$base/$stack"
pgbin="/usr/lib/postgresql/$pgmajor/bin"    # inside the root

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
as_pg() { chroot --userspec=postgres:postgres "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

stack_port() { if [[ "$stack" == trixie ]]; then echo "$1"; else echo "$2"; fi; }

# Whether PostgreSQL could listen there, tried the way the postmaster does it: bind 127.0.0.1:PORT with
# SO_REUSEADDR (perl is Debian-essential). A connect test finds only listeners, but a socket the kernel
# gave that port as a client's ephemeral source, or one merely bound, makes the server's bind fail with
# "Address already in use" as surely. The defaults sit below Linux's ephemeral range (32768-60999) for
# that reason; this check covers a port chosen inside it.
port_taken() {
    ! perl -MSocket -e 'socket(my $s, PF_INET, SOCK_STREAM, 0) or exit 2;
        setsockopt($s, SOL_SOCKET, SO_REUSEADDR, 1) or exit 2;
        exit(bind($s, sockaddr_in($ARGV[0], inet_aton("127.0.0.1"))) ? 0 : 1)' "$1"
}

# Where a server or PgBouncer goes when another program holds its default port: clear of the defaults of
# every server, standby and pooler, and every other port, so that trixie's (odd) and sid's (even) never
# pick the same one when the test command provisions both at once.
free_port_near() {
    local candidate
    for candidate in $(seq $(($1 + 200)) 2 $(($1 + 298))); do
        port_taken "$candidate" || { echo "$candidate"; return 0; }
    done
}

primary() {
    primary_dsn=$(MEMPALACE_PG_STACK="$stack" bash scripts/provision-postgres.sh | tail -n 1)
    pw=$(sed -E 's|^postgresql://postgres:([^@]*)@.*$|\1|' <<<"$primary_dsn")
    primary_port=$(sed -E 's|^.*@127\.0\.0\.1:([0-9]+)/.*$|\1|' <<<"$primary_dsn")
}
