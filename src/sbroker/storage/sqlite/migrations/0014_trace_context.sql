-- Tracing (docs/tracing.md): the W3C traceparent of the SEND that made a message, kept with it in
-- its queue and in the transmission queue (NULL when the sender did not trace).
ALTER TABLE sb_messages ADD COLUMN trace_context TEXT;
ALTER TABLE sb_transmission_queue ADD COLUMN trace_context TEXT;
-- A scheduler task's: the traceparent of the AsyncSent that sent it (the dashboard links it).
ALTER TABLE ExecutionLog ADD COLUMN TraceContext TEXT;
