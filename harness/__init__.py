"""The evaluator's process machinery behind bench.py (README.md in this folder)."""
