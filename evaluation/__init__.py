"""What evaluate.py (and partly prepare.py) runs on: the task set and kernels files (taskset), the bench calls and
result rows (measure), the models' answers (sampling), the degenerate-task screen (screen), the baselines (baseline)
and the report of the paper's tables (report)."""
