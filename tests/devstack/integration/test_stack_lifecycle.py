"""deploy/local/stack end to end: up twice is harmless, status tells, down leaves nothing.

Runs a second, private stack (own state directory, own ports) through the real script, so
the session's stack is untouched.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from devstack import cassandra, kafka
from devstack.process import pid_alive, port_in_use
from devstack.settings import StackSettings, repo_root

pytestmark = pytest.mark.integration

PORTS = {"CASSCADE_KAFKA_PORT": "29092", "CASSCADE_KAFKA_CONTROLLER_PORT": "29093",
         "CASSCADE_CQL_PORT": "29042", "CASSCADE_STORAGE_PORT": "27000",
         "CASSCADE_JMX_PORT": "27199"}


def _stack(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(repo_root() / "deploy" / "local" / "stack"), *args], env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_up_twice_status_down(stack, tmp_path: Path) -> None:
    # the stack's defaults: the JVMs' own JIT, not the C1 the session's stack runs
    env = {k: v for k, v in os.environ.items() if k != "CASSCADE_SERVER_JIT"}
    env.update(CASSCADE_STATE_DIR=str(tmp_path / "state"), **PORTS)
    settings = StackSettings(state_dir=tmp_path / "state", kafka_port=29092,
                             kafka_controller_port=29093, cql_port=29042, storage_port=27000,
                             jmx_port=27199)
    try:
        first = _stack(env, "up")
        assert first.returncode == 0, first.stderr
        assert "kafka: started" in first.stdout and "started, ready in" in first.stdout
        pids = (kafka.running_pid(settings), cassandra.running_pid(settings))
        assert all(pids)
        for pid in pids:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            assert not [o for o in argv if o.startswith(b"-XX:TieredStopAtLevel")], argv

        second = _stack(env, "up")
        assert second.returncode == 0, second.stderr
        assert "kafka: already running" in second.stdout
        assert "already running" in second.stdout.split("cassandra", 1)[1]
        assert (kafka.running_pid(settings), cassandra.running_pid(settings)) == pids

        status = _stack(env, "status")
        assert status.returncode == 0
        assert f"pid {pids[0]}" in status.stdout and f"pid {pids[1]}" in status.stdout
        assert "CQL 127.0.0.1:29042" in status.stdout

        flush = _stack(env, "nodetool", "flush")
        assert flush.returncode == 0, flush.stderr
    finally:
        down = _stack(env, "down")
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(p) for p in pids)
    assert not any(port_in_use(int(p)) for p in PORTS.values())
    after = _stack(env, "status")
    assert after.returncode == 3
    assert "kafka      not running" in after.stdout


def test_taken_port_is_refused_clearly(stack, tmp_path: Path) -> None:
    # The session stack holds 9092/9042: a second stack on the same ports must refuse.
    env = dict(os.environ, CASSCADE_STATE_DIR=str(tmp_path / "other"),
               CASSCADE_KAFKA_PORT=str(stack.kafka_port), CASSCADE_CQL_PORT=str(stack.cql_port))
    result = _stack(env, "up")
    assert result.returncode != 0
    assert f"port already in use: kafka 127.0.0.1:{stack.kafka_port}" in result.stderr
    assert not (tmp_path / "other" / "kafka" / "kafka.pid").exists()
