"""The public grading API: bank questions, any question, registered rubrics, batches."""
