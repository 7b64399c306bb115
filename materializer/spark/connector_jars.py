"""Where the Spark Kafka connector's jars are: `spark.kafka_jars: auto` on a local run.

`auto` takes the jars the local stack fetched from Maven Central (`deploy/local/stack fetch`,
also done by `stack up`) in `$CASSCADE_LIB_DIR/spark-kafka`, by default `.casscade/lib` of
the checkout this package runs from. Jars the pyspark wheel already ships (scala-library,
hadoop-client, lz4, ...) are left out so the driver never sees two versions of one library.
Under spark-submit the connector comes with `--packages` or `--jars` (`provided`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

COMPONENT = "spark-kafka"  # the lib dir's sub-directory, as the local stack names it
_VERSIONED = re.compile(r"^(?P<name>.+?)-\d[\w.\-]*\.jar$")


class ConnectorJarsMissing(RuntimeError):
    """No spark-sql-kafka jar where `auto` looks; the message says how to get one."""


def artifact_name(jar: Path) -> str:
    """A jar's artifact name without its version (`kafka-clients-3.9.1.jar` → kafka-clients)."""
    match = _VERSIONED.match(jar.name)
    return match.group("name") if match else jar.stem


def default_lib_root() -> Path:
    """$CASSCADE_LIB_DIR, else .casscade/lib of $CASSCADE_REPO or of this checkout."""
    if os.environ.get("CASSCADE_LIB_DIR"):
        return Path(os.environ["CASSCADE_LIB_DIR"])
    repo = os.environ.get("CASSCADE_REPO") or Path(__file__).resolve().parents[2]
    return Path(repo) / ".casscade" / "lib"


def connector_jars(lib_root: Path | None = None) -> list[Path]:
    """spark-sql-kafka and the jars it needs that the pyspark wheel lacks, from the lib dir."""
    import pyspark

    lib = (lib_root or default_lib_root()) / COMPONENT
    wheel = Path(pyspark.__file__).parent / "jars"
    bundled = {artifact_name(j) for j in wheel.glob("*.jar")}
    jars = [j for j in sorted(lib.glob("*.jar")) if artifact_name(j) not in bundled]
    if not any(j.name.startswith("spark-sql-kafka") for j in jars):
        raise ConnectorJarsMissing(
            f"spark.kafka_jars=auto: no spark-sql-kafka jar in {lib}. In a checkout run "
            "`deploy/local/stack fetch` (or `make up`); elsewhere set spark.kafka_jars to a "
            "comma-separated list of jars, or to 'provided' when spark-submit's --packages "
            "supplies the connector")
    return jars
