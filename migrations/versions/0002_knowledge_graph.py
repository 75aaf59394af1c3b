"""MemPalace's knowledge graph as an Apache AGE graph, its indexes and write functions:
sql/0002_knowledge_graph.sql

Revision ID: 0002_knowledge_graph
Revises: 0001_drawers
Create Date: 2026-11-30
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0002_knowledge_graph"
down_revision = "0001_drawers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0002_knowledge_graph.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
