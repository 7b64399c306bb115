"""The ring's test environment, shared by every module here: one set of publishers, the
sessions, one raw topic prefix for the whole session."""

from __future__ import annotations

import uuid

import pytest

from support.ring_harness import RingPublishers, pinned_sessions, session_at_all


@pytest.fixture(scope="session")
def env(ring, tmp_path_factory):
    """Publishers on the three nodes under one prefix; sessions pinned to each node and one
    that reads at ALL. Each test works in keyspaces of its own."""
    work = tmp_path_factory.mktemp("ring")
    prefix = f"ring{uuid.uuid4().hex[:6]}"
    publishers = RingPublishers(ring, work, prefix)
    publishers.start()
    sessions = pinned_sessions(ring)
    truth = session_at_all(ring)
    try:
        yield {"ring": ring, "work": work, "prefix": prefix, "publishers": publishers,
               "sessions": sessions, "truth": truth}
    finally:
        publishers.stop()
        for s in (*sessions.values(), truth):
            s.cluster.shutdown()
