"""The common words of each collection, kept for lexical search: sql/0012_common_words.sql

Revision ID: 0012_common_words
Revises: 0011_bm25_statistics
Create Date: 2026-12-05
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0012_common_words"
down_revision = "0011_bm25_statistics"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0012_common_words.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
