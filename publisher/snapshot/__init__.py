"""Bootstrap snapshot: a table's existing rows into its raw topic."""
