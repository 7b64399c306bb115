"""The soak: the whole pipeline at RF=3 under a random workload and random faults, ended by
`casscade verify` (`make soak`; not part of `make test`)."""
