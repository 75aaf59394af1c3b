"""Segment builds' pure parts (mempalace_pg.engine.builds): the workers builds running side by side share.
tests/integration/test_backup.py sees a restore's sessions get them on the server."""

from __future__ import annotations

import pytest

from mempalace_pg.engine.builds import shared_workers


@pytest.mark.parametrize(
    "workers, sessions, each",
    [
        (2, 1, 2),  # one session: the build's own workers
        (2, 2, 0),  # two builds at once on what one build with two workers runs: three processes
        (3, 2, 1),  # four processes, two builds: one worker each
        (7, 4, 1),
        (7, 3, 1),
        (0, 1, 0),  # serial builds stay serial
        (0, 4, 0),
        (2, 8, 0),  # more sessions than processes: never below none
    ],
)
def test_sessions_building_at_once_share_one_builds_processes(workers, sessions, each):
    assert shared_workers(workers, sessions) == each
    # together they never run more processes than one build would, unless each runs alone
    assert sessions * (each + 1) <= max(workers + 1, sessions)
