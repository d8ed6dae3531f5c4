-- backend.sql's set_send_seqs_bulk (a send commit's new send_seq for each conversation) was
-- an UPDATE joined to the JSON rows: planned at every commit (91 us for 100 conversations)
-- and, as the plan hashed the whole of sb_endpoints, run in 268 us (pg_stat_statements).
-- Here each row is found by primary key, with one plan for the session whatever the size of
-- sb_endpoints (left to itself, PostgreSQL kept planning it with the commit's literals; a
-- plan made while the table was small scanned it whole).
CREATE FUNCTION sb_set_send_seqs(seqs jsonb, orders bigint[]) RETURNS void
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
    UPDATE sb_endpoints SET send_seq = (seqs ->> conv_order::text)::bigint
    WHERE conv_order = ANY (orders);
END $$;
