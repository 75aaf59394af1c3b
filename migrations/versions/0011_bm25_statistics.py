"""What lexical search needs to score by BM25: sql/0011_bm25_statistics.sql

Revision ID: 0011_bm25_statistics
Revises: 0010_cheaper_facts
Create Date: 2026-12-05
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0011_bm25_statistics"
down_revision = "0010_cheaper_facts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0011_bm25_statistics.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
