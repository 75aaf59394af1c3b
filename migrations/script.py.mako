"""${message}: sql/${up_revision}.sql

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from mempalace_pg.db.schema import apply_sql_file

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None


def upgrade() -> None:
    # each revision applies the sql/ file of its own name: write it beside the others
    apply_sql_file("${up_revision}.sql")


def downgrade() -> None:
    raise NotImplementedError("mempalace-pg migrations are forward-only; restore a backup instead")
