#!/usr/bin/env bash
# Run the casscade materializer on a Spark cluster (or locally through spark-submit).
#
#   deploy/spark/submit.sh [--master URL] [--env ENV.tar.gz] [--jars J1,J2 | --local-jars | --packages] -- --config FILE [run options]
#   deploy/spark/submit.sh --build-env ENV.tar.gz
#
# --build-env: builds the packed Python environment a cluster's executors run: a venv with
# casscade installed as a wheel (the compiled RowUpdate reader included; the build fails
# without it) and its dependencies but PySpark (the executors take the cluster's own),
# packed with venv-pack. The hosts need this interpreter (same version, same path) under it.
#
# What a run does: adds the Kafka connector, ships the packed environment if given (--env:
# an archive --build-env made; casscade comes from it) or else zips the casscade packages
# (materializer, shared, publisher; pure Python: the executors read with the slower pure
# reader) into build/casscade.zip for --py-files, and runs `casscade materializer run` with
# the options after `--`. spark.master=submit is forced, so the cluster settings here win
# over the config file; spark.kafka_jars=provided likewise.
#
# The Kafka connector: --jars as given; --local-jars: the jars `stack fetch` resolved into
# .casscade/lib/spark-kafka (resolved now from ~/.m2 if missing); --packages: Ivy resolves
# spark-sql-kafka from a Maven repository at submit time. Default: the local jars when
# `stack fetch` resolved them already, else --packages.
#
# Python on the executors: with --env, the archive's. Without it, when the master runs on
# this machine (local[...] or no --master, spark://127.0.0.1|localhost|this host), $PYTHON,
# whose venv is on the same disk; a remote master without --env runs its hosts' python3.
# A master on loopback also binds the driver to 127.0.0.1 (SPARK_LOCAL_IP). The checkpoint
# (spark.checkpoint) must be storage every executor sees: a local path only when driver and
# workers share the disk, as on the local cluster (`stack spark up`).
#
# Environment: PYTHON (default: the checkout's .venv/bin/python, else python3),
# SPARK_SUBMIT (default: spark-submit on PATH, else the pyspark package's own),
# SPARK_VERSION (default: the installed pyspark's version; must equal the cluster's),
# CASSCADE_BUILD_DIR (where casscade.zip is written; default build/ of the checkout).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
master="" env_archive="" build_env="" jars="" connector=auto
while [[ $# -gt 0 ]]; do
  case "$1" in
    --master) master="$2"; shift 2 ;;
    --env) env_archive="$2"; shift 2 ;;
    --build-env) build_env="$2"; shift 2 ;;
    --jars) jars="$2"; connector=jars; shift 2 ;;
    --local-jars) connector=local; shift ;;
    --packages) connector=packages; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "submit.sh: unknown option $1 (job options go after --)" >&2; exit 2 ;;
  esac
done

if [[ -z "${PYTHON:-}" && -x "$root/.venv/bin/python" ]]; then
  python="$root/.venv/bin/python"
else
  python=${PYTHON:-python3}
fi
# the interpreter's own path (a venv's bin/python, not what it links to): its site-packages
python=$("$python" -c 'import sys; print(sys.executable)')
submit=${SPARK_SUBMIT:-$(command -v spark-submit || true)}
if [[ -z "$submit" ]]; then
  submit="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit"))')"
fi
version=${SPARK_VERSION:-$("$python" -c 'import pyspark; print(pyspark.__version__)')}
build=${CASSCADE_BUILD_DIR:-$root/build}

if [[ -n "$build_env" ]]; then
  work="$build/env"
  rm -rf "$work" && mkdir -p "$work"
  echo "submit.sh: building casscade's wheel (compiled reader) into $work/wheels" >&2
  "$python" -m pip wheel -q --no-deps -w "$work/wheels" "$root"
  "$python" -m venv "$work/venv"
  # casscade's dependencies and its materializer extra's but PySpark and py4j: the
  # executors' Python workers import the cluster's own (Spark puts them on their
  # PYTHONPATH), which must be the same version
  deps=$(cd "$root" && "$python" -c '
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = project["dependencies"] + project["optional-dependencies"]["materializer"]
print(" ".join(d for d in deps if not d.lower().startswith(("pyspark", "py4j"))))')
  # shellcheck disable=SC2086  # one word a requirement
  "$work/venv/bin/python" -m pip install -q $deps
  "$work/venv/bin/python" -m pip install -q --no-deps "$work"/wheels/casscade-*.whl
  (cd "$work" && venv/bin/python -c '
from shared.rowupdate_reader import COMPILED
assert COMPILED, "the compiled RowUpdate reader is not in the wheel (no C compiler or Cython?)"')
  "$python" -m venv_pack -q --format tar.gz -p "$work/venv" -o "$build_env.$$" -f
  mv -f "$build_env.$$" "$build_env"
  rm -rf "$work"
  echo "submit.sh: packed environment $build_env ($(du -h "$build_env" | cut -f1))" >&2
  exit 0
fi

local_jars() {  # $1: auto (only jars already fetched) or local (fetch from ~/.m2 if needed)
  # the dev stack's package (deploy/local/devstack) resolves the jars, from the checkout
  (cd "$root" && PYTHONPATH="$root/deploy/local:$root${PYTHONPATH:+:$PYTHONPATH}" \
     "$python" - "$1" <<'PY'
import sys
from devstack import artifacts
from devstack.settings import StackSettings
from devstack.spark import kafka_connector_jars
s = StackSettings.from_env()
if sys.argv[1] == "auto" and not (artifacts.lib_dir(s.lib_dir, "spark-kafka") / ".pom-sha256").is_file():
    sys.exit(3)
print(",".join(str(j) for j in kafka_connector_jars(s)))
PY
  )
}
case "$connector" in
  local) jars=$(local_jars local) ;;
  auto) if jars=$(local_jars auto 2>/dev/null); then
          echo "submit.sh: Kafka connector from $(dirname "${jars%%,*}")" >&2
        else
          jars="" connector=packages
        fi ;;
