"""MESS3 belief geometry under occupancy control: does an agent that steers MESS3 track the
belief it must act on? (Leaves: reward_only, next_token_aux, belief_observation, synthesis.)"""
