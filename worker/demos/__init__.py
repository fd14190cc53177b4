"""The demo runners: each takes validated parameters and a DemoContext and returns a JSON-ready result."""
