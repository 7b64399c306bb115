"""A single-node KRaft Kafka broker on loopback, run from Maven Central jars."""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from pathlib import Path

from devstack import artifacts, secure
from devstack.process import StackError, pid_alive, read_pid, spawn, stop, tail
from devstack.settings import HOST, StackSettings

JVM_OPTS = [
    # Kafka's own defaults from kafka-run-class.sh, with a small heap for a 2-core box.
    "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
]


def server_properties(s: StackSettings) -> str:
    """The broker+controller config for one loopback node (locked: devstack.secure)."""
    return f"""# written by casscade's local stack; regenerated on every `stack up`
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@{HOST}:{s.kafka_controller_port}
{secure.listener_properties(s) if s.secure else _plain_listeners(s)}log.dirs={s.kafka_dir / "data"}
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# casscade creates its topics explicitly, with the partitions it wants
auto.create.topics.enable=false
# a deleted topic's files go a second after it, not a minute (Kafka's default): the
# benchmarks delete a run's thousand topics and wait for their files to go before the next
log.segment.delete.delay.ms=1000
"""


def _plain_listeners(s: StackSettings) -> str:
    return f"""listeners=PLAINTEXT://{HOST}:{s.kafka_port},CONTROLLER://{HOST}:{s.kafka_controller_port}
advertised.listeners=PLAINTEXT://{HOST}:{s.kafka_port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
"""


def admin_config(s: StackSettings) -> dict[str, str]:
    """librdkafka settings of the stack's operator (the admin user on a locked stack)."""
    if s.secure:
        return secure.client_config(s, secure.ADMIN)
    return {"bootstrap.servers": s.bootstrap_servers}


def pid_file(s: StackSettings) -> Path:
    """The broker's pid file."""
    return s.kafka_dir / "kafka.pid"


def log_file(s: StackSettings) -> Path:
    """The broker's combined stdout/stderr log."""
    return s.kafka_dir / "logs" / "server.log"


def running_pid(s: StackSettings) -> int | None:
    """The pid of the broker this state directory started, if it is alive."""
    return read_pid(pid_file(s))


def _java_cmd(s: StackSettings, java: Path, main: str, *args: str) -> list[str]:
    lib = artifacts.lib_dir(s.lib_dir, "kafka")
    return [
        str(java), f"-Xms{s.kafka_heap}", f"-Xmx{s.kafka_heap}", *JVM_OPTS, *s.jit_options,
        f"-Dkafka.logs.dir={s.kafka_dir / 'logs'}",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-cp", f"{lib}/*", main, *args,
    ]


def start(s: StackSettings, java: Path) -> int:
    """Write the config, format the log dir on first use and start the broker."""
    conf = s.kafka_dir / "server.properties"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(server_properties(s))
    conf.chmod(0o600)  # on the locked stack it holds the admin user's password
    data = s.kafka_dir / "data"
    if not (data / "meta.properties").exists():
        cluster_id = new_cluster_id()
        fmt = subprocess.run(
            _java_cmd(s, java, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                      "-c", str(conf), *(secure.scram_args(s) if s.secure else [])),
            capture_output=True, text=True,
        )
        if fmt.returncode != 0:
            raise StackError(f"formatting the Kafka log dir {data} failed:\n"
                             + (fmt.stdout + fmt.stderr)[-2000:])
    return spawn(_java_cmd(s, java, "kafka.Kafka", str(conf)), pid_file(s), log_file(s),
                 cwd=s.kafka_dir)


def new_cluster_id() -> str:
    """A KRaft cluster id as Kafka draws them: 16 random bytes, base64url, no padding."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def wait_ready(s: StackSettings, pid: int, timeout_s: float = 90.0) -> None:
    """Block until a metadata request answers; StackError with the log tail otherwise."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(admin_config(s) | {"log_level": 0, "logger": _QuietLogger()})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            raise StackError(f"Kafka exited during start-up; last lines of {log_file(s)}:\n"
                             + tail(log_file(s)))
        try:
            md = admin.list_topics(timeout=2)
            if md.brokers:
                return
        except Exception:  # noqa: BLE001 — not ready yet; any client error means "retry"
            pass
        time.sleep(0.5)
    raise StackError(f"Kafka did not answer a metadata request on {s.bootstrap_servers} "
                     f"within {timeout_s:.0f}s; last lines of {log_file(s)}:\n"
                     + tail(log_file(s)))


def shutdown(s: StackSettings) -> bool:
    """Stop the broker this state directory started (controlled shutdown on SIGTERM)."""
    return stop(pid_file(s), timeout_s=30)


class _QuietLogger:
    """Swallows librdkafka's connection-refused chatter while the broker starts."""

    def log(self, *_args: object, **_kwargs: object) -> None:
        """Drop the message."""
