"""The graph's SQL-language write helpers as PL/pgSQL, planned once per session: sql/0004_planned_once.sql

Revision ID: 0004_planned_once
Revises: 0003_graph_and_drawers
Create Date: 2026-11-30
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0004_planned_once"
down_revision = "0003_graph_and_drawers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0004_planned_once.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
