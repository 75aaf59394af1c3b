"""A filter's own rows read from the wing/room index alone: sql/0019_covering_bits.sql

Revision ID: 0019_covering_bits
Revises: 0018_analyze_asked
Create Date: 2026-12-07
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0019_covering_bits"
down_revision = "0018_analyze_asked"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0019_covering_bits.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
