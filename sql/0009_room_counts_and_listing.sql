-- mempalace-pg schema, revision 0009: the overview tools of a big palace answer without reading it.
--
-- Applied by Alembic (migrations/versions/0009_room_counts_and_listing.py), search_path = our schema, the
-- schema holding pgvector, ag_catalog.
--
-- Two of MemPalace's read paths went through every drawer of a palace on each call (issue 37):
--
-- * the palace graph (mempalace_graph_stats, traverse, find_tunnels, tunnels, hallways, audit) groups the
--   drawers by room, wing and hall with their latest date. room_counts keeps that grouping, as
--   facet_counts keeps (wing, room), by statement triggers on each partition;
-- * mempalace_list_drawers sorts the logical drawers of a wing (or a room, or the palace) by id to
--   return one page. The indexes below hand them out in that order: records_listing_wing,
--   records_wing_room and records_room (which now end in the id), records_key for the palace;
--   records_chunks finds the chunks of logical drawers (rows carrying a parent id), the only rows that
--   are not drawers of their own. records_room ends in the id too, for a room of every wing.

-- ---------------------------------------------------------------------------------------------------
-- Counts per room, wing and hall, with the latest date.
CREATE TABLE room_counts (
    collection_pk integer NOT NULL REFERENCES collections ON DELETE CASCADE,
    room          jsonb,
    wing          jsonb,
    hall          jsonb,
    n             bigint  NOT NULL,
    last_date     text    COLLATE "C"
);
CREATE UNIQUE INDEX room_counts_key ON room_counts
    (collection_pk, text_key(room::text), text_key(wing::text), text_key(hall::text)) NULLS NOT DISTINCT;
COMMENT ON TABLE  room_counts IS 'Number of records per collection, room, wing and hall, and their latest date (metadata values as JSON; NULL = field absent). What MemPalace''s palace graph reads. Maintained by triggers; never edit by hand.';
COMMENT ON COLUMN room_counts.hall IS 'metadata->''hall'' of the counted records (JSON value, NULL when absent).';
COMMENT ON COLUMN room_counts.n IS 'How many records have this room, wing and hall (0 once all are gone).';
COMMENT ON COLUMN room_counts.last_date IS 'The greatest metadata->>''date'' (string dates only, byte order) of those records; NULL when none has one.';

-- The latest date of a group, read from the partition itself: after a delete or update took away the
-- row that held it. Wing and room strings go through records_wing_room; other groups (no wing, a
-- number) are rare and scanned.
CREATE FUNCTION room_counts_last_date(part regclass, g_room jsonb, g_wing jsonb, g_hall jsonb) RETURNS text
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $fn$
DECLARE
    result text;
BEGIN
    IF jsonb_typeof(g_wing) = 'string' AND jsonb_typeof(g_room) = 'string' THEN
        EXECUTE format('SELECT max(CASE WHEN jsonb_typeof(metadata -> ''date'') = ''string'' '
                       'THEN metadata ->> ''date'' END COLLATE "C") FROM %s '
                       'WHERE left(wing, 256) = left($2 #>> ''{}'', 256) AND left(room, 256) = left($1 #>> ''{}'', 256) '
                       'AND metadata -> ''room'' = $1 AND metadata -> ''wing'' = $2 '
                       'AND (metadata -> ''hall'') IS NOT DISTINCT FROM $3', part)
            INTO result USING g_room, g_wing, g_hall;
    ELSE
        EXECUTE format('SELECT max(CASE WHEN jsonb_typeof(metadata -> ''date'') = ''string'' '
                       'THEN metadata ->> ''date'' END COLLATE "C") FROM %s '
                       'WHERE (metadata -> ''room'') IS NOT DISTINCT FROM $1 '
                       'AND (metadata -> ''wing'') IS NOT DISTINCT FROM $2 '
                       'AND (metadata -> ''hall'') IS NOT DISTINCT FROM $3', part)
            INTO result USING g_room, g_wing, g_hall;
    END IF;
    RETURN result;
END
$fn$;

