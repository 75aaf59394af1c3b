"""add_triple without the work it did not need: sql/0010_cheaper_facts.sql

Revision ID: 0010_cheaper_facts
Revises: 0009_room_counts_and_listing
Create Date: 2026-12-05
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0010_cheaper_facts"
down_revision = "0009_room_counts_and_listing"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0010_cheaper_facts.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
