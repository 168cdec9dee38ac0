"""The ground floor: what every other package of agentrl may rely on and nothing here relies on them. `config`: the
run config (what a run may be told, `agentrl schema`'s source; its model, logging and cluster sections, loading with
--set overrides, paths and redaction), with its other sections beside it: `env_sources` (env, agent), `training_config`
(data, rollout, algorithm, train, and the algorithm and policy-loss names), `health_config` (health), all on
`config_section`'s base; `schemas`: the protocol/ schemas every record is checked against and the names declared there
(run statuses, error codes, health codes); `tasks`: the task files a run reads; `processes`: whether a pid's process
is alive."""
