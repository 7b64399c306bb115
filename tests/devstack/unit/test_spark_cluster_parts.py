"""The local Spark cluster's pure parts (no JVM started): settings, command lines, the
environment, reading the master's view, port checks; and submit.sh's spark-submit line."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from devstack import artifacts, spark_cluster
from devstack.process import StackError
from devstack.settings import StackSettings, repo_root
from devstack.spark_cli import spark
from devstack.spark_cluster import ClusterConfig

from support.services import free_port


@pytest.fixture
def settings(tmp_path: Path) -> StackSettings:
    return replace(StackSettings.from_env(), state_dir=tmp_path / "state")


@pytest.fixture
def quiet_ports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ClusterConfig]:
    """Ports nobody listens on, so a developer's running cluster is not seen."""
    for var in spark_cluster.PORT_VARS.values():
        monkeypatch.setenv(var, str(free_port()))
    monkeypatch.setenv("CASSCADE_STATE_DIR", str(tmp_path / "state"))
    yield ClusterConfig.from_env()


def test_config_defaults_and_env() -> None:
    cfg = ClusterConfig.from_env({})
    assert (cfg.master_port, cfg.master_ui_port, cfg.worker_ui_port) == (7077, 8080, 8081)
    assert (cfg.worker_ui(1), cfg.worker_ui(2)) == (8081, 8082)
    assert cfg.worker_memory == "1g"
    cfg = ClusterConfig.from_env({"CASSCADE_SPARK_MASTER_PORT": "17077",
                                  "CASSCADE_SPARK_MASTER_UI_PORT": "18080",
                                  "CASSCADE_SPARK_WORKER_UI_PORT": "18100",
                                  "CASSCADE_SPARK_WORKER_MEMORY": "512m"})
    assert (cfg.master_port, cfg.master_ui_port, cfg.worker_ui(3)) == (17077, 18080, 18102)
    assert cfg.worker_memory == "512m"
    with pytest.raises(StackError, match="CASSCADE_SPARK_MASTER_PORT='x7077'"):
        ClusterConfig.from_env({"CASSCADE_SPARK_MASTER_PORT": "x7077"})


def test_layout_and_master_url(settings: StackSettings) -> None:
    cfg = ClusterConfig(master_port=17077)
    assert spark_cluster.master_url(settings, cfg) == "spark://127.0.0.1:17077"
    root = settings.state_dir / "spark"
    assert spark_cluster.pid_file(settings, "worker-2") == root / "worker-2.pid"
    assert spark_cluster.log_file(settings, "master") == root / "logs" / "master.log"
    assert spark_cluster.worker_dir(settings, 3) == root / "worker-3"


def test_command_lines_bind_loopback(settings: StackSettings) -> None:
    cfg, home = ClusterConfig(), Path("/opt/pyspark")
    master = spark_cluster.master_command(cfg, home)
    assert master[:2] == ["/opt/pyspark/bin/spark-class", spark_cluster.MASTER_CLASS]
    assert master[2:] == ["--host", "127.0.0.1", "--port", "7077", "--webui-port", "8080"]
    worker = spark_cluster.worker_command(settings, cfg, home, 2)
    assert worker[1] == spark_cluster.WORKER_CLASS
    opts = dict(zip(worker[2:-1:2], worker[3:-1:2], strict=True))
    assert opts == {"--host": "127.0.0.1", "--cores": "1", "--memory": "1g",
                    "--work-dir": str(settings.state_dir / "spark" / "worker-2" / "work"),
                    "--webui-port": "8082"}
    assert worker[-1] == "spark://127.0.0.1:7077"
    assert "--port" not in worker  # the OS picks the RPC port (restarts must not collide)


