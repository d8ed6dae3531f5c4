-- Lesson 3: look at what ran (a query: it starts no procedure of its own).
SELECT title FROM StockChecks
-- requests were all answered (the initiator's EndDialog may still wait for the next run)
SELECT COUNT(*) AS waiting FROM StockTargetQueue
WHERE message_type_name = N'//Bookshop/Stock/CheckRequest'
SELECT COUNT(*) AS running FROM sys.dm_broker_activated_tasks
