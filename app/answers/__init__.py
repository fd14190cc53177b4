"""Grading bank answers: rubrics for bank questions, grounded explanations, related material."""
