"""Learning: one step's Episodes in, one policy update and its metrics and per-episode advantages out (batch:
episodes to tensors; learner: the update; cpu_memory: glibc told to keep what a CPU learner frees, and the process's
own peak memory; memory_plan: a run's peak memory planned from its config; memory_advice: what the plan means for the
run, the check before it starts and the settings that make it fit; algorithms: one RL algorithm per file behind one
registry)."""
