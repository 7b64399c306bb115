"""Integration tests only: the Spark drivers they start are short-lived, so their JVMs run
with the C1 compiler alone and SerialGC (measured, 3 interleaved rounds: a 2,000-record
`materializer run --available-now` in 26.2-27.3 s instead of 28.8-32.0 s on this 2-core
machine). The launcher
reads SPARK_LAUNCHER_OPTS, the driver SPARK_SUBMIT_OPTS; Cassandra, Kafka and the Spark
daemons do not read either. Benchmarks (tests/benchmarks) keep the JVM defaults."""

from __future__ import annotations

import os

_SHORT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_LAUNCHER_OPTS", _SHORT_JVM)
os.environ.setdefault("SPARK_SUBMIT_OPTS", _SHORT_JVM)
