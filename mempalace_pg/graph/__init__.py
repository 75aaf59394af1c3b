"""MemPalace's temporal knowledge graph in Apache AGE: the graph class, the router that hands it to
MemPalace for postgres palaces, and the import of a SQLite graph."""
