"""A page of mempalace_list_drawers reads a narrow table: sql/0017_listing_keys.sql

Revision ID: 0017_listing_keys
Revises: 0016_vector_bits
Create Date: 2026-12-07
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0017_listing_keys"
down_revision = "0016_vector_bits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0017_listing_keys.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
