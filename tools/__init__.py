"""Developer tools of the sbroker repository (not part of the package)."""
