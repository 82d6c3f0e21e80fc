"""00_generate: ask the system under test for its answers (an OpenAI-compatible chat endpoint,
or the user's own HTTP service), and write them as the predictions table 01_load joins."""
