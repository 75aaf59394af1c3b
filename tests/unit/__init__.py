"""The unit tier: tests that need no database (python -m pytest tests/unit).

A package, as tests/integration is, so that a unit test module may share its name with the integration
module testing the same mempalace_pg module against the server (store/test_filters.py, test_filters.py).
"""
