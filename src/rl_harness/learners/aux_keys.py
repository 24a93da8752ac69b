"""Names that pair an auxiliary head with its targets, loss and metrics.

One namespace ties them together: the head writes `<ns>/logits` in
`_forward_train`, a learner connector writes `<ns>/targets` (and
`<ns>/target_valid`) into the train batch, the loss reads
`learner_config_dict["<ns>/weight"]` and logs `<ns>/loss` and
`<ns>/accuracy`. The head is sized by `model_config["<ns>/num_classes"]`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AuxKeys:
    namespace: str

    def __post_init__(self) -> None:
        if not self.namespace or "/" in self.namespace:
            raise ValueError(f"aux namespace must be a non-empty name without '/', got {self!r}")

    def _key(self, name: str) -> str:
        return f"{self.namespace}/{name}"

    @property
    def logits(self) -> str:
        """fwd_out key of the head's logits."""
        return self._key("logits")

    @property
    def targets(self) -> str:
        """Batch column of integer class targets."""
        return self._key("targets")

    @property
    def target_valid(self) -> str:
        """Batch column: True where a target exists (False past a chunk's end)."""
        return self._key("target_valid")

    @property
    def num_classes(self) -> str:
        """model_config key: the head's output width."""
        return self._key("num_classes")

    @property
    def hidden_sizes(self) -> str:
        """model_config key: the head's hidden layers (default none)."""
        return self._key("hidden_sizes")

    @property
    def weight(self) -> str:
        """learner_config_dict key: the loss weight (0 disables the term)."""
        return self._key("weight")

    @property
    def loss_metric(self) -> str:
        return self._key("loss")

    @property
    def accuracy_metric(self) -> str:
        return self._key("accuracy")


NEXT_TOKEN_AUX = AuxKeys("next_token_aux")
STATE_AUX = AuxKeys("state_aux")