esac

args=(--name casscade-materializer
      --conf spark.sql.streaming.stateStore.providerClass=org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider)
if [[ -z "$env_archive" ]]; then
  # no packed environment: the packages as a zip (pure Python), which would shadow an
  # archive's installed casscade, compiled reader and all, if both were shipped
  mkdir -p "$build"
  zipfile="$build/casscade.zip"
  # written aside and renamed: a job submitted a moment ago may still be shipping the old one
  (cd "$root" && "$python" - "$zipfile.$$" <<'PY'
import sys, zipfile, pathlib
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for pkg in ("materializer", "shared", "publisher"):
        for f in sorted(pathlib.Path(pkg).rglob("*.py")):
            z.write(f)
PY
  )
  mv -f "$zipfile.$$" "$zipfile"
  args+=(--py-files "$zipfile")
fi
[[ -n "$master" ]] && args+=(--master "$master")
if [[ "$connector" == packages ]]; then
  args+=(--packages "org.apache.spark:spark-sql-kafka-0-10_2.13:${version}")
else
  args+=(--jars "$jars")
fi

# Where the master runs: this machine (local mode, loopback, this host's name) or not.
host=${master#spark://}; host=${host%%[:,/]*}
on_loopback=false on_this_host=false
case "$master" in
  ""|local|local\[*) on_loopback=true ;;
  spark://127.*|spark://localhost*|spark://\[::1\]*) on_loopback=true ;;
esac
if $on_loopback || [[ "$host" == "$(hostname)" || "$host" == "$(hostname -f 2>/dev/null)" ]]; then
  on_this_host=true
fi
if $on_loopback; then
  # driver RPC, block manager and UI on loopback, where the local cluster's executors are;
  # the address itself, not "localhost" (the name SPARK_LOCAL_IP alone gives), which may
  # resolve to ::1 first
  export SPARK_LOCAL_IP=${SPARK_LOCAL_IP:-127.0.0.1}
  args+=(--conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1)
fi

if [[ -n "$env_archive" ]]; then
  # executors unpack the archive; the driver (client mode) runs here, with this python.
  # Spark runs the Python workers of both with one path, ./environment/bin/python (the
  # driver may start one too), so the driver runs in a folder of its
  # own whose environment/ is this python's venv; relative paths given to the job are made
  # absolute first
  env_archive=$(cd "$(dirname "$env_archive")" && pwd)/$(basename "$env_archive")
  driver_dir="$build/driver"
  mkdir -p "$driver_dir"
  ln -sfn "$(dirname "$(dirname "$python")")" "$driver_dir/environment"
  job_args=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --config) job_args+=("$1" "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
      --set) case "$2" in
               spark.checkpoint=/*|spark.checkpoint=*://*) job_args+=("$1" "$2") ;;
               spark.checkpoint=*) job_args+=("$1" "spark.checkpoint=$PWD/${2#spark.checkpoint=}") ;;
               *) job_args+=("$1" "$2") ;;
             esac; shift 2 ;;
      *) job_args+=("$1"); shift ;;
    esac
  done
  set -- "${job_args[@]}"
  cd "$driver_dir"
  args+=(--archives "${env_archive}#environment" --conf spark.pyspark.python=./environment/bin/python
         --conf "spark.pyspark.driver.python=$python")
elif $on_this_host; then
  # executors share this disk: the same venv (casscade's dependencies) for driver and workers
  args+=(--conf "spark.pyspark.python=$python" --conf "spark.executorEnv.PYSPARK_PYTHON=$python")
else
  echo "submit.sh: master $master is not on this machine and no --env was given: executors" \
       "run their hosts' python3, which must hold casscade's dependencies" >&2
fi

exec "$submit" "${args[@]}" "$root/deploy/spark/casscade_materializer.py" \
  "$@" --set spark.master=submit --set spark.kafka_jars=provided
