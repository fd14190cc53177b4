"""GPU Tutor: the API service and its domain packages."""
