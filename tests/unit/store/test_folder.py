"""The folder's plan (mempalace_pg.store.folder): which segments it merges, decided without a database.
tests/integration/test_indexing.py runs folders against the server."""

from __future__ import annotations

from mempalace_pg.store import indexing
from mempalace_pg.store.folder import Folder


def segment(rows: int, lo: int = 0) -> tuple[str, int, int, int]:
    return (f"s{lo}", lo, lo + rows, rows)


def test_merges_leave_full_segments_as_they_are():
    full = indexing.SEGMENT_ROWS
    big = segment(full)
    newer = [segment(10_000, full)]
    newer += [segment(900, full + 10_000 + i * 1000) for i in range(indexing.MAX_SEGMENTS)]
    # a pause merges the open segments only: a merge with the full one would take it past SEGMENT_ROWS
    assert Folder.open_segments([big, *newer]) == newer
    assert Folder.merge_plan([big, *newer], quiet=True) == newer
    # under sustained writes, only once the open ones are too many: then the newest ones that hold no
    # more rows than the segment before them
    assert Folder.merge_plan([big, *newer[:3]], quiet=False) == []
    assert Folder.merge_plan([big, *newer], quiet=False) == newer[1:]
    # folds that grow with the tail (a folder behind the writer): merged only up to BUSY_MERGE_ROWS
    slow = [segment(3000 + 500 * i, 10**5 * i) for i in range(8)]
    assert Folder.merge_plan(slow, quiet=False) == slow[-3:]
    assert sum(s[3] for s in slow[-3:]) <= indexing.BUSY_MERGE_ROWS < sum(s[3] for s in slow[-4:])
    doubling = [segment(4000 * 2**i, 10**6 * i) for i in range(5)]
    assert Folder.merge_plan(doubling, quiet=False) == []
    # below SEGMENT_ROWS in all, a pause merges everything into one
    small = [segment(1000, i * 1000) for i in range(3)]
    assert Folder.merge_plan(small, quiet=True) == small


def test_nothing_to_merge_in_one_segment_or_none():
    assert Folder.open_segments([]) == []
    for quiet in (True, False):
        assert Folder.merge_plan([], quiet=quiet) == []
        assert Folder.merge_plan([segment(10)], quiet=quiet) == []
        # full segments are never merged, however many
        assert (
            Folder.merge_plan([segment(indexing.SEGMENT_ROWS, i * 10**6) for i in range(5)], quiet=quiet)
            == []
        )
