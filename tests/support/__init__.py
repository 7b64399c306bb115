"""Helpers the tests share: harnesses, workloads, strategies and records (importable as
`support` because pytest puts tests/ on sys.path). No test module imports another; what two
of them need lives here."""
