"""A Kafka Connect worker on loopback (standalone mode, REST on 127.0.0.1:8083) with
Debezium's JDBC sink and Apicurio's converters on its plugin path, run from Maven Central
jars like the broker."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from devstack import artifacts, kafka, secure
from devstack.process import StackError, pid_alive, read_pid, spawn, stop, tail
from devstack.settings import HOST, StackSettings, repo_root

WORKER = "connect"
# Each folder under <lib>/connect-plugins is one plugin, loaded in its own class loader.
PLUGINS = ("connect-plugins/debezium-jdbc", "connect-plugins/apicurio-converter")
JDBC_SINK = "io.debezium.connector.jdbc.JdbcSinkConnector"


def plugin_path(s: StackSettings) -> Path:
    """The worker's plugin.path: one folder per plugin."""
    return s.lib_dir / "connect-plugins"


def pid_file(s: StackSettings) -> Path:
    """The worker's pid file."""
    return s.connect_dir / "connect.pid"


def log_file(s: StackSettings) -> Path:
    """The worker's combined stdout/stderr log."""
    return s.connect_dir / "logs" / "connect.log"


def rest_url(s: StackSettings) -> str:
    """The worker's REST API."""
    return f"http://{HOST}:{s.connect_port}"


def worker_properties(s: StackSettings) -> str:
    """The standalone worker's config. Converters: JSON with schemas, which is what
    casscade's events are with `events.schemas: true`; a connector may set its own."""
    return f"""# written by casscade's local stack; regenerated on every `stack connect up`
bootstrap.servers={s.bootstrap_servers}
listeners=http://{HOST}:{s.connect_port}
rest.advertised.host.name={HOST}
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
offset.storage.file.filename={s.connect_dir / "offsets"}
offset.flush.interval.ms=5000
plugin.path={plugin_path(s)}
plugin.discovery=hybrid_warn
{_locked(s) if s.secure else ""}"""


def _locked(s: StackSettings) -> str:
    """On the locked stack: the worker and its tasks' clients log in as `connect`."""
    door = secure.java_client_config(s, "connect")
    lines = [f"{prefix}{key}={value}" for prefix in ("", "consumer.", "producer.", "admin.")
             for key, value in door.items()]
    return "# the locked stack: SASL_SSL as the connect user\n" + "\n".join(lines) + "\n"


def fetch(s: StackSettings, log=print) -> None:
    """Resolve the worker's and the plugins' jars (cached in ~/.m2)."""
    for component in (WORKER, *PLUGINS):
        artifacts.fetch(s.lib_dir, component, log)


def running_pid(s: StackSettings) -> int | None:
    """The pid of the worker this state directory started, if it is alive."""
    return read_pid(pid_file(s))


def up(s: StackSettings, log=print, timeout_s: float = 120.0) -> bool:
    """Start the worker unless it runs (Kafka must be up) and wait until its REST API lists
    the JDBC sink; False when it ran already."""
    if running_pid(s) is not None:
        return False
    if kafka.running_pid(s) is None:
        raise StackError(f"Kafka Connect needs the broker on {s.bootstrap_servers}: run "
                         "`stack up` first")
    java = artifacts.find_java()
    fetch(s, log)
    conf = s.connect_dir / "worker.properties"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(worker_properties(s))
    conf.chmod(0o600)  # on the locked stack it holds the connect user's password
    lib = artifacts.lib_dir(s.lib_dir, WORKER)
    pid = spawn([str(java), f"-Xms{s.connect_heap}", f"-Xmx{s.connect_heap}",
                 *kafka.JVM_OPTS, *s.jit_options, "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                 "-Dorg.slf4j.simpleLogger.showDateTime=true",
                 # Hibernate (inside the sink) is chatty at info
                 "-Dorg.slf4j.simpleLogger.log.org.hibernate=warn",
                 "-cp", f"{lib}/*", "org.apache.kafka.connect.cli.ConnectStandalone",
                 str(conf)], pid_file(s), log_file(s), cwd=s.connect_dir)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            raise StackError(f"Kafka Connect exited during start-up; last lines of "
                             f"{log_file(s)}:\n{tail(log_file(s))}")
        try:
            plugins = request(s, "GET", "/connector-plugins")
            if any(p.get("class") == JDBC_SINK for p in plugins):
                return True
        except (OSError, StackError):
            pass  # not listening yet
        time.sleep(1.0)
    last = tail(log_file(s))
    down(s)  # a worker that never got ready is not left running
    raise StackError(f"Kafka Connect did not list {JDBC_SINK} on {rest_url(s)} within "
                     f"{timeout_s:.0f}s (stopped again); last lines of {log_file(s)}:\n{last}")


def down(s: StackSettings) -> bool:
    """Stop the worker (it commits its sinks' offsets on SIGTERM)."""
    return stop(pid_file(s), timeout_s=30)


def request(s: StackSettings, method: str, path: str, body: Any = None) -> Any:
    """One call to the worker's REST API; the decoded JSON answer (None when empty).
    StackError with the worker's message on an HTTP error."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(rest_url(s) + path, data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:1000]
        raise StackError(f"Kafka Connect {method} {path}: HTTP {exc.code} {detail}") from exc
    return json.loads(raw) if raw else None


SINK_CONFIG = "deploy/connect/jdbc-sink-postgres.json"
AVRO_CONVERTERS = "deploy/connect/avro-apicurio-converters.json"


def sink_config(s: StackSettings, prefix: str, keyspace: str,
                avro: bool = False) -> dict[str, str]:
    """deploy/connect/jdbc-sink-postgres.json for the event topics <prefix>.<keyspace>.*,
    writing into the stack's PostgreSQL; `avro`: with the converters of
    deploy/connect/avro-apicurio-converters.json reading through the stack's registry."""
    from devstack import postgres, registry

    config = json.loads((repo_root() / SINK_CONFIG).read_text())
    if avro:
        converters = json.loads((repo_root() / AVRO_CONVERTERS).read_text())
        config |= {k: registry.api_url(s) if k.endswith(".apicurio.registry.url") else v
                   for k, v in converters.items()}
    return config | {"topics.regex": rf"{re.escape(prefix)}\.{re.escape(keyspace)}\..*",
                     "connection.url": postgres.jdbc_url(s),
                     "connection.username": postgres.USER}


def put_connector(s: StackSettings, name: str, config: dict[str, str]) -> Any:
    """Create or update connector `name` with `config`."""
    return request(s, "PUT", f"/connectors/{name}/config", config)


def delete_connector(s: StackSettings, name: str) -> None:
    """Remove connector `name` (its committed offsets stay in Kafka)."""
    request(s, "DELETE", f"/connectors/{name}")


def connector_status(s: StackSettings, name: str) -> dict[str, Any]:
    """The connector's and its tasks' states (RUNNING, FAILED with a trace, ...)."""
    return request(s, "GET", f"/connectors/{name}/status")
