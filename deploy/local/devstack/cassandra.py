"""A Cassandra node with CDC on loopback (127.0.0.n), run from Maven Central jars; nodetool.

Every function takes the settings of one node (`StackSettings.node(n)`); node 1 is the seed.
The line it runs (4.0 or 4.1 on Java 11, 5.0 on Java 17) is `StackSettings.cassandra_version`;
devstack.cassandra_versions holds what differs between them.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from devstack import artifacts, cassandra_versions, secure
from devstack.process import StackError, pid_alive, read_pid, spawn, stop, tail
from devstack.process import kill as kill_pid
from devstack.settings import HOST, StackSettings, repo_root
from shared.cql import make_cluster

if TYPE_CHECKING:
    from cassandra.cluster import Cluster

# jvm11- and jvm17-server.options use these G1 settings alike
_SERVER_GC = [
    "-XX:+UseG1GC", "-XX:+ParallelRefProcEnabled", "-XX:MaxTenuringThreshold=1",
    "-XX:G1HeapRegionSize=16m", "-XX:G1RSetUpdatingPauseTimePercent=5",
    "-XX:MaxGCPauseMillis=300", "-XX:InitiatingHeapOccupancyPercent=70",
    # two cores: keep the JVM's own thread pools small
    "-XX:ParallelGCThreads=2", "-XX:ConcGCThreads=1", "-XX:CICompilerCount=2",
]


def pid_file(s: StackSettings) -> Path:
    """The node's pid file."""
    return s.cassandra_dir / "cassandra.pid"


def log_file(s: StackSettings) -> Path:
    """Cassandra's own system.log (INFO and above)."""
    return s.cassandra_dir / "logs" / "system.log"


def stdout_file(s: StackSettings) -> Path:
    """The node's stdout/stderr (WARN and above, plus JVM errors)."""
    return s.cassandra_dir / "logs" / "stdout.log"


def running_pid(s: StackSettings) -> int | None:
    """The pid of the node this state directory started, if it is alive."""
    return read_pid(pid_file(s))


def version_file(s: StackSettings) -> Path:
    """Which Cassandra line last started this node: its data is that line's."""
    return s.cassandra_dir / "cassandra-version"


def recorded_version(s: StackSettings) -> str | None:
    """The line this node's state belongs to: its version file, else 5.0 if it holds data
    (the only line before the file existed), else None (a fresh node)."""
    if version_file(s).exists():
        return version_file(s).read_text().strip()
    return "5.0" if (s.cassandra_dir / "data" / "system").exists() else None


def check_version(s: StackSettings) -> None:
    """StackError when the node's state was written by another line than it is to run now:
    an older line cannot read a newer one's files, and an upgrade is not what a dev stack
    should do by accident."""
    recorded = recorded_version(s)
    if recorded is not None and recorded != s.cassandra_version:
        raise StackError(
            f"node {s.node_index} ({s.cassandra_dir}) holds Cassandra {recorded}'s data, not "
            f"{s.cassandra_version}'s: run it with --cassandra {recorded} (or "
            f"{cassandra_versions.ENV_VAR}={recorded}), or remove that directory first")


def render_yaml(s: StackSettings) -> str:
    """cassandra.yaml for this node, from deploy/local/conf/cassandra.yaml.in (written with
    5.0's names) in the dialect of the node's line."""
    template = Template((repo_root() / "deploy" / "local" / "conf" / "cassandra.yaml.in")
                        .read_text())
    return cassandra_versions.adapt_yaml(_fill(template, s), s.cassandra_line)


def _fill(template: Template, s: StackSettings) -> str:
    return template.substitute(
        cluster_name=s.cluster_name, storage_port=s.storage_port, cql_port=s.cql_port,
        address=s.host, seed=s.seed, auto_bootstrap=str(s.bootstraps).lower(),
        node_dir=s.cassandra_dir, cdc_total_space=s.cdc_total_space,
        cdc_on_repair_enabled=str(s.cdc_on_repair_enabled).lower(),
        commitlog_sync_period=s.commitlog_sync_period,
        commitlog_segment_size=s.commitlog_segment_size,
        storage_compatibility_mode=s.storage_compatibility_mode,
        commitlog_compression=(
            f"commitlog_compression:\n  - class_name: {s.commitlog_compression}"
            if s.commitlog_compression else "# commitlog_compression: none"),
        security=secure.cassandra_yaml(s) if s.secure else "# open: no authentication",
    )


def _lib(s: StackSettings) -> Path:
    return artifacts.lib_dir(s.lib_dir, s.cassandra_line.component)


def server_java(s: StackSettings) -> Path:
    """The `java` the node's line runs on: the fetched Java 11 (4.x) or Java 17 (5.0)."""
    if s.cassandra_line.java == 11:
        return artifacts.java11(s.lib_dir)
    return artifacts.find_java()


