"""The dashboard's pages, one module per area; each gives its routes with ``routes(site)``."""
