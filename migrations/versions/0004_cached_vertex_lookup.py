"""The graph write functions' vertex lookup planned once per session: sql/0004_cached_vertex_lookup.sql

Revision ID: 0004_cached_vertex_lookup
Revises: 0003_graph_and_drawers
Create Date: 2026-11-30
"""
from mempalace_pg.schema import apply_sql_file

revision = "0004_cached_vertex_lookup"
down_revision = "0003_graph_and_drawers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0004_cached_vertex_lookup.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
