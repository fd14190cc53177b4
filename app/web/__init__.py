"""The study page and the embeddable chat widget."""
