"""The container images (deploy/images): built here with buildah from a Debian base that
mmdebstrap makes (no registry), then run with podman. The publisher image runs as the sidecar
manifest runs it (uid 999, read-only root, no capabilities) against a real node and broker,
reaching both on loopback through the host's network; the job image has Spark on its own
layout with the connector, and imports the job.

Podman runs containers on this machine with runc and explicit limits only
(support.images.podman_run says which errors the defaults give), so no chroot fallback is
needed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from cassandra.concurrent import execute_concurrent_with_args

from devstack.cassandra import cql_cluster
from shared.topic_names import raw_topic

from support.images import inspect, podman_run
from support.paths import ROOT
from support.publisher_harness import read_topic, wait_for, wait_healthy
from support.reference import completed_segments

pytestmark = pytest.mark.integration

MANIFEST = ROOT / "deploy" / "k8s" / "publisher-sidecar.yaml"
# measured 251 MB (the base 127 MB, Debian's python3, the venv 65 MB); room for new versions
PUBLISHER_IMAGE_MB = 300
ENGINE = ("pyspark", "py4j", "pyarrow", "pandas", "numpy")
# the sidecar's securityContext (readOnlyRootFilesystem, drop ALL, no privilege escalation);
# no tmpfs on /tmp either, which podman's --read-only adds and Kubernetes does not
SIDECAR = ("--read-only", "--read-only-tmpfs=false", "--cap-drop", "ALL",
           "--security-opt", "no-new-privileges")
HTTP_PORT = 18105  # the agent tests' agents take 18100-18104


def _sidecar() -> dict[str, Any]:
    """The publisher container of deploy/k8s/publisher-sidecar.yaml."""
    docs = {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text())}
    pod = docs["StatefulSet"]["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == "casscade-publisher") | {
        "podSecurityContext": pod["securityContext"]}


def _run(command: list[str], timeout_s: float = 180) -> subprocess.CompletedProcess:
    """A short container run, its output kept."""
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)


def test_the_publisher_image_is_the_base_install_as_the_sidecar_runs_it(images) -> None:
    """The manifest's command line is the image's, as the manifest's user; the base install
    only (compiled reader in, no engine), within its size budget, and it runs on a read-only
    root file system with no capabilities."""
    publisher = images["publisher"]
    info = inspect(publisher)
    sidecar = _sidecar()
    security = sidecar["podSecurityContext"]
    assert info["Config"]["Cmd"] == sidecar["args"]  # k8s args replace the CMD: the same
    assert not info["Config"].get("Entrypoint")  # else the args would follow an entry point
    assert info["Config"]["User"] == f"{security['runAsUser']}:{security['runAsGroup']}"
    assert len(info["Labels"]["casscade.wheel.sha256"]) == 64
    size_mb = info["Size"] / 1e6
    print(f"[images] {publisher}: {size_mb:.0f} MB")
    assert size_mb <= PUBLISHER_IMAGE_MB, size_mb

    probe = _run(podman_run(publisher, ["python", "-c", (
        "import importlib.util, json, os, shutil, sys; "
        "from shared.rowupdate_reader import COMPILED; "
        "print(json.dumps({'uid': os.getuid(), 'gid': os.getgid(), 'compiled': COMPILED, "
        f"'engine': [m for m in {ENGINE!r} if importlib.util.find_spec(m)], "
        "'casscade': shutil.which('casscade'), 'python': sys.version_info[:2]}))")],
        options=SIDECAR))
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout) == {
        "uid": 999, "gid": 999, "compiled": True, "engine": [],
        "casscade": "/opt/casscade/venv/bin/casscade", "python": [3, 11]}
    listed = _run(podman_run(publisher, ["casscade", "--help"], options=SIDECAR))
    assert listed.returncode == 0, listed.stderr
    assert all(c in listed.stdout for c in ("publisher", "snapshot", "ops", "verify"))
    refused = _run(podman_run(publisher, ["casscade", "materializer", "run"], options=SIDECAR))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert "pip install 'casscade[materializer]'" in refused.stderr, refused.stderr


def test_the_job_image_has_spark_on_its_layout_and_imports_the_job(images) -> None:
    """Spark's own spark-submit at /opt/spark on Java 17, the pyspark casscade imports being
    that Spark, the connector's jars on Spark's class path, and the job importable."""
    import pyspark

    job = images["materializer"]
    shown = _run(podman_run(job, ["spark-submit", "--version"]))
    banner = shown.stdout + shown.stderr
    assert shown.returncode == 0, banner[-3000:]
    assert f"version {pyspark.__version__}" in banner and ", 17." in banner, banner[-3000:]

    probe = _run(podman_run(job, ["python", "-c", (
        "import json, os, shutil, pyspark, materializer.spark.job; "
        "from shared.rowupdate_reader import COMPILED; "
        "jars = os.environ['CASSCADE_CONNECTOR_JARS'].split(','); "
        "print(json.dumps({'uid': os.getuid(), 'compiled': COMPILED, "
        "'spark_home': os.environ['SPARK_HOME'], "
        "'pyspark': os.path.realpath(os.path.dirname(pyspark.__file__)), "
        "'spark_submit': os.path.realpath(shutil.which('spark-submit')), "
        "'jars': [os.path.basename(j) for j in jars if os.path.isfile(j) "
        "and os.path.dirname(j) == '/opt/spark/jars']}))")]))
    assert probe.returncode == 0, probe.stderr[-3000:]
    seen = json.loads(probe.stdout)
    assert seen["uid"] == 185 and seen["compiled"] is True, seen
    assert seen["spark_home"] == seen["pyspark"] == "/opt/spark", seen
    assert seen["spark_submit"] == "/opt/spark/bin/spark-submit", seen
    assert any(j.startswith("spark-sql-kafka-0-10_2.13-") for j in seen["jars"]), seen
    assert any(j.startswith("kafka-clients-") for j in seen["jars"]), seen
    usage = _run(podman_run(job))  # its CMD: deploy/spark/submit.sh --help
    assert usage.returncode == 0 and "--build-env" in usage.stdout, usage.stderr


@pytest.fixture(scope="module")
def node(agent_node):
    """The publisher tests' node (agent_node): this module's writes go to a keyspace of its
    own."""
    return agent_node


@pytest.fixture(scope="module")
def session(node):
    """A CQL session on the module's node, with the module's keyspace."""
    cluster = cql_cluster(node)
    sess = cluster.connect()
    sess.execute("CREATE KEYSPACE IF NOT EXISTS img WITH replication = "
                 "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    yield sess
    cluster.shutdown()


def test_the_publisher_image_publishes_a_nodes_writes(stack, node, session, images,
                                                      tmp_path: Path) -> None:
    """The publisher image as the sidecar (uid 999, read-only root, no capabilities), given
    the node's cdc_raw and a state directory as volumes and its config file as the manifest
    mounts them, on the host's network (the node and broker listen on loopback only):
    a table's writes reach the raw topic, one record a row, the segments it published are
    deleted from cdc_raw by uid 999, and SIGTERM stops it cleanly."""
    prefix = f"t{uuid.uuid4().hex[:8]}"
    state, config_dir = tmp_path / "state", tmp_path / "config"
    state.mkdir()
    config_dir.mkdir()
    config = {
        "kafka": {"bootstrap_servers": stack.bootstrap_servers, "topic_prefix": prefix,
                  "partitions": 3},
        "cassandra": {"contact_points": [node.host], "port": node.cql_port},
        # the paths the manifest gives the sidecar
        "cdc": {"cdc_raw": "/var/lib/cassandra/cdc_raw", "poll_interval_ms": 50,
                "unknown_retry_s": 5},
        "node": {"host": "node-1", "datacenter": "dc-test"},
        "state": {"path": "/var/lib/cassandra/casscade", "flush_interval_ms": 200},
        "http": {"host": "127.0.0.1", "port": HTTP_PORT},
        "log": {"format": "json", "level": "INFO"},
    }
    (config_dir / "publisher.yaml").write_text(yaml.safe_dump(config))
    # fsGroup's part: the volume's directories are the agent's user's; Cassandra (root here)
    # still writes its segments into cdc_raw, and uid 999 may delete them
    for directory in (node.cdc_raw_dir, state):
        os.chown(directory, 999, 999)
    session.execute("CREATE TABLE img.rows (k int PRIMARY KEY, v text) WITH cdc = true")

    name = f"casscade-image-test-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "agent.log"
    with open(log, "wb") as out:
        agent = subprocess.Popen(podman_run(images["publisher"], options=(
            "--name", name, "--network", "host", *SIDECAR,
            "--volume", f"{node.cdc_raw_dir}:/var/lib/cassandra/cdc_raw",
            "--volume", f"{state}:/var/lib/cassandra/casscade",
            "--volume", f"{config_dir}:/etc/casscade:ro")),
            stdout=out, stderr=out, stdin=subprocess.DEVNULL)

    try:
        wait_healthy(agent, HTTP_PORT, log, "the container", 120)
        for k in range(50):
            session.execute(f"INSERT INTO img.rows (k, v) VALUES ({k}, 'v{k}')")
        # > one 4 MiB segment of another table: the current segment completes
        session.execute("CREATE TABLE img.filler (k int PRIMARY KEY, b blob) WITH cdc = true")
        insert = session.prepare("INSERT INTO img.filler (k, b) VALUES (?, ?)")
        blob = random.randbytes(200_000)
        execute_concurrent_with_args(session, insert, [(i, blob) for i in range(25)],
                                     concurrency=4)
        records = read_topic(stack.bootstrap_servers, raw_topic(prefix), expect_at_least=50,
                             table="img.rows")
        wait_for(lambda: not completed_segments(node.cdc_raw_dir), 60,
                 "completed segments deleted by the container's user")
    finally:
        # podman stop: SIGTERM to the agent, which drains and exits; then its exit code
        subprocess.run(["podman", "stop", "--time", "60", name], capture_output=True,
                       timeout=120)
        try:
            code = agent.wait(30)  # podman run returns once the container has stopped
        except subprocess.TimeoutExpired:
            agent.kill()
            code = None
        subprocess.run(["podman", "rm", "--force", "--ignore", name], capture_output=True,
                       timeout=60)
    assert code == 0, log.read_text(errors="replace")[-3000:]
    assert len({key for _p, _o, key, _rec in records}) == 50, records[:3]  # one per row
    assert {r["source"]["host"] for _p, _o, _k, r in records} == {"node-1"}
    written = list(state.rglob("*"))  # its acknowledged positions, as the agent's user
    assert written and {f.stat().st_uid for f in written} == {999}, written
