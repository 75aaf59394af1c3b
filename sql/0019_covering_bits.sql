-- mempalace-pg schema, revision 0019: a filter's own rows read from the wing/room index alone.
--
-- Applied by Alembic (migrations/versions/0019_covering_bits.py), search_path = our schema, the schema
-- holding pgvector, ag_catalog.
--
-- The first pass over a wing/room filter's own rows (revision 0016) found them by vector_bits_wing_room
-- (or vector_bits_room, for a room of every wing) and then read each one's sign bits from the table: one
-- table block per few rows, in no order, since a wing's rows are spread over the whole table. On a
-- server whose buffers do not hold the table (after a restart, or a palace bigger than its memory) those
-- reads are most of the pass. Both indexes now carry what the pass reads (the whole wing and room, the
-- row's vector_seq and bits), so PostgreSQL answers it by an index-only scan: a filter's entries lie
-- side by side in the index's leaf pages. Both, not one: were only the wing/room index wider, PostgreSQL
-- would find the narrow room index cheaper for a wing-and-room filter and test the wing on every room's
-- row of every wing.
-- An index-only scan still reads the table for a page VACUUM has not yet marked all-visible;
-- autovacuum does that after inserts, and a bulk load vacuums the table itself.

DROP INDEX vector_bits_wing_room;
CREATE INDEX vector_bits_wing_room ON vector_bits (collection_pk, left(wing, 256), left(room, 256))
    INCLUDE (wing, room, vector_seq, bits);
COMMENT ON INDEX vector_bits_wing_room IS 'A wing''s (and room''s) entries, with what the first pass over a filter''s own rows reads: an index-only scan.';
DROP INDEX vector_bits_room;
CREATE INDEX vector_bits_room ON vector_bits (collection_pk, left(room, 256)) INCLUDE (wing, room, vector_seq, bits);
COMMENT ON INDEX vector_bits_room IS 'A room''s entries (of every wing), with what the first pass reads, as vector_bits_wing_room.';
