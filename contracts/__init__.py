"""What the API and the demo worker agree on: the demo catalogue and the error shape.

Both services import this package; it imports neither of them.
"""
