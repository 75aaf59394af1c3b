"""The vector index as segments built over rows already written: sql/0007_vector_segments.sql

Revision ID: 0007_vector_segments
Revises: 0006_words_and_order
Create Date: 2026-12-01
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0007_vector_segments"
down_revision = "0006_words_and_order"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0007_vector_segments.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
