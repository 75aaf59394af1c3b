-- mempalace-pg schema, revision 0008: PostgreSQL knows that a room lies in a wing.
--
-- Applied by Alembic (migrations/versions/0008_wing_room_statistics.py), search_path = our schema, the
-- schema holding pgvector, ag_catalog.
--
-- A plan over a wing and a room depends on how many records PostgreSQL expects them to match. Without
-- statistics on the pair it multiplies the wing's share by the room's, as if rooms were spread over
-- every wing, while a room lies in one, and expects a fraction of the records that match (issue 26).
-- The searches no longer leave that choice to it (mempalace_pg.store.search, Gate), but every other
-- statement over wing and room, and every psql user's, still plans by it. Extended statistics on
-- (wing, room) give PostgreSQL the pair's common values (mcv), how far one decides the other
-- (dependencies) and the number of distinct pairs (ndistinct). They are per table: each collection's
-- partition gets its own, made with the partition (records_partition_setup) and filled by every ANALYZE.

CREATE FUNCTION records_wing_room_statistics(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    EXECUTE format('CREATE STATISTICS IF NOT EXISTS %I.%I (ndistinct, dependencies, mcv) ON wing, room FROM %s',
                   (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE c.oid = partition),
                   (SELECT relname FROM pg_class WHERE oid = partition) || '_wing_room', partition);
END
$fn$;
COMMENT ON FUNCTION records_wing_room_statistics(regclass) IS
    'Extended statistics on (wing, room) for one records partition, named <partition>_wing_room.';

CREATE FUNCTION records_partition_setup(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
    PERFORM records_attach_triggers(partition);
    PERFORM records_wing_room_statistics(partition);
END
$fn$;
COMMENT ON FUNCTION records_partition_setup(regclass) IS
    'Called by the backend for each new records partition: its facet-count triggers and its wing/room statistics.';

-- The partitions made before this revision.
DO $do$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'records'::regclass LOOP
        PERFORM records_wing_room_statistics(part);
        EXECUTE format('ANALYZE %s', part);
    END LOOP;
END
$do$;
