"""API keys of the public grading API: creation, authentication, rate limits and usage counting."""
