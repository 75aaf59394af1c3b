"""A palace's marker against the current settings: which differences are refused, and the one a hot
standby may have (its address)."""

from __future__ import annotations

import pytest
from mempalace.backends.base import BackendMismatchError

from mempalace_pg.marker import check_same_target

KEYS = ("host", "port", "dbname", "schema")
RECORDED = {"host": "db.lan", "port": 5432, "dbname": "mempalace", "schema": "mempalace"}


def test_the_same_target_passes_without_asking_the_server():
    asked = []
    check_same_target("/p", RECORDED, dict(RECORDED), KEYS, "fix", lambda: asked.append(1) or True)
    assert asked == []


def test_another_address_is_accepted_only_when_the_server_is_a_standby():
    replica = {**RECORDED, "host": "replica.lan", "port": 5433}
    check_same_target("/p", RECORDED, replica, KEYS, "fix", lambda: True)
    with pytest.raises(BackendMismatchError, match="host='db.lan', port=5432.*host='replica.lan', port=5433"):
        check_same_target("/p", RECORDED, replica, KEYS, "fix", lambda: False)
    with pytest.raises(BackendMismatchError):
        check_same_target("/p", RECORDED, replica, KEYS, "fix")


def test_another_database_or_schema_is_refused_even_on_a_standby():
    for changed in ({"dbname": "other"}, {"schema": "other"}, {"host": "replica.lan", "schema": "other"}):
        asked = []
        with pytest.raises(BackendMismatchError, match="fix"):
            check_same_target(
                "/p", RECORDED, {**RECORDED, **changed}, KEYS, "fix", lambda: asked.append(1) or True
            )
        assert asked == []  # never asked: an address change alone is what a standby explains
