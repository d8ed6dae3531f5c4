-- A failed task keeps its traceback (issue 17): ExecutionLog.ErrorDetails.
ALTER TABLE ExecutionLog ADD COLUMN ErrorDetails TEXT;
