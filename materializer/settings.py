"""The materializer's configuration model (YAML + CASSCADE_* env + --set overrides)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from materializer.output.event_settings import EventSettings
from shared.http_server import HttpSettings
from shared.kafka_security import KafkaSecurity, client_settings
from shared.logs import LogSettings


@dataclass
class KafkaSettings:
    """Where raw records come from and events go."""

    bootstrap_servers: str = "127.0.0.1:9092"
    topic_prefix: str = "casscade"  # reads <prefix>.raw, writes <prefix>.<ks>.<table>
    starting_offsets: str = "earliest"  # for a new checkpoint only
    # raw records per micro-batch at most (0: no limit); bounds memory, since a task holds
    # its records of a micro-batch together, and the time to the first events
    max_offsets_per_trigger: int = 200_000
    consumer: dict[str, str] = field(default_factory=dict)  # extra kafka.* source options
    producer: dict[str, str] = field(default_factory=dict)  # extra kafka.* sink options
    # how every Kafka client of this stage authenticates and encrypts (SASL, TLS)
    security: KafkaSecurity = field(default_factory=KafkaSecurity)
    # one job per topic prefix (materializer.kafka.job_lease): a job renews its lease every
    # sixth of this; another checkpoint's job is refused until this long after the last
    # renewal (a job that died frees the prefix then), and a job that lost it stops
    job_lease_s: float = 30.0

    def __post_init__(self) -> None:
        if self.job_lease_s < 3:
            raise ValueError(f"kafka.job_lease_s must be at least 3 s, not {self.job_lease_s}")
        if "isolation.level" in self.consumer:
            raise ValueError("kafka.consumer.isolation.level: the job reads the raw topic "
                             "read_committed always (the truncate barriers it writes there "
                             "are transactional); remove it")

    def client(self) -> dict[str, str]:
        """librdkafka settings of this stage's own clients: the brokers and the door."""
        return client_settings(self.bootstrap_servers, self.security)


# spark.driver_jit → the driver JVM's flags for it
DRIVER_JIT = {"c1": "-XX:TieredStopAtLevel=1", "tiered": ""}


