"""A PostgreSQL server on loopback for the Kafka Connect sink: Debian's PostgreSQL (with its
contrib extensions: Debezium's JDBC sink writes Connect maps as `hstore`), data under the
state directory, started and stopped with pg_ctl."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from devstack.process import StackError, port_in_use, tail
from devstack.settings import HOST, StackSettings

USER = "casscade"  # the cluster's superuser, trusted on loopback (a dev stack, not prod)
DATABASE = "casscade"
# Where Debian (postgresql-NN) and most distributions put the server binaries.
_BIN_GLOBS = ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin")
# PostgreSQL refuses to run as root; as root the stack runs it as this system user.
_RUN_AS = "postgres"


def bin_dir() -> Path:
    """The newest PostgreSQL server's bin directory (pg_ctl, initdb, postgres); else
    StackError with the install hint."""
    found = sorted((p for g in _BIN_GLOBS for p in Path("/").glob(g.lstrip("/"))
                    if (p / "pg_ctl").exists() and (p / "initdb").exists()),
                   key=_version_key)
    on_path = shutil.which("pg_ctl")
    if not found and on_path:
        found = [Path(on_path).parent]
    if not found:
        raise StackError("PostgreSQL's server (pg_ctl, initdb) is required for the Connect "
                         "sink. Install it (Debian: apt-get install postgresql "
                         "postgresql-contrib); hstore comes with contrib.")
    return found[-1]


def _version_key(p: Path) -> tuple[int, ...]:
    digits = "".join(ch if ch.isdigit() else " " for ch in str(p)).split()
    return tuple(int(d) for d in digits)


def data_dir(s: StackSettings) -> Path:
    """The cluster's data directory."""
    return s.postgres_dir / "data"


def log_file(s: StackSettings) -> Path:
    """The server's log."""
    return s.postgres_dir / "logs" / "postgres.log"


def url(s: StackSettings, database: str = DATABASE) -> str:
    """A libpq URL of the stack's database."""
    return f"postgresql://{USER}@{HOST}:{s.postgres_port}/{database}"


def jdbc_url(s: StackSettings, database: str = DATABASE) -> str:
    """The JDBC URL Debezium's sink connects with."""
    return f"jdbc:postgresql://{HOST}:{s.postgres_port}/{database}"


def _as_server_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    if shutil.which("runuser") is None:
        raise StackError("PostgreSQL cannot run as root and `runuser` is missing; run the "
                         "stack as an ordinary user")
    return ["runuser", "-u", _RUN_AS, "--", *argv]


def _run(argv: list[str], what: str, timeout_s: float = 120.0) -> str:
    done = subprocess.run(_as_server_user(argv), capture_output=True, text=True,
                          timeout=timeout_s, cwd="/")
    if done.returncode != 0:
        raise StackError(f"{what} failed (exit {done.returncode}):\n"
                         + (done.stdout + done.stderr)[-2000:])
    return done.stdout


def running(s: StackSettings) -> bool:
    """True when the server of this state directory runs (pg_ctl status)."""
    if not (data_dir(s) / "PG_VERSION").exists():
        return False
    done = subprocess.run(_as_server_user([str(bin_dir() / "pg_ctl"), "status", "-D",
                                           str(data_dir(s))]),
                          capture_output=True, text=True, cwd="/")
    return done.returncode == 0


def up(s: StackSettings) -> bool:
    """Initialise the cluster on first use, start it and create the sink's database with
    hstore; False when it ran already."""
    if running(s):
        return False
    if port_in_use(s.postgres_port):
        raise StackError(f"port {HOST}:{s.postgres_port} (PostgreSQL) is taken; set "
                         "CASSCADE_POSTGRES_PORT to a free one")
    pg = bin_dir()
    log_file(s).parent.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(s.postgres_dir, _RUN_AS)
        shutil.chown(log_file(s).parent, _RUN_AS)
    if not (data_dir(s) / "PG_VERSION").exists():
        _run([str(pg / "initdb"), "-D", str(data_dir(s)), "-U", USER, "-A", "trust",
              "-E", "UTF8", "--no-instructions"], f"initdb {data_dir(s)}")
    # The socket lives beside the data (not /var/run/postgresql, which may not exist).
    options = (f"-c listen_addresses={HOST} -p {s.postgres_port} "
               f"-c unix_socket_directories={s.postgres_dir} -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off")
    try:
        _run([str(pg / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(data_dir(s)),
              "-l", str(log_file(s)), "-o", options], "pg_ctl start")
    except StackError as exc:
        raise StackError(f"{exc}\nlast lines of {log_file(s)}:\n{tail(log_file(s))}") from exc
    _create_database(s, pg)
    return True


def _create_database(s: StackSettings, pg: Path) -> None:
    psql = [str(pg / "psql"), "-h", HOST, "-p", str(s.postgres_port), "-U", USER, "-X", "-q",
            "-v", "ON_ERROR_STOP=1"]
    exists = _run([*psql, "-d", "postgres", "-tAc",
                   f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"], "psql")
    if exists.strip() != "1":
        _run([*psql, "-d", "postgres", "-c", f"CREATE DATABASE {DATABASE}"], "CREATE DATABASE")
    _run([*psql, "-d", DATABASE, "-c", "CREATE EXTENSION IF NOT EXISTS hstore"],
         "CREATE EXTENSION hstore (Debian: apt-get install postgresql-contrib)")


def down(s: StackSettings) -> bool:
    """Stop the server (fast shutdown: open sessions are ended); False if it was not
    running."""
    if not running(s):
        return False
    _run([str(bin_dir() / "pg_ctl"), "stop", "-m", "fast", "-w", "-D", str(data_dir(s))],
         "pg_ctl stop")
    return True
