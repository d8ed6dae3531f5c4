-- sb_lock_conversations (0002) took each conversation's lock in a loop, a PL/pgSQL
-- statement per conversation (219 us per commit of 100 SENDs on 100 conversations;
-- pg_stat_statements). One statement takes them all (131 us), in key order as before: the
-- keys come sorted out of the subquery (DISTINCT keeps it from being flattened), so two
-- commits never wait for each other in opposite orders.
CREATE OR REPLACE FUNCTION sb_lock_conversations(ids text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1396834306, s.k)
    FROM (SELECT DISTINCT sb_key(c) AS k FROM unnest(ids) c ORDER BY 1) s;
END $$;
