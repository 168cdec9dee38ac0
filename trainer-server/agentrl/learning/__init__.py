"""Learning: one step's Episodes in, one policy update and its metrics and per-episode advantages out (batch:
episodes to tensors; learner: the update; cpu_memory: glibc told to keep what a CPU learner
frees; algorithms: one RL algorithm per file behind one registry)."""
