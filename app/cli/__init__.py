"""The `tutor` command line: one typer app for ingestion, the bank, serving, the worker, grading and keys.

`launch` is the entry point; `main` holds the app. This package imports nothing itself, so `launch` runs
before the command line's imports.
"""
