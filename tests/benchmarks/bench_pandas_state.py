"""applyInPandasWithState over the same KeyHandler: the alternative API, for the benchmark only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from materializer.handler import KeyHandler, RawRecord
from materializer.settings import MaterializerConfig
from materializer.spark.job import event_settings, raw_topic_pattern
from materializer.spark.processor import OUTPUT_SCHEMA, _cache, _topics


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
