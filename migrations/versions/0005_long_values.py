"""Values of any length: keys over a hash or prefix instead of whole values in B-trees:
sql/0005_long_values.sql

Revision ID: 0005_long_values
Revises: 0004_planned_once
Create Date: 2026-12-01
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0005_long_values"
down_revision = "0004_planned_once"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0005_long_values.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
