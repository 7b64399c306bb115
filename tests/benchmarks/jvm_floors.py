"""The floors under the job: the job's own Kafka source and sink around the least a query
must do per change (bench_jvm_floor describes each), started by spark_runs' RUN for a
query named after one; and the jar of jvm_floor/CopyFloor.java that "jvm-floor" needs on
the class path (BENCH_EXTRA_CP).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pyspark
from raw_workload import floor_topic

from materializer.settings import MaterializerConfig
from materializer.spark import job
from shared.topic_names import TABLE_ID_SIZE

HERE = Path(__file__).parent / "jvm_floor"
# the floors' output: what the job writes to its event topics
FLOOR_SCHEMA = "topic STRING, key BINARY, value BINARY"


def build_jar(out: Path) -> Path:
    """Compile CopyFloor.java against pyspark's jars: the jar's path."""
    classes = out / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    cp = str(Path(pyspark.__file__).parent / "jars" / "*")
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", cp,
                    str(HERE / "CopyFloor.java")], check=True, capture_output=True, text=True)
    jar = out / "copy-floor.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    return jar


def _first_copy(dbs: dict, state_dir: str, topic: str, part: int, value: bytes) -> object:
    """The rocksdict of `topic`'s Kafka partition `part` (opened on first use) if `value`
    is the first copy of its record seen there (its copy key recorded now), else None. The
    copy keys are never dropped here: a bench of a few minutes, not a window."""
    from rocksdict import Rdict

    from shared.rowupdate import DIGEST_SIZE

    db = dbs.get((topic, part))
    if db is None:
        db = dbs[(topic, part)] = Rdict(f"{state_dir}/{topic}-{part}")
    copy = b"c" + value[1:1 + 2 * DIGEST_SIZE]
    if db.get(copy) is not None:
        return None
    db[copy] = b""
    return db


def _arrow_out(rows: list[tuple[str, bytes | None, bytes | None]]) -> object:
    """(topic, key, value) rows as one Arrow batch of FLOOR_SCHEMA (typed even if empty)."""
    import pyarrow as pa

    return pa.RecordBatch.from_pydict(
        {"topic": [t for t, _, _ in rows], "key": [k for _, k, _ in rows],
         "value": [v for _, _, v in rows]},
        schema=pa.schema([("topic", pa.string()), ("key", pa.binary()),
                          ("value", pa.binary())]))


def arrow_floor(state_dir: str, prefix: str) -> Callable[[Iterator], Iterator]:
    """mapInArrow function of "arrow-floor": per Kafka partition a rocksdict holding each
    copy digest seen and each key's last value; a copy seen before is dropped, every other
    record goes out as (its key's last value + its value) to its table's floor topic
    (`floor_topic` of `prefix` and the key's table id), like CopyFloor's output."""
    def run(batches: Iterator) -> Iterator:
        dbs: dict = {}
        try:
            for batch in batches:
                cols = batch.to_pydict()
                out = []
                for topic, pk, value, part in zip(cols["topic"], cols["key"], cols["value"],
                                                  cols["partition"], strict=True):
                    db = _first_copy(dbs, state_dir, topic, part, value)
                    if db is None:
                        continue
                    last = db.get(pk) or b""
                    db[pk] = value
                    out.append((floor_topic(prefix, pk[:TABLE_ID_SIZE]), pk, last + value))
                yield _arrow_out(out)
        finally:
            for db in dbs.values():
                db.close()
    return run


def start_floor(spark: object, cfg: MaterializerConfig, api: str) -> object:
    """The job's query (job.read_raw → … → job.write_events) with CopyFloor in place of the
    partition stores ("jvm-floor"), with a mapInArrow and rocksdict ("arrow-floor"), or
    with nothing between ("kafka-floor": every raw record goes straight to its table's
    floor topic, no state of its own; "kafka-floor-one": the same into one output topic,
    <prefix>.floor.all). Every floor but kafka-floor-one writes a record to `floor_topic`
    of its key's first 16 bytes (its table id), a topic the bench must have made."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    prefix = cfg.kafka.topic_prefix
    raw = job.read_raw(spark, cfg)
    if api == "arrow-floor":
        state_dir = Path(cfg.spark.checkpoint) / "rocksdict"
        state_dir.mkdir(parents=True, exist_ok=True)
        out = raw.mapInArrow(arrow_floor(str(state_dir), prefix), FLOOR_SCHEMA)
    elif api == "kafka-floor":
        # floor_topic in Spark SQL: substring of a binary is 1-based; hex() is upper case,
        # bytes.hex() lower (floor_topic(prefix, b"") is the name up to the hex)
        table_hex = F.lower(F.hex(F.substring("key", 1, TABLE_ID_SIZE)))
        out = raw.select(F.concat(F.lit(floor_topic(prefix, b"")), table_hex).alias("topic"),
                         "key", "value")
    elif api == "kafka-floor-one":  # the same, every record into one topic: the sink's share
        out = raw.select(F.lit(f"{prefix}.floor.all").alias("topic"), "key", "value")
    elif api == "jvm-floor":
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        out = DataFrame(jvm.casscade.bench.CopyFloor.apply(raw._jdf), spark)
    else:
        raise ValueError(f"no floor query {api!r}")
    return job.write_events(out, cfg, available_now=True)
