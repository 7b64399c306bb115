"""A key's merge result written to its partition store: pages, entry, expiry index."""

from __future__ import annotations

from collections.abc import Callable

from materializer.key_materializer import Result
from materializer.store.layout import entry_key, pack_entry, page_key
from materializer.store.partition_store import PartitionStore


def apply_result(store: PartitionStore, key: bytes, old_timer: int | None,
                 result: Result) -> None:
    """Write one key's result to its store (`key`: the raw key): pages, entry, expiry
    index."""
    if result.schema_hash is None:
        return  # nothing usable and no state: nothing to write
    write_pages(store, key, result)
    if result.state is None:
        store.put(entry_key(key), None)
        return
    store.put(entry_key(key), pack_entry(result.state, result.schema_hash,
                                         result.next_timer_ms))
    if result.next_timer_ms is not None and result.next_timer_ms != old_timer:
        store.schedule(result.next_timer_ms, key)


def write_pages(store: PartitionStore, key: bytes, result: Result) -> None:
    """Write (or remove) the pages of a wide partition a result changed."""
    for page, blob in result.pages.items():
        store.put(page_key(page, key), blob)


def page_source(store: PartitionStore, key: bytes) -> Callable[[list[int]], list[bytes | None]]:
    """The pages of key `key` in `store`, by id (what the handler reads a wide partition
    with)."""
    return lambda ids: [store.get(page_key(i, key)) for i in ids]
