"""The Slack bot: quizzes, graded thread answers, grounded answers, a daily question and its leaderboard."""
