"""What evaluate.py and prepare.py share: the task set, the baselines and the report of the paper's tables."""
