"""Learners: opaque ids, and their progress."""
