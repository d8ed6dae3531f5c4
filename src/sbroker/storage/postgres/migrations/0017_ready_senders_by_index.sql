-- sb_ready_senders (of 0008) keeps one generic plan per session (force_generic_plan). Made
-- while the transmission queue was empty and analyzed, that plan read the transmission queue
-- with a sequential scan, and kept it once the queue grew (messages waiting for a route or a
-- disabled queue): every commit's prefetch of its senders then read the whole queue. Its
-- tables are all read by key, so the function plans without sequential scans.
ALTER FUNCTION sb_ready_senders(bigint[]) SET enable_seqscan = off;
