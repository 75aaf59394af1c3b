"""One lock order for every write to the knowledge graph: sql/0015_lock_order.sql

Revision ID: 0015_lock_order
Revises: 0014_vector_tail
Create Date: 2026-12-06
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0015_lock_order"
down_revision = "0014_vector_tail"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0015_lock_order.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
