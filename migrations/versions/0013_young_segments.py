"""Which vector index segments were built young: sql/0013_young_segments.sql

Revision ID: 0013_young_segments
Revises: 0012_common_words
Create Date: 2026-12-05
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0013_young_segments"
down_revision = "0012_common_words"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0013_young_segments.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
