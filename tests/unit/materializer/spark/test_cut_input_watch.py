"""The worker's watch of its Arrow input (`materializer.spark.pyspark_daemon`): PySpark's own
serializer reads a stream as the JVM writes it; a stream cut where the JVM shuts its side
(after a whole batch, no end marker) reads as short, a whole one as whole."""

from __future__ import annotations

import io

import pyarrow as pa
import pytest
from pyspark.sql.pandas.serializers import ArrowStreamSerializer

from materializer.spark import pyspark_daemon
from materializer.spark.pyspark_daemon import InputCut, input_whole, watch_arrow_input

END_OF_STREAM = b"\xff\xff\xff\xfc"  # PySpark's int after the Arrow stream (SpecialLengths)


def _stream(batches: int) -> bytes:
    """An Arrow stream of `batches` batches of raw rows, ended by Arrow's end marker."""
    batch = pa.RecordBatch.from_pydict({"key": [b"k1", b"k2"], "offset": [4294967295, 7]})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        for _ in range(batches):
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _read(data: bytes) -> int:
    """Rows PySpark's serializer reads from `data` (a worker's input), the watch on."""
    watch_arrow_input()
    return sum(b.num_rows for b in ArrowStreamSerializer().load_stream(io.BytesIO(data)))


@pytest.fixture(autouse=True)
def _fresh_state():
    pyspark_daemon._last_input[0] = None
    yield
    pyspark_daemon._last_input[0] = None


def test_a_whole_stream_followed_by_pysparks_end_reads_as_whole() -> None:
    infile = io.BytesIO(_stream(3) + END_OF_STREAM)
    watch_arrow_input()
    rows = sum(b.num_rows for b in ArrowStreamSerializer().load_stream(infile))
    assert rows == 6
    input_whole()  # no InputCut
    assert infile.read() == END_OF_STREAM  # the watch read nothing past the Arrow stream


def test_a_stream_cut_after_a_whole_batch_reads_its_rows_and_is_short() -> None:
    whole = _stream(3)
    cut = whole[:-8]  # everything but the end marker: where the JVM shuts its side
    assert _read(cut) == 6  # pyarrow ends the stream there without a word
    with pytest.raises(InputCut, match="before the JVM's end-of-stream marker"):
        input_whole()


def test_a_stream_cut_before_its_last_batch_is_short_too() -> None:
    two, three = _stream(2), _stream(3)
    assert _read(two[:-8]) == 4
    with pytest.raises(InputCut):
        input_whole()
    assert _read(three) == 6  # a reused worker's next task: whole again
    input_whole()


def test_a_worker_that_did_not_watch_cannot_tell_and_commits_nothing() -> None:
    with pytest.raises(InputCut, match="cannot tell"):
        input_whole()


def test_the_watch_is_installed_once() -> None:
    watch_arrow_input()
    patched = ArrowStreamSerializer.load_stream
    watch_arrow_input()
    assert ArrowStreamSerializer.load_stream is patched


def test_pyspark_still_reads_a_map_in_arrow_input_with_this_serializer() -> None:
    import inspect

    import pyspark.worker
    from pyspark.sql.pandas import serializers

    assert "ArrowStreamSerializer(write_start_stream=True)" in inspect.getsource(pyspark.worker)
    # (the module's source on disk: what the watch wraps)
    assert "reader = pa.ipc.open_stream(stream)" in inspect.getsource(serializers)