def _jamm(s: StackSettings) -> Path:
    jars = sorted(_lib(s).glob("jamm-*.jar"))
    if not jars:
        raise StackError(f"no jamm jar in {_lib(s)}; run `deploy/local/stack fetch` again")
    return jars[-1]


def server_command(s: StackSettings, java: Path) -> list[str]:
    """The java command line of the node (what bin/cassandra -f would run)."""
    conf = s.cassandra_dir / "conf"
    return [
        str(java), "-ea", "-da:net.openhft...", f"-Xms{s.cassandra_heap}",
        f"-Xmx{s.cassandra_heap}", "-Xss256k", *_SERVER_GC, *s.jit_options,
        *s.cassandra_line.jpms,
        "-Djdk.attach.allowAttachSelf=true",
        "-Dio.netty.tryReflectionSetAccessible=true",
        "-Dio.netty.allocator.useCacheForAllThreads=true",
        "-Dio.netty.allocator.maxOrder=11",
        "-XX:+UseThreadPriorities", "-XX:+HeapDumpOnOutOfMemoryError",
        f"-XX:HeapDumpPath={s.cassandra_dir / 'logs'}", "-XX:+PerfDisableSharedMem",
        "-Djava.net.preferIPv4Stack=true", "-Dchronicle.analytics.disable=true",
        f"-javaagent:{_jamm(s)}",
        "-Dcassandra-foreground=yes",
        f"-Dcassandra.config=file://{conf / 'cassandra.yaml'}",
        f"-Dcassandra.storagedir={s.cassandra_dir}",
        f"-Dcassandra.logdir={s.cassandra_dir / 'logs'}",
        f"-Dlogback.configurationFile={conf / 'logback.xml'}",
        f"-Dcassandra.jmx.local.port={s.node_jmx_port}",
        "-Dcassandra.skip_wait_for_gossip_to_settle=0",
        *_topology_flags(s),
        # a locked node makes its default superuser at once, not 10 s after start
        *(["-Dcassandra.superuser_setup_delay_ms=0"] if s.secure else []),
        "-cp", f"{conf}:{_lib(s)}/*", "org.apache.cassandra.service.CassandraDaemon",
    ]


def _topology_flags(s: StackSettings) -> list[str]:
    """The JVM properties of a node that replaces another or has a ring delay of its own
    (the same names in 4.0, 4.1 and 5.0)."""
    flags = []
    if s.replace_address is not None:
        flags.append(f"-Dcassandra.replace_address_first_boot={s.replace_address}")
    if s.ring_delay_ms is not None:
        flags.append(f"-Dcassandra.ring_delay_ms={s.ring_delay_ms}")
    return flags


def nodetool_command(s: StackSettings, java: Path, *args: str) -> list[str]:
    """The java command line of `nodetool -h 127.0.0.1 -p <node's jmx> ARGS`, on Java 17
    whatever the line (cassandra_versions.NODETOOL_JAVA says why)."""
    conf = s.cassandra_dir / "conf"
    return [
        str(java), "-ea", "-Xmx128m", "-XX:ParallelGCThreads=1", "-XX:+UseSerialGC",
        *s.jit_options,
        "-Djdk.attach.allowAttachSelf=true", *cassandra_versions.JPMS_JAVA17_SERVER,
        *cassandra_versions.JPMS_JAVA17_CLIENT_EXTRA,
        f"-javaagent:{_jamm(s)}",
        f"-Dcassandra.storagedir={s.cassandra_dir}",
        f"-Dlogback.configurationFile={conf / 'logback-tools.xml'}",
        "-cp", f"{conf}:{_lib(s)}/*", "org.apache.cassandra.tools.NodeTool",
        "-h", HOST, "-p", str(s.node_jmx_port), *args,
    ]


# What a node keeps of its own beside conf/ and logs/: what a new machine's disks lack
STATE_DIRS = ("data", "commitlog", "cdc_raw", "hints", "saved_caches")


def write_config(s: StackSettings) -> None:
    """Create the node's directories and (re)write its cassandra.yaml and logback files."""
    conf = s.cassandra_dir / "conf"
    for sub in ("conf", *STATE_DIRS, "logs"):
        (s.cassandra_dir / sub).mkdir(parents=True, exist_ok=True)
    (conf / "cassandra.yaml").write_text(render_yaml(s))
    src = repo_root() / "deploy" / "local" / "conf"
    for name in ("logback.xml", "logback-tools.xml"):
        shutil.copyfile(src / name, conf / name)


def start(s: StackSettings, java: Path) -> int:
    """Write the config and start the node in the background (`java`: server_java's)."""
    check_version(s)
    write_config(s)
    version_file(s).write_text(s.cassandra_version + "\n")
    return spawn(server_command(s, java), pid_file(s), stdout_file(s), cwd=s.cassandra_dir)


