"""Publishing a run: storage (local or S3), offline HTML pages, the run index, run diffs."""
