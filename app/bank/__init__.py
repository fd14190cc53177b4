"""The question bank as the service sees it: queries and the learner's and author's views."""
