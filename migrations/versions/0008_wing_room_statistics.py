"""A room lies in a wing: extended statistics on each records partition: sql/0008_wing_room_statistics.sql

Revision ID: 0008_wing_room_statistics
Revises: 0007_vector_segments
Create Date: 2026-12-03
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0008_wing_room_statistics"
down_revision = "0007_vector_segments"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0008_wing_room_statistics.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