-- +1 for each new row, -1 for each old one, in key order (concurrent writers lock counter rows in the
-- same order). A new row's date raises last_date; taking away a row whose date was the latest of its
-- group, with no new row of that group at least as late, reads the group's latest date again.
CREATE FUNCTION records_count_rooms() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
    part regclass := format('%I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME)::regclass;
    g record;
    removed refcursor;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO room_counts AS f (collection_pk, room, wing, hall, n, last_date)
        SELECT collection_pk, metadata -> 'room', metadata -> 'wing', metadata -> 'hall', count(*),
               max(CASE WHEN jsonb_typeof(metadata -> 'date') = 'string' THEN metadata ->> 'date' END COLLATE "C")
        FROM new_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (collection_pk, text_key(room::text), text_key(wing::text), text_key(hall::text))
        DO UPDATE SET n = f.n + EXCLUDED.n, last_date = GREATEST(f.last_date, EXCLUDED.last_date);
    END IF;
    IF TG_OP = 'DELETE' THEN
        OPEN removed FOR
            SELECT collection_pk, metadata -> 'room' AS room, metadata -> 'wing' AS wing,
                   metadata -> 'hall' AS hall, count(*) AS n,
                   max(CASE WHEN jsonb_typeof(metadata -> 'date') = 'string'
                            THEN metadata ->> 'date' END COLLATE "C") AS removed_last,
                   NULL::text AS added_last
            FROM old_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4;
    ELSIF TG_OP = 'UPDATE' THEN
        OPEN removed FOR
            SELECT o.*, (SELECT max(CASE WHEN jsonb_typeof(r.metadata -> 'date') = 'string'
                                         THEN r.metadata ->> 'date' END COLLATE "C")
                         FROM new_rows r
                         WHERE (r.metadata -> 'room') IS NOT DISTINCT FROM o.room
                           AND (r.metadata -> 'wing') IS NOT DISTINCT FROM o.wing
                           AND (r.metadata -> 'hall') IS NOT DISTINCT FROM o.hall) AS added_last
            FROM (SELECT collection_pk, metadata -> 'room' AS room, metadata -> 'wing' AS wing,
                         metadata -> 'hall' AS hall, count(*) AS n,
                         max(CASE WHEN jsonb_typeof(metadata -> 'date') = 'string'
                                  THEN metadata ->> 'date' END COLLATE "C") AS removed_last
                  FROM old_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4) AS o;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        LOOP
            FETCH removed INTO g;
            EXIT WHEN NOT FOUND;
            UPDATE room_counts AS f SET
                n = f.n - g.n,
                last_date = CASE
                    WHEN g.removed_last IS NULL OR g.removed_last < f.last_date
                         OR g.added_last >= g.removed_last THEN f.last_date
                    ELSE room_counts_last_date(part, g.room, g.wing, g.hall) END
            WHERE f.collection_pk = g.collection_pk
              AND text_key(f.room::text) IS NOT DISTINCT FROM text_key(g.room::text)
              AND text_key(f.wing::text) IS NOT DISTINCT FROM text_key(g.wing::text)
              AND text_key(f.hall::text) IS NOT DISTINCT FROM text_key(g.hall::text);
        END LOOP;
        CLOSE removed;
    END IF;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION records_count_rooms() IS 'Statement trigger on each records partition: keeps room_counts exact.';

CREATE FUNCTION records_attach_room_counts(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    EXECUTE format('CREATE TRIGGER count_rooms_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION records_count_rooms()', partition);
    EXECUTE format('CREATE TRIGGER count_rooms_update AFTER UPDATE ON %s REFERENCING OLD TABLE AS old_rows '
                   'NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records_count_rooms()', partition);
    EXECUTE format('CREATE TRIGGER count_rooms_delete AFTER DELETE ON %s REFERENCING OLD TABLE AS old_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION records_count_rooms()', partition);
END
$fn$;
COMMENT ON FUNCTION records_attach_room_counts(regclass) IS 'The room_counts triggers of one records partition.';

CREATE OR REPLACE FUNCTION records_partition_setup(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    PERFORM records_attach_triggers(partition);
    PERFORM records_attach_room_counts(partition);
    PERFORM records_wing_room_statistics(partition);
END
$fn$;
COMMENT ON FUNCTION records_partition_setup(regclass) IS
    'Called by the backend for each new records partition: its count triggers and its wing/room statistics.';

-- ---------------------------------------------------------------------------------------------------
-- Listing logical drawers in id order.

-- The logical drawer a row is a chunk of, as MemPalace reads it (mcp_server _logical_parent_id: the first
-- non-empty of parent_drawer_id, parent_entry_id); NULL for a row that is a drawer of its own.
CREATE FUNCTION logical_parent(metadata jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE
        WHEN jsonb_typeof(metadata -> 'parent_drawer_id') = 'string' AND metadata ->> 'parent_drawer_id' <> ''
            THEN metadata ->> 'parent_drawer_id'
        WHEN jsonb_typeof(metadata -> 'parent_entry_id') = 'string' AND metadata ->> 'parent_entry_id' <> ''
            THEN metadata ->> 'parent_entry_id'
    END $$;
COMMENT ON FUNCTION logical_parent(jsonb) IS 'The id of the logical drawer a chunk row belongs to (parent_drawer_id, else parent_entry_id); NULL for a drawer of its own.';

CREATE INDEX records_chunks ON records (text_key(logical_parent(metadata))) WHERE logical_parent(metadata) IS NOT NULL;
COMMENT ON INDEX records_chunks IS 'The chunk rows of logical drawers (few), by their drawer''s id.';

DROP INDEX records_wing_room;
CREATE INDEX records_wing_room ON records (left(wing, 256), left(room, 256), text_key(id));
COMMENT ON INDEX records_wing_room IS 'Filters by wing (and room): the first 256 characters of each, then the whole value; a room''s records in id order.';
CREATE INDEX records_listing_wing ON records (left(wing, 256), text_key(id));
COMMENT ON INDEX records_listing_wing IS 'A wing''s records in id order (mempalace_list_drawers of a wing).';
DROP INDEX records_room;
CREATE INDEX records_room ON records (left(room, 256), text_key(id));
COMMENT ON INDEX records_room IS 'Filters by room: its first 256 characters, then the whole value; a room''s records (of every wing) in id order.';

-- The partitions made before this revision: their triggers and their counts.
DO $do$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'records'::regclass LOOP
        PERFORM records_attach_room_counts(part);
        EXECUTE format(
            'INSERT INTO room_counts (collection_pk, room, wing, hall, n, last_date) '
            'SELECT collection_pk, metadata -> ''room'', metadata -> ''wing'', metadata -> ''hall'', count(*), '
            'max(CASE WHEN jsonb_typeof(metadata -> ''date'') = ''string'' THEN metadata ->> ''date'' END COLLATE "C") '
            'FROM %s GROUP BY 1, 2, 3, 4', part);
        EXECUTE format('ANALYZE %s', part);  -- statistics of the new index expressions
    END LOOP;
END
$do$;
