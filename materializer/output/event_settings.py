"""The `events` settings: how change events are named, shaped and encoded.

One model for the config file and the workers: the driver reads it from the config, reads
its secrets once (`resolved`), and ships that copy to every Python worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from materializer.output.avro_wire import RegistryAccess
from materializer.output.values import DECIMAL, MAPS, STRUCTS, VARINT, ValueModes
from shared import topic_names
from shared.config import read_secret

STATIC_ONLY_MODES = ("emit", "skip")
STATIC_ONLY_EMIT = STATIC_ONLY_MODES[0]
FORMATS = ("json", "avro")
DELIVERIES = ("exactly-once", "at-least-once")
EXACTLY_ONCE = DELIVERIES[0]
CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
# The segment.index.bytes of an event topic the job creates: 1 MiB, not Kafka's 10 MiB. A
# broker makes each new segment's offset and time indexes that size, sparse, and maps them;
# the first writes to a thousand new topics' partitions then faulted those files in, and
# the kernel zero-filled what it read ahead of each fault: a broker's request thread spent
# 95 % of its time in that (perf, bench_many_tables at 1,000 tables), and the first
# micro-batch took 47 s at-least-once, 30 s exactly-once, against 11.5 s and 14.2 s with
# 1 MiB (docs/benchmarks.md "Many tables"). A segment of these topics may then roll from
# about 340 MiB on (its time index full: 12-byte entries, at most one per 4 KiB written)
# instead of at 1 GiB.
SEGMENT_INDEX_BYTES = 1024 * 1024


@dataclass
class SchemaRegistrySettings:
    """The door to events.schema_registry_url: the CA of an https registry, HTTP Basic."""

    ca_file: Path | None = None  # PEM CA of the registry's certificate; unset: the system's
    username: str | None = None  # HTTP Basic user (Confluent Cloud: the API key)
    # better: CASSCADE_EVENTS__SCHEMA_REGISTRY__PASSWORD ... (never in a repr: a resolved
    # copy holds it in clear)
    password: str | None = field(default=None, repr=False)
    password_file: Path | None = None  # ... or a file whose first line it is (read at start)

    def access(self) -> RegistryAccess:
        """The resolved access (the password read now, on the driver)."""
        return RegistryAccess(None if self.ca_file is None else str(self.ca_file),
                              self.username,
                              read_secret(self.password, self.password_file,
                                          "events.schema_registry.password"))


@dataclass
class EventSettings:
    """Shape of the change events."""

    cluster: str = "casscade"  # source.name
    # exactly-once: each task writes its raw partition's events and store changes in one
    # Kafka transaction (consumers read with isolation.level=read_committed); at-least-once:
    # through Spark's Kafka sink, and a micro-batch run again after a fault writes its
    # events again
    delivery: str = EXACTLY_ONCE
    # exactly-once: how long the broker lets a raw partition's transaction stay open before
    # it aborts it. A transaction opens at the partition's first write in the merge (after
    # the task read its input and opened its stores) and commits at the task's end, so this
    # bounds a task's merge, not its input. An attempt that died holds back read_committed
    # readers of the partitions it wrote this long at most, unless the next attempt comes
    # first. Must be within the brokers' transaction.max.timeout.ms (15 min by default):
    # checked at start.
    transaction_timeout_s: float = 300.0
    schemas: bool = False  # JsonConverter schemas.enable envelope
    tombstones: bool = True  # null-valued record after each d (for log compaction)
    dead_letter_topic: str | None = None  # default <prefix>.materializer.dead-letter
    # of each event topic the job creates: 1, as Kafka's own num.partitions, because every
    # event partition a transaction writes costs the broker a produce request (librdkafka
    # sends one per partition) and a marker; a busy table gets more in table_partitions
    partitions: int = 1
    # a table's own count for its event topic ("keyspace.table": count), else `partitions`
    table_partitions: dict[str, int] = field(default_factory=dict)
    replication_factor: int = 1
    # the event topics' cleanup.policy when the job creates them (None: the broker's
    # default): compact keeps each key's last event, a mirror; delete; or compact,delete
    cleanup_policy: str | None = None
    # their retention.ms when the job creates them (None: the broker's default; -1: forever)
    retention_ms: int | None = None
    # their segment.index.bytes when the job creates them (None: the broker's default,
    # 10 MiB): SEGMENT_INDEX_BYTES says why less
    segment_index_bytes: int | None = SEGMENT_INDEX_BYTES
    format: str = "json"  # json, or avro (materializer.output.avro_writer)
    # avro: register schemas here and use the Confluent wire format; unset: Avro
    # single-object encoding, schemas on avro_schema_topic (default <prefix>.avro-schemas)
    schema_registry_url: str | None = None
    schema_registry: SchemaRegistrySettings = field(default_factory=SchemaRegistrySettings)
    avro_schema_topic: str | None = None
    # string: exact decimal text (the default: varints may exceed 64 bits); long: int64 as
    # Debezium's Cassandra connector (a value beyond 64 bits goes to the dead-letter topic)
    varint_mode: str = VARINT
    # precise: exact, Debezium's VariableScaleDecimal struct {scale, value} (a table the
    # JDBC sink creates gets double precision for it); string: plain decimal text; double:
    # float64 (inexact beyond ~16 digits)
    decimal_mode: str = DECIMAL
    # struct: a tuple or UDT is a Connect struct (named); json: its JSON text under
    # io.debezium.data.Json (Debezium's JDBC sink has no column type for a struct; it writes
    # this as json)
    struct_mode: str = STRUCTS
    # map: a Connect map; json: its JSON text under io.debezium.data.Json (Debezium's JDBC
    # sink writes a map as PostgreSQL hstore: text only, and it failed on random text)
    map_mode: str = MAPS
    # emit: a partition with static values and no rows is a row with null clustering
    # columns, as SELECT shows it; skip: no events for such rows (a relational sink makes
    # the clustering columns part of a NOT NULL primary key)
    static_only_rows: str = STATIC_ONLY_EMIT

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """A ValueError naming the first setting that holds no allowed value."""
        if self.format not in FORMATS:
            raise ValueError(f"events.format must be one of {', '.join(FORMATS)}, "
                             f"not {self.format!r}")
        if self.delivery not in DELIVERIES:
            raise ValueError(f"events.delivery must be one of {', '.join(DELIVERIES)}, "
                             f"not {self.delivery!r}")
        if not 1 <= self.transaction_timeout_s <= 24 * 3600:
            raise ValueError(f"events.transaction_timeout_s must be from 1 s to a day, not "
                             f"{self.transaction_timeout_s}")
        if self.cleanup_policy is not None and self.cleanup_policy not in CLEANUP_POLICIES:
            raise ValueError(f"events.cleanup_policy must be one of "
                             f"{', '.join(CLEANUP_POLICIES)} (or unset), not "
                             f"{self.cleanup_policy!r}")
        if self.retention_ms is not None and self.retention_ms < -1:
            raise ValueError(f"events.retention_ms must be -1 (forever), 0 or more, not "
                             f"{self.retention_ms}")
        if self.segment_index_bytes is not None and self.segment_index_bytes < 4096:
            raise ValueError(f"events.segment_index_bytes must be at least 4096 (or null: "
                             f"the broker's default), not {self.segment_index_bytes}")
        for name, count in {"(every table)": self.partitions, **self.table_partitions}.items():
            if name != "(every table)" and name.count(".") != 1:
                raise ValueError(f"events.table_partitions: {name!r} is not keyspace.table")
            if not isinstance(count, int) or count < 1:
                raise ValueError(f"events partitions of {name}: at least 1, not {count!r}")
        if self.static_only_rows not in STATIC_ONLY_MODES:
            raise ValueError(f"events.static_only_rows must be one of "
                             f"{', '.join(STATIC_ONLY_MODES)}, not {self.static_only_rows!r}")
        _ = self.modes  # ValueModes names a bad mode

    @property
    def exactly_once(self) -> bool:
        """Whether events are delivered exactly once (in transactions)."""
        return self.delivery == EXACTLY_ONCE

    @property
    def modes(self) -> ValueModes:
        """The varint, decimal, struct and map forms (materializer.output.values)."""
        return ValueModes(self.varint_mode, self.decimal_mode, self.struct_mode,
                          self.map_mode)

    def resolved(self) -> EventSettings:
        """A copy to ship to the workers: checked, the registry's password read now (on
        the driver; a worker's host may not have its file)."""
        self.check()
        registry = self.schema_registry
        if self.schema_registry_url and registry.password_file is not None:
            registry = replace(registry, password=registry.access().password,
                               password_file=None)
        return replace(self, schema_registry=registry)

    def topic_config(self) -> dict[str, str]:
        """The settings the job gives an event topic it creates."""
        config = self.consumer_visible_config()
        if self.segment_index_bytes is not None:
            config["segment.index.bytes"] = str(self.segment_index_bytes)
        return config

    def consumer_visible_config(self) -> dict[str, str]:
        """The part of `topic_config` that changes what a consumer can read (an existing
        topic that differs is reported; the index's preallocation is not: every topic made
        before its default would be)."""
        config = {}
        if self.cleanup_policy is not None:
            config["cleanup.policy"] = self.cleanup_policy
        if self.retention_ms is not None:
            config["retention.ms"] = str(self.retention_ms)
        return config

    def topic_partitions(self, prefix: str) -> dict[str, int]:
        """The event topics (under `prefix`) with a partition count of their own."""
        return {topic_names.event_topic(prefix, *name.split(".", 1)): count
                for name, count in self.table_partitions.items()}

    def dead_letters(self, prefix: str) -> str:
        """The dead-letter topic under topic prefix `prefix`."""
        return self.dead_letter_topic or topic_names.dead_letter_topic(prefix)

    def avro_schemas(self, prefix: str) -> str:
        """The topic Avro schemas go to when no registry is configured."""
        return self.avro_schema_topic or topic_names.avro_schema_topic(prefix)
