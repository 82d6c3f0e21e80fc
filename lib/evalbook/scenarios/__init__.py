"""Scenarios: conversations evalbook simulates against the system under test (issue 38).

`spec` reads and checks the scenario file; `simulator` reads the simulated user's replies,
derives each repeat's seed and spots a user who repeats themself; `outcomes` gives the pass
rates over repeats; `conversation` runs one conversation between the two sides and says why
it ended. The calls over HTTP, the notebook and the report's section come next.
"""
