"""The ground floor: what every other package of agentrl may rely on and nothing here relies on them. `config`: the
run config (what a run may be told, every section and name, `agentrl schema`'s source); `schemas`: the protocol/
schemas every record is checked against and the names declared there (run statuses, error codes, health codes);
`tasks`: the task files a run reads."""
