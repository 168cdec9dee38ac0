"""The policy's current weights, as the rollout workers get them: one copy in Ray's object store per optimizer
step, or under `cluster.weight_sync: broadcast` a broadcast from learner worker 0 (weight_broadcast.py) with a copy
in the store only when one is asked for; numbered so that a worker, a restarted one included, loads a version only
when it does not already hold it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def cpu_state_dict(model: Any) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}


class SharedWeights:
    def __init__(self, ray: Any, driver_model: Any) -> None:
        self._ray = ray
        self.driver_model = driver_model  # the copy the driver checkpoints
        self._ref: Any = None  # ObjectRef of the current state dict
        self._put_in_store: Callable[[], Any] | None = None  # makes `_ref` when a broadcast version is asked for
        self.version = 0
        self.broadcast = False  # whether the current version reaches the rollout workers by broadcast
        self._driver_copy_current = True

    @property
    def ref(self) -> Any:
        """The ObjectRef of the current state dict (put in the store now if the learner broadcast it)."""
        if self._ref is None and self._put_in_store is not None:
            self._ref = self._put_in_store()
        return self._ref

    def from_driver(self) -> None:
        """The driver's model holds the current weights (the start of a run, a restored checkpoint)."""
        self._set(self._ray.put(cpu_state_dict(self.driver_model)), None, driver_copy_current=True)

    def from_learner(self, ref: Any) -> None:
        """An optimizer step made new weights; they stay in the object store until a checkpoint needs them."""
        self._set(ref, None, driver_copy_current=False)

    def from_learner_by_broadcast(self, put_in_store: Callable[[], Any]) -> None:
        """An optimizer step made new weights, which learner worker 0 broadcasts to the rollout workers;
        `put_in_store` puts them in the object store, for a checkpoint or a worker that missed the broadcast."""
        self._set(None, put_in_store, driver_copy_current=False)

    def _set(self, ref: Any, put_in_store: Callable[[], Any] | None, *, driver_copy_current: bool) -> None:
        self._ref, self._put_in_store = ref, put_in_store
        self.broadcast = put_in_store is not None
        self.version += 1
        self._driver_copy_current = driver_copy_current

    def update_driver_copy(self) -> None:
        if not self._driver_copy_current:
            self.driver_model.load_state_dict(self._ray.get(self.ref))
            self._driver_copy_current = True
