"""What a node of the ring starts with for a topology change (bootstrap, replace,
cdc_on_repair_enabled, a ring delay of its own), nodetool status's host IDs, and a node's
disks emptied: all pure or files only, no JVM started."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from devstack import artifacts, cassandra
from devstack import cassandra_versions as versions
from devstack.cli import _on_repair
from devstack.process import StackError
from devstack.settings import StackSettings


def _ring(tmp_path: Path, version: str = "5.0") -> StackSettings:
    return StackSettings(state_dir=tmp_path / "state", lib_root=tmp_path / "lib", nodes=3,
                         cassandra_version=version)


def _conf(s: StackSettings) -> dict:
    return yaml.safe_load(cassandra.render_yaml(s))


def test_only_node_1_bootstraps_unless_a_node_is_told_to(tmp_path: Path) -> None:
    ring = _ring(tmp_path)
    assert [_conf(n)["auto_bootstrap"] for n in ring.all_nodes()] == [True, False, False]
    assert _conf(replace(ring.node(4), auto_bootstrap=True))["auto_bootstrap"] is True
    # a replacement streams the dead node's data: it bootstraps without being told
    assert _conf(replace(ring.node(3), replace_address="127.0.0.3"))["auto_bootstrap"] is True
    assert _conf(replace(ring.node(1), auto_bootstrap=False))["auto_bootstrap"] is False


def test_a_replacement_that_would_not_bootstrap_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="auto_bootstrap cannot be false"):
        replace(_ring(tmp_path).node(3), replace_address="127.0.0.3", auto_bootstrap=False)


def test_cdc_on_repair_enabled_is_true_unless_set_on_5_0(tmp_path: Path) -> None:
    ring = _ring(tmp_path)
    assert _conf(ring.node(2))["cdc_on_repair_enabled"] is True
    assert _conf(replace(ring.node(2), cdc_on_repair_enabled=False))[
        "cdc_on_repair_enabled"] is False


@pytest.mark.parametrize("version", ["4.0", "4.1"])
def test_4x_has_no_cdc_on_repair_enabled_and_refuses_false(tmp_path: Path,
                                                             version: str) -> None:
    text = cassandra.render_yaml(_ring(tmp_path, version).node(2))
    assert "cdc_on_repair_enabled" not in yaml.safe_load(text)
    assert "# cdc_on_repair_enabled: left out (5.0 only;" in text
    with pytest.raises(ValueError, match="no cdc_on_repair_enabled"):
        replace(_ring(tmp_path, version), cdc_on_repair_enabled=False)
    with pytest.raises(ValueError, match=r"cdc_on_repair_enabled: false cannot be had"):
        versions.adapt_yaml("cdc_on_repair_enabled: false\n", versions.line(version))


def test_the_stack_cli_turns_a_refused_choice_into_a_usage_error(tmp_path: Path) -> None:
    import click

    ring = _ring(tmp_path, "4.1")
    assert _on_repair(ring, None) is ring
    assert _on_repair(ring, True).cdc_on_repair_enabled is True
    with pytest.raises(click.BadParameter, match="no cdc_on_repair_enabled"):
        _on_repair(ring, False)


def test_replacement_and_ring_delay_are_jvm_properties_only_when_set(tmp_path: Path) -> None:
    node = _ring(tmp_path).node(3)
    lib = artifacts.lib_dir(node.lib_dir, node.cassandra_line.component)
    lib.mkdir(parents=True)
    (lib / "jamm-0.4.0.jar").write_bytes(b"")
    java = Path("/j/bin/java")
    plain = cassandra.server_command(node, java)
    assert not [a for a in plain if "replace_address" in a or "ring_delay" in a]
    cmd = cassandra.server_command(
        replace(node, replace_address="127.0.0.3", ring_delay_ms=5000), java)
    extra = [a for a in cmd if a not in plain]
    assert extra == ["-Dcassandra.replace_address_first_boot=127.0.0.3",
                     "-Dcassandra.ring_delay_ms=5000"]
    # system properties: before the main class, or the JVM hands them to Cassandra as args
    assert cmd.index(extra[0]) < cmd.index("org.apache.cassandra.service.CassandraDaemon")


def test_nodetool_status_gives_each_nodes_host_id() -> None:
    out = """Datacenter: datacenter1
=======================
Status=Up/Down
|/ State=Normal/Leaving/Joining/Moving
--  Address    Load        Tokens  Owns (effective)  Host ID                               Rack
UN  127.0.0.3  114.85 KiB  16      67.2%             2af7d819-e9c1-4b35-a001-695f95c28a72  rack1
DN  127.0.0.4  ?           16      74.9%             9fa0a667-59af-4270-8ee8-f1c13f30a60a  rack1
UJ  127.0.0.1  114.93 KiB  16      ?                 97621ee3-953b-412f-8375-2783229bbf82  rack1
"""
    assert cassandra.parse_host_ids(out) == {
        "127.0.0.3": "2af7d819-e9c1-4b35-a001-695f95c28a72",
        "127.0.0.4": "9fa0a667-59af-4270-8ee8-f1c13f30a60a",
        "127.0.0.1": "97621ee3-953b-412f-8375-2783229bbf82"}
    assert cassandra.parse_host_ids("Datacenter: datacenter1\n") == {}


def test_wipe_empties_a_stopped_nodes_disks_and_keeps_its_logs(tmp_path: Path) -> None:
    node = _ring(tmp_path).node(4)
    for sub in (*cassandra.STATE_DIRS, "logs", "conf"):
        (node.cassandra_dir / sub).mkdir(parents=True)
        (node.cassandra_dir / sub / "f").write_text(sub)
    (node.cassandra_dir / "data" / "system").mkdir()
    cassandra.version_file(node).write_text("5.0\n")
    assert cassandra.recorded_version(node) == "5.0"
    cassandra.wipe(node)
    assert cassandra.recorded_version(node) is None  # a fresh node to `join` or replace
    assert sorted(p.name for p in node.cassandra_dir.iterdir()) == ["conf", "logs"]
    assert (node.cassandra_dir / "logs" / "f").read_text() == "logs"


def test_wipe_refuses_a_running_node(tmp_path: Path) -> None:
    node = _ring(tmp_path).node(4)
    (node.cassandra_dir / "data").mkdir(parents=True)
    cassandra.pid_file(node).write_text(f"{os.getpid()}\n")  # a live pid: "running"
    with pytest.raises(StackError, match="node 4 runs"):
        cassandra.wipe(node)
    assert (node.cassandra_dir / "data").is_dir()
