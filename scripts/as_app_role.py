"""Run a command (the integration tier) as a fresh least-privilege application role, in a fresh database.

    MEMPALACE_PG_TEST_DSN=<superuser DSN> python scripts/as_app_role.py COMMAND [ARG...]

On the server MEMPALACE_PG_TEST_DSN names (a superuser, e.g. scripts/provision-postgres.sh's):
  1. create a database ``mp_app_<random>`` and run ``mempalace-pg db bootstrap --app-role mp_app_<random>``
     in it as the superuser: the extensions and a login role with no superuser, CREATEDB or CREATEROLE,
     which gets AGE through session_preload_libraries (docs/install.md, "db bootstrap");
  2. run COMMAND with MEMPALACE_PG_TEST_DSN set to that role in that database and MEMPALACE_PG_TEST_ADMIN_DSN
     to the superuser in that database (tests/integration/conftest.py: the code under test connects with
     the first, set-up that needs a superuser with the second);
  3. drop the database and the role, whatever COMMAND did, and exit with COMMAND's status (or 1 when the
     clean-up failed).
The role's password is random and the superuser's is taken out of its DSN: each goes to a passfile of its
own (mode 0600, in a private temporary directory removed at the end) that its DSN names with ``passfile=``,
so neither DSN, nor anything this prints, holds a password (pytest prints a failing test's fixture values).
Everything is made fresh on each run, so it works on a fresh machine and leaves nothing behind.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

PASSWORD_VARIABLE = "MEMPALACE_PG_TEST_APP_PASSWORD"  # seen by `db bootstrap` only, never by COMMAND


def log(message: str) -> None:
    print(f"[as-app-role] {message}", file=sys.stderr, flush=True)


def passfile_line(user: str, password: str) -> str:
    """A line of a libpq password file for ``user`` on any host, port and database (the file is named by
    one DSN only), with ``:`` and ``\\`` escaped as libpq reads them."""

    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace(":", "\\:")

    return f"*:*:*:{escape(user)}:{escape(password)}\n"


def write_passfile(path: Path, user: str, password: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(passfile_line(user, password))


def superuser_dsn(dsn: str, database: str, private: Path) -> str:
    """The superuser DSN pointed at ``database``, its password (if the DSN held one) moved to a passfile."""
    params = conninfo_to_dict(dsn)
    password = params.pop("password", None)
    if password:
        user = params.get("user") or os.environ.get("PGUSER") or "postgres"
        write_passfile(private / "pgpass-admin", user, password)
        params["passfile"] = str(private / "pgpass-admin")
    params["dbname"] = database
    return make_conninfo(**params)


def app_dsn(admin_dsn: str, role: str, password: str, private: Path) -> str:
    params = conninfo_to_dict(admin_dsn)
    write_passfile(private / "pgpass-app", role, password)
    params.update(user=role, passfile=str(private / "pgpass-app"))
    return make_conninfo(**params)


def run(command: list[str], env: dict) -> int:
    """COMMAND in its own process group; a SIGINT or SIGTERM to this script is passed on to it, and the
    clean-up still runs once it has ended."""
    child = subprocess.Popen(command, env=env, start_new_session=True)

    def forward(signum, _frame):
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def drop(dsn: str, database: str, role: str) -> bool:
    """Drop the run's database (its sessions ended first) and role; whether both went."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=30) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    except psycopg.Error as exc:
        log(f"FAILED to drop database {database} or role {role}: {exc}")
        return False
    log(f"dropped database {database} and role {role}")
    return True


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    dsn = os.environ.get("MEMPALACE_PG_TEST_DSN", "").strip()
    if not dsn:
        log("set MEMPALACE_PG_TEST_DSN to a superuser connection to the test server")
        return 2
    with psycopg.connect(dsn, autocommit=True, connect_timeout=30) as conn:
        if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            log("MEMPALACE_PG_TEST_DSN is not a superuser: it creates a database and a role")
            return 2
        name = f"mp_app_{secrets.token_hex(5)}"  # the database and the role
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    private = Path(tempfile.mkdtemp(prefix="mempalace-pg-app-"))  # mode 0700
    try:
        status = bootstrap_and_run(dsn, name, private, argv)
    finally:
        dropped = drop(dsn, name, name)
        shutil.rmtree(private, ignore_errors=True)
    return status if dropped or status != 0 else 1


def bootstrap_and_run(dsn: str, name: str, private: Path, command: list[str]) -> int:
    admin = superuser_dsn(dsn, name, private)
    password = secrets.token_urlsafe(24)
    app = app_dsn(admin, name, password, private)
    env = {k: v for k, v in os.environ.items() if k != PASSWORD_VARIABLE}
    cli = Path(sys.executable).with_name("mempalace-pg")
    boot = subprocess.run(
        [str(cli), "--dsn", admin, "db", "bootstrap", "--app-role", name]
        + ["--app-password-env", PASSWORD_VARIABLE],
        env={**env, PASSWORD_VARIABLE: password},
        capture_output=True,
        text=True,
    )
    if boot.returncode != 0:
        log(f"FAILED: mempalace-pg db bootstrap exited {boot.returncode}: {boot.stderr.strip()}")
        return 1
    log(f"database {name} bootstrapped with application role {name} (no superuser)")
    log(f"MEMPALACE_PG_TEST_DSN={app}")
    log(f"MEMPALACE_PG_TEST_ADMIN_DSN={admin}")
    return run(command, {**env, "MEMPALACE_PG_TEST_DSN": app, "MEMPALACE_PG_TEST_ADMIN_DSN": admin})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
