"""Words split at every non-alphanumeric character (as SQLite FTS5 does) and records in filing order:
sql/0006_words_and_order.sql

Revision ID: 0006_words_and_order
Revises: 0005_long_values
Create Date: 2026-12-01
"""

from mempalace_pg.db.schema import apply_sql_file

revision = "0006_words_and_order"
down_revision = "0005_long_values"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql_file("0006_words_and_order.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
