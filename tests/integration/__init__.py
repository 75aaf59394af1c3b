"""The integration tier: tests against a real PostgreSQL with pgvector and Apache AGE (never a mock).

A package, as tests/unit is, so that module names may repeat across the tiers.
"""
