"""The `casscade` command root: finds the stages' command groups (entry points)."""
