"""Grounded answers to concept questions, from the bank's own material."""