@dataclass
class SparkSettings:
    """The Spark application. `master`: local[N] runs embedded; spark://HOST:PORT connects
    the driver to a standalone cluster in client mode (executors import casscade from the
    Python `spark.pyspark.python` names: a packed environment given as `spark.archives`
    in `conf`, as deploy/systemd/casscade-materializer.service does, or the venv on this
    machine for a master on loopback); "submit" (what deploy/spark/submit.sh passes)
    leaves master and driver settings to spark-submit."""

    # settings of the spark state mode (Spark's state store), which casscade no longer has
    REMOVED: ClassVar[dict[str, str]] = dict.fromkeys(
        ("state_mode", "shuffle_partitions", "state_buckets", "batched_state"),
        "the spark state mode is gone: the keys' state is in partition stores, with no "
        "shuffle (docs/operations.md \"Upgrading from the spark state mode\"); remove it")

    master: str = "local[2]"
    app_name: str = "casscade-materializer"
    # a local directory, or a Hadoop file system URI (hdfs://, s3a://, file://) on a cluster
    checkpoint: str = "/var/lib/casscade/materializer/checkpoint"
    trigger_interval_ms: int = 1000
    # replica copies whose digest and mutation id a partition store saw in the same slot
    # of this many seconds are dropped before the merge (a digest is kept for 0 s to one
    # window); a later copy merges harmlessly. 0: off. The mutation id keeps a mutation's
    # records together and carries its write time, which sets its place in a batch
    # whichever of its copies are there
    dedupe_window_s: int = 120
    # a partition of more than twice this many rows keeps them in pages of this many, so a
    # batch reads and writes only the pages it can change; may change between runs
    state_page_rows: int = 256
    # a TRUNCATE, a reset and a truncate barrier each visit every key of the table in a raw
    # partition's store (its d or r events); a task goes through at most this many such
    # keys a micro-batch and leaves the rest to the next ones, so its transaction is sized
    # by this, not by the table (events.transaction_timeout_s). 0: the whole table at once.
    # A run with --available-now goes through each table whole.
    sweep_keys: int = 50_000
    driver_memory: str = "1g"
    # the driver JVM's JIT compiler: "c1", HotSpot's first tier only
    # (-XX:TieredStopAtLevel=1): Spark's driver runs much code a few times per micro-batch,
    # and with both tiers the compiler threads took half the driver JVM's CPU through the
    # first minute of writes (docs/benchmarks.md "The driver's JIT"); "tiered": the JVM's
    # own default.
    # On a local master the driver is also the executor. Not for spark-submit's drivers; a
    # flag of the same name in spark.conf's spark.driver.extraJavaOptions comes later, and wins
    driver_jit: str = "c1"
    # The raw partitions of a micro-batch are coalesced, without a shuffle, into at
    # most this many tasks, each reading its partitions whole (each task has a fixed cost
    # of its own). 0: on a local master as many as Spark has cores; on a cluster none (a
    # coalesced task keeps only its host, so on hosts with several executors the partition
    # stores would move between them every batch). The raw topic wants a multiple of the
    # cores as partitions (docs/operations.md "State without shuffles").
    partition_tasks: int = 0
    # a query that fails on something transient (broker restart, lost executor, timeout)
    # is started again from its checkpoint after a backoff (5 s, doubling, at most 60 s);
    # this many failures without a completed micro-batch in between end the run (0: never)
    max_restarts: int = 10
    restart_backoff_s: float = 5.0
    # SIGTERM/Ctrl-C waits this long for a moment between micro-batches, then stops the
    # query anyway (the batch it cuts short runs again at the next start); a query still not
    # stopped 30 s later (Spark waiting on a broker that went away) has its driver JVM killed
    stop_timeout_s: float = 45.0
    # auto: the jars the local stack fetched into .casscade/lib (materializer.spark.
    # connector_jars; `deploy/local/stack fetch`);
    # provided: spark-submit --packages/--jars supplies it; else a comma-separated jar list
    kafka_jars: str = "auto"
    # any other spark.* setting; unset, spark.kafka.consumer.cache.capacity is the raw
    # partitions at start + 64 (Spark's Kafka source keeps a consumer per topic partition);
    # unset spark.locality.wait(.process) is 10s for the process level (a task waits that
    # long for the executor holding its store, then runs elsewhere)
    conf: dict[str, str] = field(default_factory=dict)
    # a directory for the driver JVM's class archive (AppCDS: start-up ~7 s shorter; the
    # first run writes it, ~190 MB, at its end); "" off. Not for spark-submit's drivers.
    class_archive_dir: str = ""

    def __post_init__(self) -> None:
        if self.sweep_keys < 0:
            raise ValueError(f"spark.sweep_keys {self.sweep_keys}: 0 (no bound) or more")
        if self.driver_jit not in DRIVER_JIT:
            raise ValueError(f"spark.driver_jit {self.driver_jit!r}: one of "
                             + ", ".join(DRIVER_JIT))
        if "://" not in str(self.checkpoint):  # a URI keeps its "//"; a path is tidied
            self.checkpoint = str(Path(self.checkpoint).expanduser())
        if str(self.conf.get("spark.speculation", "false")).strip().lower() != "false":
            raise ValueError(
                "spark.conf spark.speculation: the job runs without it (a speculative "
                "attempt of a task would be a second writer of its partition's store and "
                "changelog; under at-least-once nothing fences it): remove the setting")


@dataclass
class MaterializerConfig:
    """Everything `casscade materializer run` needs."""

    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    events: EventSettings = field(default_factory=EventSettings)
    log: LogSettings = field(default_factory=LogSettings)
    # the driver's /metrics, /health, /status; 8001 so it can share a host with an agent
    http: HttpSettings = field(default_factory=lambda: HttpSettings(port=8001))
