"""Overview tools without reading the palace: sql/0009_room_counts_and_listing.sql

Revision ID: 0009_room_counts_and_listing
Revises: 0008_wing_room_statistics
Create Date: 2026-12-04
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0009_room_counts_and_listing"
down_revision = "0008_wing_room_statistics"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0009_room_counts_and_listing.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
