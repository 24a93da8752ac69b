"""Control: the decision belief is given in the observation."""
