"""Quiz sessions: choosing questions, taking answers, spaced repetition with FSRS."""
