"""Environments nobody wrote for agentrl, each as a ToolEnv built from a run config's section alone: a reset/step
text env (`gym.py`, env.gym), an object whose public methods are the tools (`methods.py`, env.methods), and an
OpenEnv server (`openenv.py`, env.openenv). `external.py` holds what the reset/step ones share: the prompt, the
action the model writes, per-step rewards and the score."""
