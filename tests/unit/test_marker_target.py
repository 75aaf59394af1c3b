"""A palace's marker against the current settings: which differences are refused, and the one a database
that holds the palace may have (its address: a hot standby, a pooler in front, a new name)."""

from __future__ import annotations

import pytest
from mempalace.backends.base import BackendMismatchError

from mempalace_pg.marker import check_same_target

KEYS = ("host", "port", "dbname", "schema")
RECORDED = {"host": "db.lan", "port": 5432, "dbname": "mempalace", "schema": "mempalace"}


def test_the_same_target_passes_without_asking_the_server():
    asked = []
    check_same_target(
        "/p", RECORDED, dict(RECORDED), KEYS, "fix", lambda recorded: asked.append(recorded) or True
    )
    assert asked == []


def test_another_address_is_accepted_only_when_the_database_there_holds_the_palace():
    replica = {**RECORDED, "host": "replica.lan", "port": 5433}
    seen = []
    check_same_target("/p", RECORDED, replica, KEYS, "fix", lambda recorded: seen.append(recorded) or True)
    assert seen == [RECORDED]  # asked about the palace the marker names
    with pytest.raises(BackendMismatchError, match="host='db.lan', port=5432.*host='replica.lan', port=5433"):
        check_same_target("/p", RECORDED, replica, KEYS, "fix", lambda recorded: False)
    with pytest.raises(BackendMismatchError):
        check_same_target("/p", RECORDED, replica, KEYS, "fix")


def test_another_database_or_schema_is_refused_even_where_the_palace_is():
    for changed in ({"dbname": "other"}, {"schema": "other"}, {"host": "replica.lan", "schema": "other"}):
        asked = []
        with pytest.raises(BackendMismatchError, match="fix"):
            check_same_target(
                "/p",
                RECORDED,
                {**RECORDED, **changed},
                KEYS,
                "fix",
                lambda recorded: asked.append(recorded) or True,
            )
        assert asked == []  # never asked: only an address change is explained by where the palace is reached
