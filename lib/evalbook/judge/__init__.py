"""The LLM judge: groundedness, relevance and criteria on any OpenAI-compatible endpoint.

`client` (calls, cache, retries), `cache`, `prompts` (versioned templates), `parsing`,
one module per metric (`groundedness`, `relevance`, `criteria`) holding its pure score math,
`protocol` (what every judged metric implements, and the ordered tuple of them),
`stage` (eligibility, sampling, summary), `display` and `server` (the local llama.cpp server).
"""
