"""The local HDFS's pure parts (no JVM started): its ports, site files and URIs."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner

from devstack import hdfs
from devstack.hdfs_cli import hdfs as hdfs_cli
from devstack.settings import StackSettings

from support.services import free_port


@pytest.fixture
def settings(tmp_path: Path) -> StackSettings:
    return replace(StackSettings.from_env(), state_dir=tmp_path / "state")


def _props(xml: str) -> dict[str, str]:
    root = ElementTree.fromstring(xml)
    return {p.findtext("name"): p.findtext("value") for p in root.iter("property")}


def test_every_daemon_address_is_on_loopback_and_follows_the_port(settings) -> None:
    """Hadoop's defaults at 9820, all five ports moved together by CASSCADE_HDFS_PORT,
    and nothing bound beyond 127.0.0.1."""
    assert hdfs.ports(settings) == {"namenode RPC": 9820, "namenode web": 9870,
                                    "datanode data": 9866, "datanode web": 9864,
                                    "datanode IPC": 9867}
    moved = replace(settings, hdfs_port=19820)
    files = hdfs.site_files(moved)
    props = _props(files["hdfs-site.xml"]) | _props(files["core-site.xml"])
    addresses = {k: v for k, v in props.items() if k.endswith("address")}
    assert len(addresses) == 5
    assert {v.split(":")[0] for v in addresses.values()} == {"127.0.0.1"}
    assert sorted(int(v.split(":")[1]) for v in addresses.values()) == sorted(
        hdfs.ports(moved).values())
    assert props["fs.defaultFS"] == "hdfs://127.0.0.1:19820/"
    # its data stays under the stack's state directory
    for key in ("dfs.namenode.name.dir", "dfs.datanode.data.dir", "hadoop.tmp.dir"):
        assert Path(props[key]).is_relative_to(settings.state_dir), key


def test_uris_name_the_namenode(settings) -> None:
    assert hdfs.uri(settings, "/casscade/ckpt") == "hdfs://127.0.0.1:9820/casscade/ckpt"
    assert hdfs.uri(settings, "x") == "hdfs://127.0.0.1:9820/x"


def test_the_hadoop_version_is_the_pyspark_wheels() -> None:
    """The daemons' jars and Spark's Hadoop client are one version (the pom's property and
    the wheel's hadoop-client-api jar)."""
    import pyspark

    pom = (Path(__file__).resolve().parents[3] / "deploy" / "local" / "maven" / "hdfs"
           / "pom.xml").read_text()
    version = re.search(r"<hadoop.version>([^<]+)<", pom).group(1)
    jars = Path(pyspark.__file__).parent / "jars"
    assert (jars / f"hadoop-client-api-{version}.jar").is_file(), sorted(
        p.name for p in jars.glob("hadoop-client-api-*"))


def test_the_cli_says_in_one_line_what_is_not_there(monkeypatch, tmp_path: Path) -> None:
    """With no HDFS at its port: `status` exits 3, and `fs` (a JVM's `hadoop fs`) ends with
    one error naming the command, not a Python traceback."""
    monkeypatch.setenv("CASSCADE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("CASSCADE_HDFS_PORT", str(free_port()))
    runner = CliRunner()
    status = runner.invoke(hdfs_cli, ["status"])
    assert status.exit_code == 3, status.output
    assert "namenode   not running" in status.output
    listed = runner.invoke(hdfs_cli, ["fs", "--user", "someone", "-ls", "/"])
    assert listed.exit_code == 1, listed.output
    assert listed.exception is None or isinstance(listed.exception, SystemExit), \
        listed.exception
    assert "hadoop fs -ls / failed" in listed.output, listed.output
