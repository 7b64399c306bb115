"""The local stack's pure parts: rendered configs, settings, pid-file process handling."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from devstack import artifacts, cassandra, kafka, process
from devstack.process import StackError
from devstack.settings import StackSettings


@pytest.fixture
def settings(tmp_path: Path) -> StackSettings:
    return replace(StackSettings.from_env(), state_dir=tmp_path / "state")


def test_cassandra_yaml_renders_cdc_on_loopback(settings: StackSettings) -> None:
    text = cassandra.render_yaml(settings)
    assert "${" not in text
    conf = yaml.safe_load(text)
    assert conf["cdc_enabled"] is True
    assert conf["cdc_block_writes"] is True
    assert conf["commitlog_sync"] == "periodic"
    assert conf["commitlog_sync_period"] == "1000ms"
    assert conf["listen_address"] == conf["rpc_address"] == "127.0.0.1"
    assert conf["native_transport_port"] == settings.cql_port
    assert conf["storage_compatibility_mode"] == "CASSANDRA_4"
    node = str(settings.cassandra_dir)
    assert conf["cdc_raw_directory"] == f"{node}/cdc_raw"
    assert conf["commitlog_directory"] == f"{node}/commitlog"
    assert conf["hints_directory"] == f"{node}/hints"
    assert conf["data_file_directories"] == [f"{node}/data"]
    assert "commitlog_compression" not in conf


def test_cassandra_yaml_compression_and_mode(settings: StackSettings) -> None:
    s = replace(settings, storage_compatibility_mode="NONE",
                commitlog_compression="ZstdCompressor")
    conf = yaml.safe_load(cassandra.render_yaml(s))
    assert conf["storage_compatibility_mode"] == "NONE"
    assert conf["commitlog_compression"] == [{"class_name": "ZstdCompressor"}]


def test_kafka_properties_bind_only_loopback(settings: StackSettings) -> None:
    props = dict(line.split("=", 1) for line in kafka.server_properties(settings).splitlines()
                 if line and not line.startswith("#"))
    for key in ("listeners", "advertised.listeners", "controller.quorum.voters"):
        hosts = re.findall(r"(?://|@)([^:/,]+):\d+", props[key])
        assert hosts and set(hosts) == {"127.0.0.1"}, (key, props[key])
    assert props["auto.create.topics.enable"] == "false"
    assert props["log.dirs"].startswith(str(settings.kafka_dir))


def test_cluster_id_shape() -> None:
    ids = {kafka.new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", i) for i in ids)


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CASSCADE_KAFKA_PORT", raising=False)  # (make test's ring section sets it)
    monkeypatch.delenv("CASSCADE_SERVER_JIT", raising=False)  # (the integration tests set it)
    monkeypatch.setenv("CASSCADE_STATE_DIR", str(tmp_path / "x"))
    monkeypatch.setenv("CASSCADE_CQL_PORT", "19999")
    monkeypatch.setenv("CASSCADE_STORAGE_COMPATIBILITY_MODE", "NONE")
    s = StackSettings.from_env()
    assert s.state_dir == (tmp_path / "x").resolve()
    assert s.cql_port == 19999
    assert s.kafka_port == 9092
    assert s.storage_compatibility_mode == "NONE"
    assert s.cdc_raw_dir == s.state_dir / "cassandra" / "cdc_raw"
    assert s.server_jit == "tiered"
    monkeypatch.setenv("CASSCADE_SERVER_JIT", "c1")
    assert StackSettings.from_env().server_jit == "c1"


def test_server_jit_reaches_every_jvm_of_the_stack(settings: StackSettings,
                                                  tmp_path: Path) -> None:
    lib = tmp_path / "lib" / "cassandra"
    lib.mkdir(parents=True)
    (lib / "jamm-0.4.0.jar").write_bytes(b"")
    java = Path("/usr/bin/java")
    for jit, options in (("tiered", []), ("c1", ["-XX:TieredStopAtLevel=1"])):
        s = replace(settings, lib_root=tmp_path / "lib", server_jit=jit)
        for cmd in (cassandra.server_command(s, java), cassandra.nodetool_command(s, java),
                    kafka._java_cmd(s, java, "kafka.Kafka")):
            assert [o for o in cmd if o.startswith("-XX:TieredStopAtLevel")] == options
    with pytest.raises(ValueError, match="server_jit 'c2': one of tiered, c1"):
        replace(settings, server_jit="c2")


def test_cassandra_command_has_jdk17_essentials(settings: StackSettings,
                                                tmp_path: Path) -> None:
    lib = tmp_path / "lib" / "cassandra"
    lib.mkdir(parents=True)
    (lib / "jamm-0.4.0.jar").write_bytes(b"")
    s = replace(settings, lib_root=tmp_path / "lib")
    cmd = cassandra.server_command(s, Path("/usr/bin/java"))
    assert f"-javaagent:{lib / 'jamm-0.4.0.jar'}" in cmd
    assert "-Dcassandra-foreground=yes" in cmd
    assert f"-Dcassandra.jmx.local.port={s.jmx_port}" in cmd
    assert cmd[-1] == "org.apache.cassandra.service.CassandraDaemon"
    assert f"-Xmx{s.cassandra_heap}" in cmd
    tool = cassandra.nodetool_command(s, Path("/usr/bin/java"), "flush", "ks")
    assert tool[-6:] == ["-h", "127.0.0.1", "-p", str(s.jmx_port), "flush", "ks"]


def test_missing_jamm_is_a_clear_error(settings: StackSettings, tmp_path: Path) -> None:
    s = replace(settings, lib_root=tmp_path / "empty")
    with pytest.raises(StackError, match="no jamm jar"):
        cassandra.server_command(s, Path("/usr/bin/java"))


def test_java_major_of_this_machine() -> None:
    java = artifacts.find_java()
    assert artifacts.java_major(java) == 17


def test_java_major_unreadable(tmp_path: Path) -> None:
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho nothing >&2\n")
    fake.chmod(0o755)
    assert artifacts.java_major(fake) is None


def test_spawn_and_stop_by_pid_file(tmp_path: Path) -> None:
    pid_file = tmp_path / "p.pid"
    log = tmp_path / "p.log"
    pid = process.spawn([sys.executable, "-c", "import time; print('up', flush=True); "
                         "time.sleep(60)"], pid_file, log, cwd=tmp_path)
    assert process.read_pid(pid_file) == pid
    assert process.stop(pid_file, timeout_s=10) is True
    assert not process.pid_alive(pid)
    assert not pid_file.exists()
    assert process.stop(pid_file) is False  # second stop: nothing to do


def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    pid_file = tmp_path / "p.pid"
    code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)")
    pid = process.spawn([sys.executable, "-c", code], pid_file, tmp_path / "l", cwd=tmp_path)
    for _ in range(50):
        if (tmp_path / "l").read_text().strip() == "ready":
            break
        subprocess.run(["sleep", "0.1"], check=True)
    assert process.stop(pid_file, timeout_s=1) is True
    assert not process.pid_alive(pid)


def test_stale_pid_file_is_not_running(tmp_path: Path) -> None:
    pid_file = tmp_path / "stale.pid"
    proc = subprocess.Popen(["true"])
    proc.wait()
    pid_file.write_text(f"{proc.pid}\n")
    assert process.read_pid(pid_file) is None
    pid_file.write_text("garbage")
    assert process.read_pid(pid_file) is None


def test_port_checks() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert process.port_in_use(port)
        with pytest.raises(StackError, match=f"port already in use: x 127.0.0.1:{port}"):
            process.require_free_ports({"x": port})
    assert not process.port_in_use(port)
    process.require_free_ports({"x": port})


def _fake_java(path: Path, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2024-01-01\' >&2\n')
    path.chmod(0o755)
    return path


def test_find_java_prefers_a_java_home_17(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    java = _fake_java(tmp_path / "jdk17" / "bin" / "java", "17.0.9")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk17"))
    assert artifacts.find_java() == java


def test_find_java_without_17_names_what_it_found(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    _fake_java(tmp_path / "jdk11" / "bin" / "java", "11.0.2")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk11"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(artifacts, "JVM_ROOT", tmp_path / "nojvms")
    with pytest.raises(StackError, match=r"Java 17 is required.*jdk11/bin/java \(Java 11\)"):
        artifacts.find_java()


def test_missing_maven_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(StackError, match=r"Maven \(mvn\) is required"):
        artifacts.find_maven()


def test_ring_nodes_have_their_own_address_dirs_and_jmx(settings: StackSettings) -> None:
    ring = replace(settings, nodes=3)
    nodes = ring.all_nodes()
    assert [n.host for n in nodes] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert [n.node_jmx_port for n in nodes] == [7199, 7200, 7201]
    assert nodes[0].cassandra_dir == settings.cassandra_dir  # node 1 is the one-node stack's
    assert len({n.cassandra_dir for n in nodes}) == 3
    assert len({n.cdc_raw_dir for n in nodes}) == 3
    for n in nodes:
        conf = yaml.safe_load(cassandra.render_yaml(n))
        assert conf["listen_address"] == conf["rpc_address"] == n.host
        assert conf["native_transport_port"] == settings.cql_port  # same ports on each
        assert conf["seed_provider"][0]["parameters"][0]["seeds"] == "127.0.0.1:7000"
        assert conf["hints_directory"] == f"{n.cassandra_dir}/hints"
        assert conf["auto_bootstrap"] is (n.node_index == 1)
    with pytest.raises(ValueError, match="numbered 1 to"):
        ring.node(0)


def test_nodetool_status_lines_give_each_nodes_state() -> None:
    out = """Datacenter: datacenter1
=======================
Status=Up/Down
|/ State=Normal/Leaving/Joining/Moving
--  Address    Load        Tokens  Owns (effective)  Host ID                               Rack
UN  127.0.0.3  114.85 KiB  16      67.2%             2af7d819-e9c1-4b35-a001-695f95c28a72  rack1
DN  127.0.0.2  114.86 KiB  16      74.9%             9fa0a667-59af-4270-8ee8-f1c13f30a60a  rack1
UJ  127.0.0.1  114.93 KiB  16      57.9%             97621ee3-953b-412f-8375-2783229bbf82  rack1
"""
    assert cassandra.parse_ring_states(out) == {
        "127.0.0.3": "UN", "127.0.0.2": "DN", "127.0.0.1": "UJ"}


def test_a_ring_refuses_an_address_it_cannot_bind() -> None:
    from devstack.stack import require_bindable

    require_bindable("127.0.0.2")  # Linux: all of 127/8 is loopback
    with pytest.raises(StackError, match=r"cannot bind 192\.0\.2\.1"):
        require_bindable("192.0.2.1")  # TEST-NET-1: never this machine's