def test_daemon_env(settings: StackSettings) -> None:
    base = {"PATH": "/bin", "SPARK_ENV_LOADED": "1", "PYSPARK_PYTHON": "/usr/bin/python3"}
    cfg = ClusterConfig()
    master = spark_cluster.daemon_env(settings, cfg, Path("/jdk"), Path("/ps"), base=base)
    assert master["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert master["PYSPARK_PYTHON"] == sys.executable  # the venv's, not the system's
    assert master["JAVA_HOME"] == "/jdk" and master["SPARK_HOME"] == "/ps"
    assert master["SPARK_CONF_DIR"] == str(settings.state_dir / "spark" / "conf")
    assert master["SPARK_DAEMON_MEMORY"] == "256m" and master["PATH"] == "/bin"
    assert "SPARK_ENV_LOADED" not in master and "SPARK_WORKER_DIR" not in master
    assert master["SPARK_DAEMON_JAVA_OPTS"] == spark_cluster.DAEMON_JVM_OPTS
    own = spark_cluster.daemon_env(settings, cfg, Path("/jdk"), Path("/ps"),
                                   base={**base, "SPARK_DAEMON_JAVA_OPTS": "-Dx=1"})
    assert own["SPARK_DAEMON_JAVA_OPTS"] == "-Dx=1"  # an operator's own options win
    w1 = spark_cluster.daemon_env(settings, cfg, Path("/jdk"), Path("/ps"), 1, base)
    w2 = spark_cluster.daemon_env(settings, cfg, Path("/jdk"), Path("/ps"), 2, base)
    assert w1["SPARK_WORKER_DIR"] == str(settings.state_dir / "spark" / "worker-1" / "work")
    assert w1["SPARK_LOCAL_DIRS"] != w2["SPARK_LOCAL_DIRS"]


def _worker(n: int, state: str, wid: str) -> dict:
    return {"id": wid, "host": "127.0.0.1", "state": state,
            "webuiaddress": f"http://127.0.0.1:{8080 + n}"}


def test_worker_states_match_by_ui_port() -> None:
    cfg = ClusterConfig()
    master = {"status": "ALIVE", "workers": [
        _worker(1, "ALIVE", "w-a"), _worker(2, "DEAD", "w-old"), _worker(2, "ALIVE", "w-new"),
        _worker(2, "DEAD", "w-older"), _worker(7, "ALIVE", "not-ours")]}
    assert spark_cluster.worker_states(master, cfg, 2) == {1: ("ALIVE", "w-a"),
                                                           2: ("ALIVE", "w-new")}
    ignored = spark_cluster.worker_states(master, cfg, 2, frozenset({"w-new"}))
    assert ignored[2][0] == "DEAD"  # a registration from before a restart does not count
    assert spark_cluster.worker_states(None, cfg, 2) == {}


def test_status_when_nothing_runs(quiet_ports: ClusterConfig) -> None:
    s = StackSettings.from_env()
    assert spark_cluster.status(s) == [("master", "stopped")]
    spark_cluster.spark_dir(s).mkdir(parents=True)
    (spark_cluster.spark_dir(s) / "workers").write_text("2\n")
    rows = spark_cluster.status(s)
    assert rows[1:] == [("worker 1", "stopped (master: not registered)"),
                        ("worker 2", "stopped (master: not registered)")]
    result = CliRunner().invoke(spark, ["status"])
    assert result.exit_code == 3, result.output
    assert "worker 2   stopped" in result.output


def test_up_refuses_a_taken_port_and_starts_nothing(quiet_ports: ClusterConfig,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    s = StackSettings.from_env()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        monkeypatch.setenv("CASSCADE_SPARK_WORKER_UI_PORT", str(port - 1))  # worker 2's
        with pytest.raises(StackError) as err:
            spark_cluster.up(s, workers=2, log=lambda _m: None)
    assert f"spark worker 2 UI (CASSCADE_SPARK_WORKER_UI_PORT + 1) 127.0.0.1:{port}" \
        in str(err.value)
    assert not list(spark_cluster.spark_dir(s).glob("*.pid"))
    with pytest.raises(StackError, match="between 1 and"):
        spark_cluster.up(s, workers=0)


def test_start_worker_needs_the_master(quiet_ports: ClusterConfig) -> None:
    with pytest.raises(StackError, match="master is not running"):
        spark_cluster.start_worker(StackSettings.from_env(), 1)


def test_cli_help_and_worker_arguments() -> None:
    runner = CliRunner()
    top = runner.invoke(spark, ["--help"])
    assert top.exit_code == 0
    for word in ("up", "down", "status", "worker", "spark://127.0.0.1:7077",
                 "CASSCADE_SPARK_MASTER_PORT", "submit.sh"):
        assert word in top.output
    assert "--workers" in runner.invoke(spark, ["up", "--help"]).output
    bad = runner.invoke(spark, ["worker", "1", "reboot"])
    assert bad.exit_code == 2 and "stop" in bad.output
    assert runner.invoke(spark, ["worker", "0", "kill"]).exit_code == 2


# ---- deploy/spark/submit.sh, with spark-submit replaced by a script that prints its input
def _submit(tmp_path: Path, *args: str, lib: Path | None = None) -> tuple[list[str], str, str]:
    fake = tmp_path / "fake-submit"
    fake.write_text('#!/bin/sh\necho "SPARK_LOCAL_IP=$SPARK_LOCAL_IP"\n'
                    'for a in "$@"; do echo "$a"; done\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    env.update(SPARK_SUBMIT=str(fake), PYTHON=sys.executable,
               CASSCADE_BUILD_DIR=str(tmp_path / "build"),
               CASSCADE_LIB_DIR=str(lib or tmp_path / "no-lib"))
    out = subprocess.run([str(repo_root() / "deploy" / "spark" / "submit.sh"), *args],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    return lines[1:], lines[0].split("=", 1)[1], out.stderr


def _conf(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")


def test_submit_to_a_loopback_master_uses_this_venv(tmp_path: Path) -> None:
    argv, local_ip, _err = _submit(tmp_path, "--master", "spark://127.0.0.1:7077",
                                   "--jars", "/x/a.jar", "--", "--config", "c.yaml")
    assert local_ip == "127.0.0.1"  # the driver binds loopback, where the executors are
    assert argv[argv.index("--jars") + 1] == "/x/a.jar" and "--packages" not in argv
    conf = _conf(argv)
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == sys.executable
    assert conf["spark.sql.streaming.stateStore.providerClass"].endswith(
        "RocksDBStateStoreProvider")
    assert argv[argv.index("--py-files") + 1] == str(tmp_path / "build" / "casscade.zip")
    assert (tmp_path / "build" / "casscade.zip").is_file()
    assert argv[-6:] == ["--config", "c.yaml", "--set", "spark.master=submit",
                         "--set", "spark.kafka_jars=provided"]


def test_submit_to_a_remote_master(tmp_path: Path) -> None:
    argv, local_ip, err = _submit(tmp_path, "--master", "spark://spark-master:7077",
                                  "--env", "env.tgz", "--packages", "--", "--config", "c.yaml",
                                  "--set", "spark.checkpoint=ckpt")
    assert local_ip == ""
    # the archive carries casscade: no .py zip to shadow its compiled reader
    assert argv[argv.index("--archives") + 1] == f"{Path.cwd()}/env.tgz#environment"
    assert "--py-files" not in argv
    # the driver runs where ./environment/bin/python is its own venv's (Spark starts
    # transformWithState's planning worker there), so relative paths were made absolute
    link = tmp_path / "build" / "driver" / "environment"
    assert (link / "bin" / "python").resolve() == Path(sys.executable).resolve()
    assert argv[argv.index("--config") + 1] == f"{Path.cwd()}/c.yaml"
    assert f"spark.checkpoint={Path.cwd()}/ckpt" in argv
    conf = _conf(argv)
    assert "spark.driver.host" not in conf
    assert conf["spark.pyspark.python"] == "./environment/bin/python"
    assert conf["spark.pyspark.driver.python"] == sys.executable  # the client-mode driver
    assert argv[argv.index("--packages") + 1].startswith(
        "org.apache.spark:spark-sql-kafka-0-10_2.13:")
    assert "not on this machine" not in err
    argv, _ip, err = _submit(tmp_path, "--master", "spark://spark-master:7077", "--")
    assert "spark.pyspark.python" not in _conf(argv)
    assert "not on this machine and no --env" in err
    assert "--packages" in argv  # no jars fetched into this lib dir: Ivy resolves them


def test_submit_takes_the_fetched_connector_jars_by_default(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    jars = lib / "spark-kafka"
    jars.mkdir(parents=True)
    # what `stack fetch` leaves: the jars and the stamp of the POM they were resolved from
    digest = hashlib.sha256(artifacts.pom_path("spark-kafka").read_bytes()).hexdigest()[:16]
    (jars / ".pom-sha256").write_text(digest + "\n")
    for name in ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar",
                 "scala-library-2.13.16.jar"):  # the last one the pyspark wheel ships
        (jars / name).write_bytes(b"")
    argv, _ip, err = _submit(tmp_path, "--master", "local[2]", "--", lib=lib)
    assert argv[argv.index("--jars") + 1].split(",") == [
        str(jars / "kafka-clients-3.9.2.jar"), str(jars / "spark-sql-kafka-0-10_2.13-4.2.0.jar")]
    assert "--packages" not in argv and str(jars) in err
