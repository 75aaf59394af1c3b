"""backup's libpq environment for pg_dump / pg_restore: every parameter of the DSN that libpq can read
from the environment reaches them that way, so a verify-full DSN works and no secret is on a command line."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mempalace_pg.tools.backup import LIBPQ_ENV, compression_for, libpq_env

NEWER_THAN_15 = {
    "PGREQUIREAUTH",
    "PGLOADBALANCEHOSTS",
    "PGGSSDELEGATION",
    "PGSSLCERTMODE",
    "PGSSLNEGOTIATION",
    "PGMINPROTOCOLVERSION",
    "PGMAXPROTOCOLVERSION",
}


def test_a_verify_full_dsn_reaches_pg_dump_whole(monkeypatch, tmp_path):
    monkeypatch.delenv("PGSSLROOTCERT", raising=False)
    monkeypatch.setenv("PGHOST", "elsewhere")  # the DSN's value wins over ours
    monkeypatch.setenv("UNRELATED", "kept")
    dsn = (
        "postgresql://app:s3cret@db.lan:5433/palace?sslmode=verify-full&sslrootcert=/etc/ca.crt"
        "&sslcert=/c/client.crt&sslkey=/c/client.key&sslcrl=/c/crl.pem&passfile=/c/pgpass"
        "&connect_timeout=7&options=-c%20statement_timeout%3D0&application_name=bk"
        "&target_session_attrs=read-write&channel_binding=require"
    )
    env = libpq_env(dsn)
    expected = {
        "PGHOST": "db.lan",
        "PGPORT": "5433",
        "PGUSER": "app",
        "PGPASSWORD": "s3cret",
        "PGDATABASE": "palace",
        "PGSSLMODE": "verify-full",
        "PGSSLROOTCERT": "/etc/ca.crt",
        "PGSSLCERT": "/c/client.crt",
        "PGSSLKEY": "/c/client.key",
        "PGSSLCRL": "/c/crl.pem",
        "PGPASSFILE": "/c/pgpass",
        "PGCONNECT_TIMEOUT": "7",
        "PGOPTIONS": "-c statement_timeout=0",
        "PGAPPNAME": "bk",
        "PGTARGETSESSIONATTRS": "read-write",
        "PGCHANNELBINDING": "require",
    }
    assert {k: env.get(k) for k in expected} == expected
    assert env["UNRELATED"] == "kept"


def test_parameters_the_dsn_leaves_out_are_not_invented(monkeypatch):
    for var in LIBPQ_ENV.values():
        monkeypatch.delenv(var, raising=False)
    env = libpq_env("host=/var/run/postgresql dbname=mp")
    assert {v: env[v] for v in LIBPQ_ENV.values() if v in env} == {
        "PGHOST": "/var/run/postgresql",
        "PGDATABASE": "mp",
    }


def _libpq_files() -> list[Path]:
    """The libpq psycopg ships (psycopg-binary's, PostgreSQL 18's), else the system's."""
    import psycopg

    bundled = sorted(Path(psycopg.__file__).parent.parent.glob("psycopg_binary.libs/libpq*.so*"))
    if bundled:
        return bundled
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    return [Path(line.split(" => ")[1]) for line in out.splitlines() if "libpq.so.5 " in line]


def test_every_variable_is_one_libpq_reads():
    """The names are libpq's own: its shared library holds each variable's name as a string."""
    libs = _libpq_files()
    assert libs, "no libpq on this machine (psycopg-binary's or ldconfig -p)"
    data = libs[0].read_bytes()
    missing = [v for v in LIBPQ_ENV.values() if b"\0" + v.encode() + b"\0" not in data]
    if "psycopg_binary" not in str(libs[0]):
        # an older system libpq (Debian 12's is 15) lacks the variables PostgreSQL 16-18 added
        missing = [v for v in missing if v not in NEWER_THAN_15]
    assert not missing, f"{libs[0]} does not know {missing}"


def test_a_backup_asks_for_zstd_where_pg_dump_knows_it():
    """zstd came with pg_dump 16; 15 (the oldest server the plugin takes) gets gzip at its fastest level."""
    assert compression_for("pg_dump (PostgreSQL) 17.12 (Debian 17.12-0+deb13u1)\n") == "zstd:1"
    assert compression_for("pg_dump (PostgreSQL) 18.1\n") == "zstd:1"
    assert compression_for("pg_dump (PostgreSQL) 16.4\n") == "zstd:1"
    assert compression_for("pg_dump (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n") == "gzip:1"
    assert compression_for("") == "gzip:1"  # a tool that printed nothing readable: gzip, which every one has
