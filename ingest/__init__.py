"""Ingestion: quiz documents -> question bank rows and a vector index."""
