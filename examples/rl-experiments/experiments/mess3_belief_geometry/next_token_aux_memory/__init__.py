"""next_token_aux at the operating point where memory pays (task.TASK_POINTS["memory"])."""
