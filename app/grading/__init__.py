"""Grading engine: free-text and multiple-choice answers graded against reference answers."""

from app.grading.build import prepare, prepare_many
from app.grading.grader import GradeResult, Graders, Plan, grade, grade_many, plan_many
from app.grading.rubric import GRADER_VERSION, GradingItem, Rubric

__all__ = [
    "GRADER_VERSION",
    "GradeResult",
    "Graders",
    "GradingItem",
    "Plan",
    "Rubric",
    "grade",
    "grade_many",
    "plan_many",
    "prepare",
    "prepare_many",
]
