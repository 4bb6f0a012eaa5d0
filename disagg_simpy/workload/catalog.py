"""The public traces known by id: where each comes from, its SHA-256, size and licence, where it
is cached, and how it is fetched (`python -m disagg_simpy traces fetch`).

The project carries no copy of them. A scenario may name one by id (`trace: azure-conv`); a run
then reads the cached file and never downloads: if it is missing, the run stops with the command
that fetches it. Fetching uses pooch, imported only inside `fetch`.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

#: The cache folder, if set (else the platform's user cache folder, as pooch.os_cache gives it).
ENV_FOLDER = "DISAGG_SIMPY_TRACES"
#: A base URL to fetch every file from instead (`<base>/<file name>`): a mirror, or a test server.
ENV_URL = "DISAGG_SIMPY_TRACES_URL"
FETCH_COMMAND = "python -m disagg_simpy traces fetch"

_RAW = "https://raw.githubusercontent.com"
_AZURE = "Azure/AzurePublicDataset"
_MOONCAKE = "kvcache-ai/Mooncake"
_SARATHI = "microsoft/sarathi-serve"
_CC_BY = ("CC BY 4.0", "https://creativecommons.org/licenses/by/4.0/legalcode")
_APACHE = ("Apache-2.0", "https://www.apache.org/licenses/LICENSE-2.0")
_AZURE_CREDIT = (
    "Azure LLM inference trace 2023, Microsoft Azure, from the Azure Public Dataset "
    "(https://github.com/Azure/AzurePublicDataset), licensed under CC BY 4.0, unmodified. Cite: Patel et al., "
    '"Splitwise: Efficient generative LLM inference using phase splitting", ISCA 2024.'
)


@dataclass(frozen=True)
class PublicTrace:
    """One public trace file: fetched from `urls` in order, accepted only with `sha256`."""

    id: str
    file: str
    format: str
    size: int
    rows: int
    sha256: str
    urls: tuple[str, ...]  # first a commit-pinned raw URL (exact bytes), then a branch's
    source: str  # repository and path, for people
    licence: str
    licence_url: str
    attribution: str

    @property
    def size_text(self) -> str:
        return f"{self.size / 1e6:.1f} MB" if self.size >= 1e6 else f"{self.size / 1e3:.0f} kB"


def _azure(id_: str, kind: str, size: int, rows: int, sha256: str) -> PublicTrace:
    path = f"data/AzureLLMInferenceTrace_{kind}.csv"
    return PublicTrace(
        id_, path.rsplit("/", 1)[1], "azure", size, rows, sha256,
        (f"{_RAW}/{_AZURE}/790921015d50dd6aae7f7e47f39ba0e235ad6b08/{path}", f"{_RAW}/{_AZURE}/HEAD/{path}"),
        f"https://github.com/{_AZURE} {path}", *_CC_BY, _AZURE_CREDIT,
    )


_MOONCAKE_PATH = "FAST25-release/traces/conversation_trace.jsonl"
_SHAREGPT_PATH = "data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv"

#: id -> the public trace (the values are those of data/traces/README.md)
CATALOG: dict[str, PublicTrace] = {t.id: t for t in (
    _azure("azure-code", "code", 320_117, 8_819, "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6"),
    _azure("azure-conv", "conv", 719_188, 19_366, "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8"),
    PublicTrace(
        "mooncake-conv", "conversation_trace.jsonl", "mooncake", 3_029_533, 12_031,
        "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
        (f"{_RAW}/{_MOONCAKE}/3cca71daccf2a7afb8fe3f0295358f70e3a69fdb/{_MOONCAKE_PATH}", f"{_RAW}/{_MOONCAKE}/HEAD/{_MOONCAKE_PATH}"),
        f"https://github.com/{_MOONCAKE} {_MOONCAKE_PATH}", *_APACHE,
        "Mooncake FAST'25 trace release, kvcache-ai/Mooncake (https://github.com/kvcache-ai/Mooncake), Apache-2.0, "
        'unmodified. Cite: Qin et al., "Mooncake: Trading More Storage for Less Computation", FAST 2025.',
    ),
    PublicTrace(
        "sharegpt", "sharegpt_8k_filtered_stats_llama2_tokenizer.csv", "lengths", 949_600, 30_731,
        "6d6c296302a853e2669a674a96f269283e60c57e60363bd450588a1066919f9f",
        (f"{_RAW}/{_SARATHI}/72339db5b120614033b317880ad3a05a5e4c9415/{_SHAREGPT_PATH}",
         f"{_RAW}/{_SARATHI}/niyama_asplos2026/{_SHAREGPT_PATH}"),
        f"https://github.com/{_SARATHI} {_SHAREGPT_PATH} (branch niyama_asplos2026)", *_APACHE,
        "ShareGPT length statistics, microsoft/sarathi-serve (https://github.com/microsoft/sarathi-serve), Apache-2.0, "
        'unmodified. Related paper: Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", '
        "OSDI 2024.",
    ),
)}


class FetchError(Exception):
    """A download failed or was refused (exit code 1); nothing was left in the cache."""


def cache_folder() -> Path:
    """Where fetched traces live: $DISAGG_SIMPY_TRACES, else the user cache folder (the one
    pooch.os_cache("disagg_simpy") names, e.g. ~/.cache/disagg_simpy on Linux)."""
    folder = os.environ.get(ENV_FOLDER)
    if folder:
        return Path(folder).expanduser()
    import platformdirs  # pooch's own dependency; light, unlike pooch with requests

    return Path(platformdirs.user_cache_dir("disagg_simpy"))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached_path(trace: PublicTrace) -> Path | None:
    """The cached file if it is there with the right size (the hash is checked on use)."""
    path = cache_folder() / trace.file
    try:
        return path if path.is_file() and path.stat().st_size == trace.size else None
    except OSError:
        return None


def resolve_trace(trace: str, fmt: str, folder: Path, where: str) -> Path:
    """The file a scenario's `trace:` names: a known id's cached file (checked by SHA-256), or a
    path, relative to the scenario's `folder`. An id that is not cached is bad input that names
    the command fetching it; nothing is ever downloaded here."""
    known = CATALOG.get(trace)
    if known is None:
        path = Path(trace)
        path = path if path.is_absolute() else folder / path
        near = difflib.get_close_matches(trace, CATALOG, n=1, cutoff=0.6)
        if near and not path.exists():
            raise InputError(f"{where}.trace: got {trace!r}, which is neither a file nor a public trace's id; "
                             f"did you mean {near[0]!r}? (see `traces list`)")
        return path
    if fmt != known.format:
        raise InputError(f"{where}.format: got {fmt!r}, expected {known.format!r} for the public trace {trace}")
    command = f"{FETCH_COMMAND} {trace}"
    cached = cached_path(known)
    if cached is None:
        raise InputError(
            f"{where}.trace: the public trace {trace} is not in {cache_folder()}; fetch it ({known.size_text}) with: {command}"
        )
    path = cached
    digest = sha256_of(path)
    if digest != known.sha256:
        raise InputError(
            f"{where}.trace: {path} has SHA-256 {digest[:12]}..., expected {known.sha256[:12]}... "
            f"for {trace}; fetch it again with: {command}"
        )
    return path


def _urls(trace: PublicTrace, base_url: str | None) -> tuple[str, ...]:
    base = base_url if base_url is not None else os.environ.get(ENV_URL)
    return (f"{base.rstrip('/')}/{trace.file}",) if base else trace.urls


def fetch(ids, base_url: str | None = None, progress: bool | None = None) -> list[Path]:
    """Download the named traces into `cache_folder()` unless already there with the right
    SHA-256; return their paths. Each URL is tried in turn; a file whose hash differs is
    refused. pooch streams into a temporary file beside the target and renames it only once
    the hash matches, so a failure or Ctrl-C leaves nothing behind. `base_url` (or
    $DISAGG_SIMPY_TRACES_URL) replaces the public URLs with `<base_url>/<file name>`."""
    import pooch  # only here: a run never downloads
    import requests
    from tqdm import tqdm

    pooch.get_logger().setLevel("WARNING")
    folder = cache_folder()
    show = sys.stderr.isatty() if progress is None else progress
    paths = []
    for trace_id in ids:
        trace = CATALOG[trace_id]
        failures = []
        for url in _urls(trace, base_url):
            bar = tqdm(desc=trace_id, total=trace.size, unit="B", unit_scale=True, leave=True, file=sys.stderr) if show else None
            try:
                paths.append(Path(pooch.retrieve(url, f"sha256:{trace.sha256}", fname=trace.file, path=folder,
                                                 progressbar=bar if bar is not None else False)))
                break
            except requests.RequestException as err:
                failures.append(f"{url}: {_reason(err)}")
            except ValueError as err:  # pooch: the downloaded file's hash differs
                if "hash" not in str(err).lower():
                    raise
                failures.append(f"{url}: the file's SHA-256 is not {trace.sha256[:12]}... (refused)")
            except OSError as err:
                raise FetchError(f"cannot write into {folder}: {err.strerror or err}") from None
            finally:
                if bar is not None:
                    bar.close()
        else:
            raise FetchError(f"could not fetch {trace_id}; nothing was saved: " + "; ".join(failures))
    return paths


def _reason(err: Exception) -> str:
    """A requests error in a few words (its text can hold a whole nested traceback)."""
    import requests

    response = getattr(err, "response", None)
    if response is not None:
        return f"HTTP {response.status_code} {response.reason}"
    if isinstance(err, requests.exceptions.ChunkedEncodingError):
        return "the connection closed before the whole file came"
    if isinstance(err, requests.exceptions.Timeout):
        return "no answer in time"
    if isinstance(err, requests.exceptions.ConnectionError):
        return "cannot connect"
    return type(err).__name__