def wipe(s: StackSettings) -> None:
    """Empty a stopped node's data, commit log, cdc_raw, hints and caches, as on a new
    machine (its logs stay); StackError while it runs."""
    if running_pid(s) is not None:
        raise StackError(f"node {s.node_index} runs: stop it before its data goes")
    for sub in STATE_DIRS:
        shutil.rmtree(s.cassandra_dir / sub, ignore_errors=True)
    version_file(s).unlink(missing_ok=True)


def wait_ready(s: StackSettings, pid: int, timeout_s: float = 180.0) -> str:
    """Block until CQL answers `SELECT release_version`; returns the version."""
    deadline = time.monotonic() + timeout_s
    last_error = "no attempt"
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            raise StackError(
                f"Cassandra exited during start-up; last lines of {stdout_file(s)}:\n"
                + tail(stdout_file(s)) + f"\n--- {log_file(s)}:\n" + tail(log_file(s), 20))
        try:
            return release_version(s)
        except Exception as exc:  # noqa: BLE001 — not ready yet; keep polling
            last_error = str(exc)
        time.sleep(1.0)
    raise StackError(f"Cassandra did not answer CQL on {s.host}:{s.cql_port} within "
                     f"{timeout_s:.0f}s ({last_error}); last lines of {log_file(s)}:\n"
                     + tail(log_file(s)))


def cql_cluster(s: StackSettings, **options: Any) -> Cluster:
    """A cassandra-driver Cluster with this node as contact point (it finds the others); on
    a locked stack as its superuser, over TLS."""
    if s.secure:
        user, password = secure.cassandra_login(s)
        return make_cluster([s.host], s.cql_port, user, password,
                            ssl_context=secure.cassandra_tls(s), **options)
    return make_cluster([s.host], s.cql_port, **options)


def release_version(s: StackSettings) -> str:
    """Ask the node for its release version over CQL (raises if it does not answer)."""
    # pinned: in a ring, the answer must come from this node, not whichever is up
    cluster = cql_cluster(s, connect_timeout=2, control_connection_timeout=2, pinned=True)
    try:
        session = cluster.connect()
        row = session.execute("SELECT release_version FROM system.local", timeout=5).one()
        return str(row.release_version)
    finally:
        cluster.shutdown()


def nodetool(s: StackSettings, *args: str, timeout_s: float = 120.0) -> str:
    """Run nodetool against this node; returns its stdout, StackError on failure."""
    java = artifacts.find_java()  # 17 for every line: see cassandra_versions.NODETOOL_JAVA
    done = subprocess.run(nodetool_command(s, java, *args), capture_output=True, text=True,
                          timeout=timeout_s)
    if done.returncode != 0:
        raise StackError(f"nodetool {' '.join(args)} failed ({done.returncode}):\n"
                         + (done.stdout + done.stderr)[-2000:])
    return done.stdout


def ring_states(s: StackSettings) -> dict[str, str]:
    """Address → two-letter state (UN, DN, UJ, ...) of every node `nodetool status` lists."""
    return parse_ring_states(nodetool(s, "status", timeout_s=60))


def _node_lines(status_output: str) -> Iterator[tuple[list[str], str]]:
    """The node lines of `nodetool status` output (state, address, ...): split, and whole."""
    for line in status_output.splitlines():
        parts = line.split()
        if len(parts) > 2 and len(parts[0]) == 2 and parts[0][0] in "UD":
            yield parts, line


def parse_ring_states(status_output: str) -> dict[str, str]:
    """The address → state lines of `nodetool status` output."""
    return {parts[1]: parts[0] for parts, _line in _node_lines(status_output)}


_HOST_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def parse_host_ids(status_output: str) -> dict[str, str]:
    """The address → host ID of every node `nodetool status` output lists (what
    `nodetool removenode` takes)."""
    return {parts[1]: found.group(0) for parts, line in _node_lines(status_output)
            if (found := _HOST_ID.search(line))}


def kill(s: StackSettings) -> bool:
    """SIGKILL the node (a crash: no drain, no flush); True when it was running."""
    return kill_pid(pid_file(s))


def shutdown(s: StackSettings, drain: bool = True) -> bool:
    """Stop the node this state directory started; `drain` flushes memtables first."""
    pid = running_pid(s)
    if pid is None:
        pid_file(s).unlink(missing_ok=True)
        return False
    if drain:
        # SIGTERM's shutdown hook still runs if drain fails; drain only makes it cleaner.
        with contextlib.suppress(StackError, subprocess.TimeoutExpired, OSError):
            nodetool(s, "drain", timeout_s=60)
    return stop(pid_file(s), timeout_s=45)
