"""reward_only at the operating point where memory pays (task.TASK_POINTS["memory"])."""
