"""The publisher's configuration model (YAML + CASSCADE_* env + --set overrides)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.capture import CaptureSettings
from shared.config import read_secret
from shared.cql import tls_context
from shared.http_server import HttpSettings
from shared.kafka_security import KafkaSecurity, client_settings
from shared.logs import LogSettings


@dataclass
class KafkaSettings:
    """Where records go."""

    bootstrap_servers: str = "127.0.0.1:9092"
    topic_prefix: str = "casscade"
    partitions: int = 6  # of the raw topic <prefix>.raw, if the agent creates it
    replication_factor: int = 1
    producer: dict[str, str] = field(default_factory=dict)  # extra librdkafka settings
    # a heartbeat record (host, read position, clock) to every partition of every raw topic
    # under the prefix at this interval: tells a quiet node from a dead one, and moves the
    # materializer's partitions that get no writes (TTL expiry). 0: none
    heartbeat_interval_s: float = 5.0
    # how every Kafka client of this stage authenticates and encrypts (SASL, TLS)
    security: KafkaSecurity = field(default_factory=KafkaSecurity)

    def client(self) -> dict[str, str]:
        """librdkafka settings of this stage's own clients: the brokers and the door."""
        return client_settings(self.bootstrap_servers, self.security)


@dataclass
class CassandraSettings:
    """Where schemas come from: system_schema over CQL, or a schema file (offline)."""

    contact_points: list[str] = field(default_factory=lambda: ["127.0.0.1"])
    port: int = 9042
    username: str | None = None
    password: str | None = None  # better: CASSCADE_CASSANDRA__PASSWORD, or password_file
    password_file: Path | None = None  # its first line is the password (read at start)
    schema_file: Path | None = None
    # client TLS (the node's client_encryption_options): on with `ssl`; the CA to trust
    # (unset: the system's), an optional client certificate and key (PEM), hostname check
    ssl: bool = False
    ssl_ca_file: Path | None = None
    ssl_cert_file: Path | None = None
    ssl_key_file: Path | None = None
    ssl_check_hostname: bool = True

    def tls(self) -> Any:
        """The ssl.SSLContext these settings describe, or None without `ssl`."""
        if not self.ssl:
            return None
        return tls_context(self.ssl_ca_file, self.ssl_cert_file, self.ssl_key_file,
                           self.ssl_check_hostname, "cassandra")

    def resolved_password(self) -> str | None:
        """The password: `password`, else the first line of `password_file`."""
        return read_secret(self.password, self.password_file, "cassandra.password")


@dataclass
class CdcSettings:
    """The node's CDC directory and what to do with finished segments."""

    cdc_raw: Path = Path("/var/lib/cassandra/cdc_raw")
    archive_dir: Path | None = None  # move finished segments here instead of deleting
    poll_interval_ms: int = 100
    total_space_mb: int = 4096  # the node's cdc_total_space, for the usage gauge
    # an older segment without _cdc.idx counts as complete after it is unchanged this long
    unindexed_grace_s: int = 60
    unknown_retry_s: int = 30  # how often to retry mutations of unknown tables
    # how often the schema is read again while the agent has nothing to read (a table dropped
    # by a statement whose commit log segment never reached cdc_raw is found this way)
    schema_refresh_s: int = 30
    # how often the node's truncation records (system.local) are read: a TRUNCATE of a CDC
    # table reaches the materializer within about this long (0: never read them)
    truncation_check_s: float = 5


@dataclass
class NodeSettings:
    """Identity written into every record's source."""

    host: str = field(default_factory=socket.gethostname)
    datacenter: str = "datacenter1"


@dataclass
class StateSettings:
    """The agent's own durable state (acknowledged positions)."""

    path: Path = Path("/var/lib/casscade/publisher")
    flush_interval_ms: int = 1000


@dataclass
class PublisherConfig:
    """Everything `casscade publisher run` needs."""

    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    cassandra: CassandraSettings = field(default_factory=CassandraSettings)
    # which tables and columns are published, which values masked (shared.capture)
    capture: CaptureSettings = field(default_factory=CaptureSettings)
    cdc: CdcSettings = field(default_factory=CdcSettings)
    node: NodeSettings = field(default_factory=NodeSettings)
    state: StateSettings = field(default_factory=StateSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    log: LogSettings = field(default_factory=LogSettings)
