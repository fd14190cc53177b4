"""Offline work on the grader: evaluation on labelled answers, fitting the general model, the ASAG data.

Nothing here is imported while serving; the `tutor eval` command and `python -m grading_lab.fit` use it.
"""
