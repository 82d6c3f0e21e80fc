"""Scenarios: conversations evalbook simulates against the system under test (issue 38).

`spec` reads and checks the scenario file. The simulator, the conversation loop, the notebook
and the report's section come next.
"""
