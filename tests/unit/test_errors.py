"""The errors of mempalace_pg.errors: MemPalace backend errors, and ValueError where MemPalace raises one."""

from __future__ import annotations

import pytest
from mempalace.backends.base import BackendError

from mempalace_pg.errors import (
    DatabaseUnavailableError,
    ExtensionMissingError,
    InvalidRecordError,
    SchemaVersionError,
)


def test_invalid_record_error_is_a_value_error():
    assert issubclass(InvalidRecordError, ValueError)


@pytest.mark.parametrize(
    "error", [DatabaseUnavailableError, ExtensionMissingError, SchemaVersionError, InvalidRecordError]
)
def test_every_error_is_a_mempalace_backend_error(error):
    assert issubclass(error, BackendError)
