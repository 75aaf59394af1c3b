"""The knowledge graph joined with the drawers: source-drawer index, neighbourhood and delete-rule functions,
views: sql/0003_graph_and_drawers.sql

Revision ID: 0003_graph_and_drawers
Revises: 0002_knowledge_graph
Create Date: 2026-11-30
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0003_graph_and_drawers"
down_revision = "0002_knowledge_graph"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0003_graph_and_drawers.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
