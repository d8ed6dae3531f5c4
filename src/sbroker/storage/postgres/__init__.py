"""storage/postgres: one broker database on a PostgreSQL server, shared by many hosts."""
