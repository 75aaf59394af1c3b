"""Maintenance asks a building folder to ANALYZE after: sql/0018_analyze_asked.sql

Revision ID: 0018_analyze_asked
Revises: 0017_listing_keys
Create Date: 2026-12-07
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0018_analyze_asked"
down_revision = "0017_listing_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0018_analyze_asked.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
