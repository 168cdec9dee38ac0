"""What every section of the run config is: a pydantic model whose unknown keys are errors."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    # Unknown keys are errors: a typo in an RL option silently ignored costs GPU hours.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
