-- T-SQL procedures (docs/tsql.md): CREATE PROCEDURE keeps its text here, by name.
CREATE TABLE sb_tsql_procedures (
    name TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    modified DOUBLE PRECISION NOT NULL
);
