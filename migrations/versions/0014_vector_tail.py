"""The tail's vectors in one bit a dimension: sql/0014_vector_tail.sql

Revision ID: 0014_vector_tail
Revises: 0013_young_segments
Create Date: 2026-12-05
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0014_vector_tail"
down_revision = "0013_young_segments"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0014_vector_tail.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
