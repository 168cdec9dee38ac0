"""The run: a run config in, a run folder out (config: what a run may be told; trainer: the train loop; runstore:
the run folder; recording: what a step's episodes leave in it; trajectory_summaries and episode_search: what
trajectory/query and trajectory/search read; reroll: an episode edited at one turn and played on;
metrics and health: what each step says; eval and stats: scoring;
atif: its trajectories in Harbor's Agent Trajectory Interchange Format and back; tasks: task files; contract: the
protocol/ schemas every record is checked against)."""
