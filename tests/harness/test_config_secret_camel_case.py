"""Secret key names in camelCase (issue 49, class 9): `authToken`, `clientSecret` and the like
are split into words like `auth_token`, so config.json never holds their values in clear.

On the record config.json is made of (`config_record`, what the runners write for a run and
for each Tune trial) from a real RLlib PPOConfig, no Ray needed; a real run's config.json
with camelCase keys is checked in tests/harness/test_config_record.py."""

from __future__ import annotations

import json

from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness.harness.configrecord import config_record, trial_config_record
from rl_harness.harness.redaction import REDACTED

SECRETS = {
    "authToken": "camel-auth-value-1",
    "clientSecret": "camel-client-value-2",
    "awsSecretAccessKey": "camel-aws-value-3",
    "refreshTokens": ["camel-refresh-value-4", "camel-refresh-value-5"],
    "OAuthToken": "camel-oauth-value-6",
    "dbPassword": "camel-db-value-7",
}
PLAIN = {"batchMode": "truncate_episodes", "tokenWindow": 4}  # no secret word with a string


def _config() -> PPOConfig:
    return (
        PPOConfig()
        .environment("CartPole-v1", env_config={"serviceAuth": {"apiKeyValue": "camel-8"}})
        .training(learner_config_dict={**SECRETS, **PLAIN})
    )


def test_camel_case_secret_names_are_redacted_in_config_json():
    record = config_record(_config())
    text = json.dumps(record)
    assert record["learner_config_dict"] == {
        "authToken": REDACTED,
        "clientSecret": REDACTED,
        "awsSecretAccessKey": REDACTED,
        "refreshTokens": [REDACTED, REDACTED],
        "OAuthToken": REDACTED,
        "dbPassword": REDACTED,
        **PLAIN,
    }
    assert record["env_config"] == {"serviceAuth": {"apiKeyValue": REDACTED}}
    assert "camel-" not in text
    # A Tune trial's record goes through the same redaction.
    trial = trial_config_record(_config(), {"lr": 0.01})
    assert trial["lr"] == 0.01 and "camel-" not in json.dumps(trial)
