#!/usr/bin/env bash
# Run the casscade materializer on a Spark cluster (or locally through spark-submit).
#
#   deploy/spark/submit.sh [--master URL] [--env ENV.tar.gz] [--jars J1,J2] -- --config FILE [run options]
#
# What it does: zips the casscade packages (materializer, shared, publisher) into
# build/casscade.zip for --py-files, adds the Kafka connector (--packages from Maven Central, or
# --jars given here), ships a packed Python environment if given (--env: a venv-pack or
# conda-pack archive holding casscade's dependencies: pandas, pyarrow, confluent-kafka,
# cassandra-driver, fastavro, pyyaml, click), and runs `casscade materializer run` with the
# options after `--`. spark.master=submit is forced, so the cluster settings here win over
# the config file; spark.kafka_jars=provided likewise.
#
# Environment: SPARK_SUBMIT (default: spark-submit on PATH, else the pyspark package's own),
# SPARK_VERSION (default: the installed pyspark's version; must equal the cluster's).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
master="" env_archive="" jars=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --master) master="$2"; shift 2 ;;
    --env) env_archive="$2"; shift 2 ;;
    --jars) jars="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "submit.sh: unknown option $1 (job options go after --)" >&2; exit 2 ;;
  esac
done

python=${PYTHON:-python3}
submit=${SPARK_SUBMIT:-$(command -v spark-submit || true)}
if [[ -z "$submit" ]]; then
  submit="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit"))')"
fi
version=${SPARK_VERSION:-$("$python" -c 'import pyspark; print(pyspark.__version__)')}

mkdir -p "$root/build"
zipfile="$root/build/casscade.zip"
rm -f "$zipfile"
(cd "$root" && "$python" - "$zipfile" <<'PY'
import sys, zipfile, pathlib
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for pkg in ("materializer", "shared", "publisher"):
        for f in sorted(pathlib.Path(pkg).rglob("*.py")):
            z.write(f)
PY
)

args=(--name casscade-materializer --py-files "$zipfile"
      --conf spark.sql.streaming.stateStore.providerClass=org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider)
[[ -n "$master" ]] && args+=(--master "$master")
if [[ -n "$jars" ]]; then
  args+=(--jars "$jars")
else
  args+=(--packages "org.apache.spark:spark-sql-kafka-0-10_2.13:${version}")
fi
if [[ -n "$env_archive" ]]; then
  args+=(--archives "${env_archive}#environment" --conf spark.pyspark.python=./environment/bin/python)
fi

exec "$submit" "${args[@]}" "$root/deploy/spark/casscade_materializer.py" \
  "$@" --set spark.master=submit --set spark.kafka_jars=provided
