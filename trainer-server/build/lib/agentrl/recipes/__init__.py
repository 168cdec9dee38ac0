"""Recipes users start from: GSM8K with a calculator, multi-hop QA with search (the Agent-R1 setting)."""
