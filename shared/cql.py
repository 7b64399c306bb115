"""One way to build a cassandra-driver Cluster for both stages and the tools."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shared.config import ConfigError


def make_cluster(hosts: list[str], port: int, username: str | None = None,
                 password: str | None = None, request_timeout: float = 30,
                 pinned: bool = False, **options: Any):
    """A Cluster speaking protocol v5 with round-robin load balancing (no driver warnings
    about a missing policy), password authentication when a username is given; `pinned`
    sends every request to `hosts` only (a given node as coordinator)."""
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy, WhiteListRoundRobinPolicy

    policy = WhiteListRoundRobinPolicy(hosts) if pinned else RoundRobinPolicy()
    profile = ExecutionProfile(load_balancing_policy=policy,
                               request_timeout=request_timeout)
    auth = PlainTextAuthProvider(username, password) if username else None
    return Cluster(hosts, port=port, protocol_version=5, auth_provider=auth,
                   execution_profiles={EXEC_PROFILE_DEFAULT: profile}, **options)


def connect_quietly(cluster: Any) -> Any:
    """`cluster.connect()` without the driver's own tracebacks of a failed attempt (it logs
    one per contact point, then raises the same reasons): the caller says it once."""
    import logging

    loggers = [logging.getLogger(name) for name in ("cassandra.cluster", "cassandra.pool",
                                                    "cassandra.connection")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        return cluster.connect()
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def tls_context(ca_file: Path | None, cert_file: Path | None = None,
                key_file: Path | None = None, check_hostname: bool = True,
                section: str = "cassandra") -> ssl.SSLContext:
    """A client TLS context: trust `ca_file` (else the system's CAs), present `cert_file` +
    `key_file` if given, check the server's name; ConfigError naming a bad file."""
    try:
        ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{section}.ssl_ca_file {ca_file}: {exc}") from exc
    ctx.check_hostname = check_hostname
    if not check_hostname:
        ctx.verify_mode = ssl.CERT_REQUIRED  # still the CA's: only the name goes unchecked
    if (cert_file is None) != (key_file is None):
        raise ConfigError(f"{section}.ssl_cert_file and ssl_key_file go together")
    if cert_file is not None:
        try:
            ctx.load_cert_chain(str(cert_file), str(key_file))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{section}.ssl_cert_file {cert_file} / ssl_key_file "
                              f"{key_file}: {exc}") from exc
    return ctx


@contextmanager
def python_row_decoder(session: Any) -> Iterator[None]:
    """Rows decoded by the driver's pure-Python protocol handler while inside: its compiled
    decoder rejects the WRITETIME/TTL lists of collections when they hold nulls."""
    from cassandra.protocol import _ProtocolHandler

    handler = session.client_protocol_handler
    session.client_protocol_handler = _ProtocolHandler
    try:
        yield
    finally:
        session.client_protocol_handler = handler
