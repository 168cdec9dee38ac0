"""The policy's current weights, as the rollout workers get them: one copy in Ray's object store per optimizer
step (on a CPU cluster; broadcasting over NCCL would skip the store on GPUs), numbered so that a worker, a
restarted one included, loads a version only when it does not already hold it."""

from __future__ import annotations

from typing import Any

import torch


def cpu_state_dict(model: Any) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}


class SharedWeights:
    def __init__(self, ray: Any, driver_model: Any) -> None:
        self._ray = ray
        self.driver_model = driver_model  # the copy the driver checkpoints
        self.ref: Any = None  # ObjectRef of the current state dict
        self.version = 0
        self._driver_copy_current = True

    def from_driver(self) -> None:
        """The driver's model holds the current weights (the start of a run, a restored checkpoint)."""
        self.ref = self._ray.put(cpu_state_dict(self.driver_model))
        self.version += 1
        self._driver_copy_current = True

    def from_learner(self, ref: Any) -> None:
        """An optimizer step made new weights; they stay in the object store until a checkpoint needs them."""
        self.ref = ref
        self.version += 1
        self._driver_copy_current = False

    def update_driver_copy(self) -> None:
        if not self._driver_copy_current:
            self.driver_model.load_state_dict(self._ray.get(self.ref))
            self._driver_copy_current = True
