-- External activation across hosts (docs/activation.md): the last QUEUE_ACTIVATION notification of each
-- queue and the session that sent it. Every started broker runs a monitor for the queue; only
-- the last sender, or any once monitor_interval has passed since, sends the next one
-- (claim_activation_notice), so many hosts send one notification where one broker would.
CREATE TABLE sb_activation_notices (
    queue_id integer PRIMARY KEY,
    session_id bigint NOT NULL,
    notified_at double precision NOT NULL
);
