"""Live demos: the API's proxy to the demo worker (catalogue, runs, progress events)."""
