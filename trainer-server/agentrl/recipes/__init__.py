"""Recipes users start from: arithmetic and GSM8K with a calculator, parcel lockers (several dependent steps),
multi-hop QA with search (the Agent-R1 setting), TextWorldExpress's CoinCollector; `demonstrations.py`: what their
warm-start scripts (`warm_start_demonstrations.py`) share."""
