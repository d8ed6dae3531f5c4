"""Background services of a started broker: each has start(), stop() and a clock."""
