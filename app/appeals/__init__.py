"""Appeals: a learner's "I was right", kept for authors to review."""
