"""Every row's vector in one bit a dimension: sql/0016_vector_bits.sql

Revision ID: 0016_vector_bits
Revises: 0015_lock_order
Create Date: 2026-12-06
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0016_vector_bits"
down_revision = "0015_lock_order"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0016_vector_bits.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
