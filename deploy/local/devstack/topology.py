"""Changes to a running ring's membership: a node joins by streaming (bootstrap), leaves
(decommission), takes a dead node's place with empty disks (replace), or is removed while
dead (removenode); each waits until node 1's `nodetool status` shows the result.

Every function takes the settings of one node (`StackSettings.node(n)`, with what else it
should start with, e.g. `cdc_on_repair_enabled` or `ring_delay_ms`); node 1 is the seed and
neither joins nor is replaced here (a seed does not bootstrap).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from dataclasses import replace

from devstack import cassandra, stack
from devstack.process import StackError
from devstack.settings import StackSettings
from devstack.stack import Log


def wait_state(s: StackSettings, host: str, state: str | None,
               timeout_s: float = 180.0) -> dict[str, str]:
    """Block until node 1's `nodetool status` shows `host` in `state` (UN, DN, UJ, ...; None:
    not listed, as after it left); returns every node's state then."""
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(StackError, subprocess.TimeoutExpired):
            states = cassandra.ring_states(s.node(1))
            if states.get(host) == state:
                return states
        time.sleep(2.0)
    raise StackError(f"node 1 did not show {host} {state or 'gone'} within {timeout_s:.0f}s: "
                     f"{states or 'nodetool status did not answer'}")


def _not_the_seed(s: StackSettings, what: str) -> None:
    if s.node_index == 1:
        raise StackError(f"node 1 is the ring's seed: a seed does not bootstrap, so it cannot "
                         f"{what}")


def join(s: StackSettings, log: Log = print, timeout_s: float = 600.0) -> float:
    """Add node `s` (stopped, with empty disks) to the running ring with auto_bootstrap: it
    streams the ranges it takes from the nodes that hold them; waits until it answers CQL
    and node 1 shows it UN. Returns the seconds that took."""
    _not_the_seed(s, "join")
    if cassandra.running_pid(s) is not None:
        raise StackError(f"node {s.node_index} runs already")
    if cassandra.recorded_version(s) is not None:
        raise StackError(f"node {s.node_index} holds data ({s.cassandra_dir}): a node joins "
                         f"with empty disks (`stack node {s.node_index} wipe` empties them)")
    stack.require_bindable(s.host)
    started = time.monotonic()
    # Its CQL answers once it has joined: the wait covers the streaming
    stack.start_node(replace(s, auto_bootstrap=True), log=log, timeout_s=timeout_s)
    wait_state(s, s.host, "UN")
    return time.monotonic() - started


def decommission(s: StackSettings, timeout_s: float = 600.0) -> float:
    """`nodetool decommission` of node `s`: its ranges stream to the nodes that take them
    over; waits until node 1 no longer lists it, then stops it. Returns the seconds until
    it had left."""
    started = time.monotonic()
    cassandra.nodetool(s, "decommission", timeout_s=timeout_s)
    wait_state(s, s.host, None)
    seconds = time.monotonic() - started
    # A decommissioned node stays up, out of the ring, until it is stopped. No drain: the
    # decommission stopped the mutation stages, so 5.0.8's drain only logs "Cannot drain
    # node (did it already happen?)" and leaves the commit log open; its last segment never
    # gets COMPLETED, and its publisher sends it up to the last synced position.
    cassandra.shutdown(s, drain=False)
    return seconds


def replace_dead(s: StackSettings, log: Log = print, timeout_s: float = 600.0) -> float:
    """Node `s`, dead (not running; node 1 must see it down), started again as a new
    machine at the same address: its disks emptied, -Dcassandra.replace_address_first_boot
    naming its own address, so it takes its old tokens and streams their data from the
    other replicas; waits until it answers CQL and node 1 shows it UN. Returns the seconds
    from its start."""
    _not_the_seed(s, "be replaced")
    if cassandra.running_pid(s) is not None:
        raise StackError(f"node {s.node_index} runs: a replacement takes a dead node's place")
    # Cassandra refuses to replace a node the ring still sees alive
    wait_state(s, s.host, "DN", timeout_s=90)
    cassandra.wipe(s)
    started = time.monotonic()
    stack.start_node(replace(s, replace_address=s.host), log=log, timeout_s=timeout_s)
    wait_state(s, s.host, "UN")
    return time.monotonic() - started


def remove_dead(s: StackSettings, timeout_s: float = 600.0) -> bool:
    """`nodetool removenode` (through node 1) of node `s`, which must be down: the other
    nodes stream its ranges among themselves, for a node that cannot decommission itself.
    False when node 1 does not list it."""
    ids = cassandra.parse_host_ids(cassandra.nodetool(s.node(1), "status", timeout_s=60))
    if s.host not in ids:
        return False
    wait_state(s, s.host, "DN", timeout_s=90)
    cassandra.nodetool(s.node(1), "removenode", ids[s.host], timeout_s=timeout_s)
    wait_state(s, s.host, None)
    return True
