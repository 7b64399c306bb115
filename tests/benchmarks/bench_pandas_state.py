"""The pandas APIs over the same KeyHandler, for the benchmarks only: applyInPandasWithState
(one group per key) and transformWithStateInPandas (the job's key buckets and state, columnar
input instead of Row objects)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from materializer.handler import KeyHandler, RawRecord
from materializer.settings import MaterializerConfig
from materializer.spark.job import event_settings, raw_topic_pattern, read_raw, write_events
from materializer.spark.processor import (
    OUTPUT_SCHEMA,
    MaterializeProcessor,
    _cache,
    _topics,
    bucket_column,
)


class PandasProcessor(MaterializeProcessor):
    """MaterializeProcessor on transformWithStateInPandas: the same buckets, state and merge;
    each group's input arrives as pandas DataFrames and its outputs leave as one."""

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        """A micro-batch of one bucket's raw records, as DataFrames."""
        by_pk: dict[bytes, list[RawRecord]] = {}
        for pdf in rows:
            for k, v, p, o in zip(pdf["key"], pdf["value"], pdf["partition"], pdf["offset"],
                                  strict=True):
                by_pk.setdefault(k, []).append(RawRecord(v, int(p), int(o)))
        yield from _frames(self.merge_bucket(key[0], by_pk,
                                             timerValues.getCurrentProcessingTimeInMs()))

    def handleExpiredTimer(self, key: Any, timerValues: Any,
                           expiredTimerInfo: Any) -> Iterator[Any]:
        """Expire the bucket's keys due at the timer's time."""
        yield from _frames(self.expire_due(key[0], timerValues.getCurrentProcessingTimeInMs(),
                                           expiredTimerInfo.getExpiryTimeInMs()))


def _frames(outputs: list[tuple[str, bytes | None, bytes | None]]) -> Iterator[Any]:
    import pandas as pd

    if outputs:  # no frame at all for no outputs: an empty one would have no columns
        topics, keys, values = zip(*outputs, strict=True)
        yield pd.DataFrame({"topic": topics, "key": keys, "value": values})


def start_tws_pandas(spark: Any, cfg: MaterializerConfig) -> Any:
    """job.start's query with transformWithStateInPandas in place of transformWithState."""
    k = cfg.kafka
    processor = PandasProcessor(k.client(), f"{k.topic_prefix}.schemas", event_settings(cfg),
                                cfg.spark.batched_state, cfg.spark.state_page_rows)
    raw = read_raw(spark, cfg)
    events = (raw.withColumn("bucket", bucket_column(raw.key, cfg.spark.state_buckets))
              .groupBy("topic", "bucket")
              .transformWithStateInPandas(processor, OUTPUT_SCHEMA, "Append", "ProcessingTime"))
    return write_events(events, cfg, available_now=True)


def start_pandas(spark: Any, cfg: MaterializerConfig) -> Any:
    """The same query as materializer.spark.job.start, on applyInPandasWithState."""
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    k = cfg.kafka
    settings = event_settings(cfg)
    handlers: dict[str, KeyHandler] = {}

    def apply(key: tuple, pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        handler = handlers.get("h")
        if handler is None:
            handler = handlers["h"] = KeyHandler(_cache(k.bootstrap_servers,
                                                        f"{k.topic_prefix}.schemas"),
                                                 settings, _topics(k.bootstrap_servers,
                                                                   settings).ensure)
        topic, pk = key
        blob, schema_hash = state.get if state.exists else (None, None)
        records = [RawRecord(bytes(v), int(p), int(o)) for pdf in pdfs
                   for v, p, o in zip(pdf["value"], pdf["partition"], pdf["offset"],
                                      strict=True)]
        res = handler.handle(topic, bytes(pk), records, blob, schema_hash,
                             int(pd.Timestamp.now().value // 1_000_000))
        if res.state is None:
            state.remove()
        else:
            state.update((res.state, res.schema_hash))
        yield pd.DataFrame({"topic": [o[0] for o in res.outputs],
                            "key": [o[1] for o in res.outputs],
                            "value": [o[2] for o in res.outputs]})

    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", k.bootstrap_servers)
           .option("subscribePattern", raw_topic_pattern(k.topic_prefix))
           .option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", str(k.max_offsets_per_trigger)).load())
    events = (raw.select("topic", "key", "value", "partition", "offset")
              .groupBy("topic", "key")
              .applyInPandasWithState(apply, OUTPUT_SCHEMA, "blob BINARY, schema_hash STRING",
                                      "Append", GroupStateTimeout.NoTimeout))
    return (events.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", k.bootstrap_servers)
            .option("checkpointLocation", str(cfg.spark.checkpoint))
            .trigger(availableNow=True).start())
