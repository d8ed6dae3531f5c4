-- sb_lock_next (0002, replaced in 0004) walks a queue's ready rows in RECEIVE order and stops
-- at the first group it can lock. Once the table had statistics (after ANALYZE, which
-- autovacuum runs by itself), the plan cached for that loop read every ready row of the queue
-- and sorted them, on every RECEIVE: 941 us per call on a queue of 2,000 against 105 us before
-- ANALYZE (track_functions). Without sorts the planner walks sb_messages_ready, which is in
-- that order already: 136 us after ANALYZE. The setting holds inside the function only; a
-- later migration that replaces the function must keep this clause.
ALTER FUNCTION sb_lock_next(integer, bigint[]) SET enable_sort = off;
