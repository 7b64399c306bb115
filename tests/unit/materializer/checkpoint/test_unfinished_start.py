"""A driver stopped while Spark wrote the query's first offsets leaves the temporary file of
batch 0 in the offset log; Spark then refuses every start on that checkpoint
(STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY). `clear_unfinished_start` removes exactly such
files, and nothing once a batch was planned."""

from __future__ import annotations

from pathlib import Path

from materializer.checkpoint.files import LocalFiles
from materializer.checkpoint.records import clear_unfinished_start

# what a SIGKILLed driver left, as found on disk after the soak's first driver kill
TEMP = ".0.db6700bf-af7f-4d5a-89f8-2fcd378ea7c3.tmp"
CRC = "..0.db6700bf-af7f-4d5a-89f8-2fcd378ea7c3.tmp.crc"


def _checkpoint(root: Path, offsets: list[str], commits: list[str] = ()) -> LocalFiles:
    for log, names in (("offsets", offsets), ("commits", commits)):
        (root / log).mkdir(parents=True, exist_ok=True)
        for name in names:
            (root / log / name).write_text("")
    (root / "metadata").write_text('{"id":"q"}')
    return LocalFiles(root)


def test_the_temporary_files_of_a_first_start_are_removed(tmp_path) -> None:
    files = _checkpoint(tmp_path, [TEMP, CRC, "notes.txt"])
    assert clear_unfinished_start(files) == [f"offsets/{CRC}", f"offsets/{TEMP}"]
    # anything else stays: Spark's own check still refuses a directory that is not its own
    assert files.names("offsets") == ["notes.txt"] and files.exists("metadata")
    assert clear_unfinished_start(files) == []


def test_nothing_is_removed_once_a_batch_was_planned(tmp_path) -> None:
    later = ".1.0f6d2c1e-6f0b-4b55-9d0e-1a2b3c4d5e6f.tmp"
    files = _checkpoint(tmp_path, ["0", ".0.crc", later])
    assert clear_unfinished_start(files) == []
    assert files.names("offsets") == [".0.crc", later, "0"]
