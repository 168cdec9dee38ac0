"""Hostile YAML and config files (issue #44, item 10): an alias bomb grew `env/check` to 2.3 GB in 2 minutes, and a
config file that is a link to /etc/shadow had its lines echoed in the diagnostics. Every YAML agentrl reads goes
through safe_yaml.load_yaml (aliases and size bounded), and env check reads the config from inside the checked
folder only."""

import json
import os
import resource
import time

import pytest
from agentrl.contract.config import ConfigError, load_config, parse_override
from agentrl.contract.safe_yaml import MAX_YAML_BYTES, MAX_YAML_DEPTH, YamlTooLarge, load_yaml
from agentrl.rollout.check import check_env

# Nine levels of nine aliases: 9**9 (387 million) strings once expanded, in nine lines.
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n" for previous, name in zip("abcdefgh", "bcdefghi")
)


def test_a_yaml_alias_bomb_is_refused_before_it_grows():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with pytest.raises(YamlTooLarge, match="aliases .* are expanded: an alias bomb"):
        load_yaml(ALIAS_BOMB)
    assert time.monotonic() - started < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: under 200 MB more
    with pytest.raises(ConfigError, match="alias bomb"):
        parse_override(f"env.args.x={{{ALIAS_BOMB.replace(chr(10), ', ')}}}")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("&a [*a]", "recursive anchor"),
        ("[" * 5000 + "]" * 5000, "nested deeper than 100 levels"),
        ("".join("a:\n" + " " * (depth + 1) for depth in range(2000)) + "x", "nested deeper than 100 levels"),
        ("x: " + "y" * MAX_YAML_BYTES, "over the 4,194,304 read"),
    ],
)
def test_a_recursive_deep_or_huge_yaml_is_refused(text, why):
    with pytest.raises(YamlTooLarge, match=why):  # nesting: at its bound, before Python's recursion gives out
        load_yaml(text)


def test_yaml_nested_to_the_depth_bound_still_loads():
    assert load_yaml("[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH) is not None


def test_yaml_with_a_few_aliases_still_loads_as_safe_load_does():
    assert load_yaml("base: &b {lr: 0.1}\ntrain: *b\nother: [*b, *b]\n") == {
        "base": {"lr": 0.1},
        "train": {"lr": 0.1},
        "other": [{"lr": 0.1}, {"lr": 0.1}],
    }
    assert load_yaml("") is None and load_yaml("3") == 3


def test_an_alias_bomb_config_is_one_error_of_env_check_not_gigabytes(tmp_path):
    (tmp_path / "bomb.agentrl.yaml").write_text(ALIAS_BOMB)
    started = time.monotonic()
    [error] = check_env(tmp_path)
    assert error["severity"] == "error" and "alias bomb" in error["message"]
    assert time.monotonic() - started < 10


def test_a_config_that_is_a_link_out_of_the_checked_folder_is_not_read_or_echoed(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$SECRETHASH:19000:0:99999:7:::\nmodel: {path: SECRET-LINE}\n")
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / "linked.agentrl.yaml").symlink_to(secret)
    for target in (folder, folder / "linked.agentrl.yaml"):  # the folder's one config, or the config named
        [error] = check_env(target)
        assert error["severity"] == "error" and "linked.agentrl.yaml is a link" in error["message"]
        assert "SECRET" not in json.dumps(error)
    with pytest.raises(ConfigError, match="not inside"):
        load_config(secret, inside=folder)


def test_a_config_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "fifo.agentrl.yaml")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(tmp_path / "fifo.agentrl.yaml")
