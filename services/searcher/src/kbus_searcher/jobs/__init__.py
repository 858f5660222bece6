"""Admin jobs: setup, re-embedding, re-cutting; each a command of its own."""
