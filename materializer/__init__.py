"""casscade's Spark job: merges replica row updates into complete before/after change events."""
