"""The folder's plan (mempalace_pg.engine.folder): which segments it merges, decided without a database.
tests/integration/test_indexing.py runs folders against the server."""

from __future__ import annotations

from mempalace_pg.engine import indexing
from mempalace_pg.engine.folder import Folder

CAPACITY = 700_000  # rows one build fits in memory


def segment(rows: int, lo: int = 0) -> tuple[str, int, int, int]:
    return (f"s{lo}", lo, lo + rows, rows)


def test_merges_leave_full_segments_as_they_are():
    big = segment(CAPACITY - 5_000)
    newer = [segment(10_000, CAPACITY)]
    newer += [segment(900, CAPACITY + 10_000 + i * 1000) for i in range(indexing.MAX_SEGMENTS)]
    # a pause merges the open segments only: a merge with the full one would not fit one build
    assert Folder.open_segments([big, *newer], CAPACITY) == newer
    assert Folder.merge_plan([big, *newer], True, CAPACITY) == newer
    # under sustained writes, only once the open ones are too many, and then in tiers of similar size:
    # three small folds beside a larger one wait for a fourth
    assert Folder.merge_plan([big, *newer[:3]], False, CAPACITY) == []
    assert Folder.merge_plan([big, *newer], False, CAPACITY) == []
    fourth = segment(900, CAPACITY + 20_000)
    assert Folder.merge_plan([big, *newer, fourth], False, CAPACITY) == [*newer[1:], fourth]
    # folds that grow with the tail (a folder behind the writer) are of similar size
    slow = [segment(3000 + 500 * i, 10**5 * i) for i in range(8)]
    assert Folder.merge_plan(slow, False, CAPACITY) == slow
    doubling = [segment(4000 * 2**i, 10**6 * i) for i in range(5)]
    assert Folder.merge_plan(doubling, False, CAPACITY) == []


def test_under_writes_each_row_is_rebuilt_about_once_per_tier():
    # a writer held to the folder's pace (mempalace_pg.engine.backlog) leaves folds of a few thousand rows
    segments, hi, built = [], 0, 0
    while hi < 1_000_000:
        segments.append(segment(4_500, hi))
        hi += 4_500
        built += 4_500
        while plan := Folder.merge_plan(segments, False, CAPACITY):
            first = segments.index(plan[0])
            rows = sum(s[3] for s in plan)
            built += rows
            segments[first : first + len(plan)] = [(f"m{plan[0][1]}", plan[0][1], plan[-1][2], rows)]
    assert built / hi < 4  # a fold, then tiers
    assert len(segments) <= 1_000_000 // (indexing.TIER_MERGE_ROWS // 2)


def test_under_writes_folds_of_similar_size_are_merged_in_tiers():
    # quick young folds come out of a similar size: the rule above never merges them
    equal = [segment(20_000, 10**5 * i) for i in range(5)]
    assert Folder.merge_plan(equal, False, CAPACITY) == equal
    assert Folder.merge_plan(equal[: indexing.MAX_SEGMENTS], False, CAPACITY) == []
    # uneven ones too, while none is more than TIER_SPREAD times their mean; a larger older one stays
    uneven = [segment(80_000, 0)] + [
        segment(rows, 10**5 * (i + 1)) for i, rows in enumerate((4_000, 20_000, 30_000, 10_000))
    ]
    assert Folder.merge_plan(uneven, False, CAPACITY) == uneven[1:]
    # never more rows than TIER_MERGE_ROWS at once: the tail grows while a merge runs
    large = [segment(indexing.TIER_MERGE_ROWS // 3, 10**6 * i) for i in range(5)]
    assert Folder.merge_plan(large, False, CAPACITY) == []
    quarters = [segment(indexing.TIER_MERGE_ROWS // 4, 10**6 * i) for i in range(5)]
    assert Folder.merge_plan(quarters, False, CAPACITY) == quarters[1:]


def test_a_quiet_palace_converges_to_as_few_segments_as_memory_allows():
    # 300k rows in five segments, as sustained writes leave them: a pause merges all five (no row cap)
    sizes = (120_000, 80_000, 50_000, 30_000, 20_000)
    five = [segment(rows, lo) for lo, rows in enumerate(sizes)]
    assert Folder.merge_plan(five, True, CAPACITY) == five
    # a million: the newest run that fits one build is merged, and what is left is full
    million = [segment(250_000, i) for i in range(4)]
    plan = Folder.merge_plan(million, True, CAPACITY)
    assert plan == million[-2:]
    merged = [*million[:2], segment(500_000, 9)]
    # the newest is as full as a merge may make it: the run before it is merged next
    assert Folder.merge_plan(merged, True, CAPACITY) == million[:2]
    assert Folder.merge_plan([segment(500_000), segment(500_000, 9)], True, CAPACITY) == []
    # many small segments behind a full one (merges under sustained writes, then a pause)
    behind = [segment(20_000, i) for i in range(15)] + [segment(CAPACITY, 99)]
    assert Folder.merge_plan(behind, True, CAPACITY) == behind[:-1]
    # a tiny palace: everything into one
    small = [segment(1000, i * 1000) for i in range(3)]
    assert Folder.merge_plan(small, True, CAPACITY) == small


def test_a_few_new_rows_do_not_cost_a_rebuild_of_a_large_segment():
    big = segment(300_000)
    trickle = [segment(50, 300_000 + i) for i in range(indexing.MAX_SEGMENTS)]
    # one or two small segments beside it stay until they are worth a rebuild of the large one
    assert Folder.merge_plan([big, *trickle[:2]], True, CAPACITY) == []
    # more than MAX_SEGMENTS: the small ones are merged among themselves, not into the large one
    assert Folder.merge_plan([big, *trickle], True, CAPACITY) == trickle
    # once they hold 1/WORTH_REBUILD of it, everything is rebuilt as one
    grown = segment(300_000 // indexing.WORTH_REBUILD, 300_000)
    assert Folder.merge_plan([big, grown], True, CAPACITY) == [big, grown]


def test_nothing_to_merge_in_one_segment_or_none():
    assert Folder.open_segments([], CAPACITY) == []
    for quiet in (True, False):
        assert Folder.merge_plan([], quiet, CAPACITY) == []
        assert Folder.merge_plan([segment(10)], quiet, CAPACITY) == []
        # full segments are never merged, however many
        assert Folder.merge_plan([segment(CAPACITY, i * 10**6) for i in range(5)], quiet, CAPACITY) == []


def test_the_folder_process_starts_without_mempalaces_backends():
    """The process ensure_folder starts imports MemPalace's backend base alone: not the backends package,
    which imports chromadb, each time a folder starts."""
    from fresh_python import last_line

    code = (
        "import sys\n"
        "from mempalace_pg import backend_base\n"
        "backend_base.load()\n"
        "import mempalace_pg.engine.folder\n"
        "from mempalace_pg.errors import BusyError\n"
        "from mempalace.backends.base import BackendError\n"
        "assert issubclass(BusyError, BackendError)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mempalace', 'chromadb')))\n"
    )
    assert last_line(code) == "['mempalace.backends.base']"
