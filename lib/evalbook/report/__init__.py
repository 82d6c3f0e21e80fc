"""The report: its JSON document, its figures and its tables."""
