"""Rollout: tasks and the policy in, token-exact multi-turn Episodes out (engine: the hf engine and the shared
episode logic; vllm_engine; episode: what an Episode holds; prefix: the shared prompt computed once)."""
