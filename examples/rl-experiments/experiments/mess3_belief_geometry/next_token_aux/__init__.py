"""The reward_only agent plus a next-visible-token auxiliary loss."""
