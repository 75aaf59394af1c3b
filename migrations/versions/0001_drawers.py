"""Palaces, collections and their records (drawers, closets, assets): sql/0001_drawers.sql

Revision ID: 0001_drawers
Revises:
Create Date: 2026-11-30
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0001_drawers"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0001_drawers.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
