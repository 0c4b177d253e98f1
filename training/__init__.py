"""What the training stages share: data parallelism, the chained stages, rl.py's log line."""
