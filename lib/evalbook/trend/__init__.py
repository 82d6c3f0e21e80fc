"""Every headline metric across runs: each run's headline file, the series of runs that can be
joined, their points with intervals and the steps between them that are real."""
