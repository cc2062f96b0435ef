"""Benchmark-style mutation fuzzing of every parser of outside input (not a CI test).

Each parser of ``bench/fuzzkit/targets.py`` (annotations, CNI and Multus configs, SriovNetwork
fields, policies, DeviceAttributes, checkpoints, the guard's stdin, YAML manifests) gets an equal
share of ``--seconds`` times ``--jobs`` in its own process. An input is fine when the parser returns
or raises an error its docstring documents whose message has a UTF-8 form; anything else is a
*crash class*, keyed by the exception type and the innermost frame of this project's code.

Engines: ``atheris`` (coverage-guided libFuzzer, used when it is installed: ``pip install atheris``
works on CPython 3.11) or ``stdlib`` (random structure-aware mutations of the seeds: characters
inserted, removed or cut, a key repeated, a repeated key nested under a repeated key, a number of
4,301 digits, a lone-surrogate escape, two inputs spliced). The report gives executions per parser
and every crash class with one input; the exit status is 1 when any crash class was found.

    .venv/bin/python bench/fuzz_parsers.py                       # a short run (make bench)
    nice make fuzz                                                # 30 minutes on 2 cores
    .venv/bin/python bench/fuzz_parsers.py --seconds 1800 --jobs 2 --only "shadow render"
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_TOKENS = (
    '"\\ud800"',
    '"\\udfff"',
    "9" * 4301,
    "1e999",
    "-0",
    "NaN",
    '"/' + "9" * 4301 + '"',
    '"10.0.0.0/33"',
    '"0x15B3"',
    '"ens1f0#3-1"',
    '"On"',
    "[]",
    "{}",
    "null",
    ",",
    "\\",
)


def _crash_key(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "/runtime/" in f.filename or "/plugins/" in f.filename]
    where = own[-1] if own else (frames[-1] if frames else None)
    place = f"{Path(where.filename).name}:{where.lineno}" if where else "?"
    return f"{type(exc).__name__} at {place}"


class _Run:
    """One parser's execution count and crash classes (written to ``out`` as JSON)."""

    def __init__(self, target: Any, out: Path) -> None:
        self.target, self.out = target, out
        self.executions = 0
        self.crashes: dict[str, dict[str, Any]] = {}
        self._written = 0.0

    def one(self, data: bytes) -> None:
        self.executions += 1
        value: Any = data
        try:
            if self.target.kind != "bytes":
                value = data.decode("utf-8", "surrogatepass")
            if self.target.kind in ("json", "object"):
                value = json.loads(value)
        except (UnicodeDecodeError, ValueError, RecursionError):
            return
        if self.target.kind == "object" and not isinstance(value, dict):
            return  # the parser's signature takes a mapping (the API object's decoded JSON)
        try:
            self.target.call(value)
        except self.target.allowed as exc:
            try:
                str(exc).encode("utf-8")
            except UnicodeEncodeError:
                self._crash("message without a UTF-8 form", data)
        except Exception as exc:
            self._crash(_crash_key(exc), data)
        if time.monotonic() - self._written > 2.0:
            self.write()

    def _crash(self, key: str, data: bytes) -> None:
        entry = self.crashes.setdefault(
            key, {"count": 0, "input": data[:400].decode("utf-8", "backslashreplace")}
        )
        entry["count"] += 1

    def write(self) -> None:
        self._written = time.monotonic()
        self.out.write_text(json.dumps({"executions": self.executions, "crashes": self.crashes}))


def _mutate(rng: random.Random, text: str, pool: list[str]) -> str:
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(text))
        op = rng.randrange(8)
        if op == 0:
            text = text[:at] + rng.choice(_TOKENS) + text[at:]
        elif op == 1 and text:
            text = text[:at] + text[at + 1 :]
        elif op == 2:
            text = text[: rng.randint(0, len(text))]
        elif op == 3:
            text = text[:at] + chr(rng.choice((rng.randint(32, 126), rng.randint(0, 0x2FFF)))) + text[at:]
        elif op == 4:  # repeat one member of an object: "k":v -> "k":v,"k":v
            start = text.find('"', at)
            end = text.find(",", start)
            if start >= 0 and end > start:
                text = text[:end] + "," + text[start:end] + text[end:]
        elif op == 5:  # a repeated key whose first value repeats a key of its own
            start = text.find('"', at)
            colon = text.find(":", start)
            if start >= 0 and colon > start:
                key = text[start:colon]
                text = (
                    text[: colon + 1] + f"{{{key}:1,{key}:2}}," + text[start : colon + 1] + text[colon + 1 :]
                )
        elif op == 6:
            other = rng.choice(pool)
            cut = rng.randint(0, len(other))
            text = text[:at] + other[cut:]
        else:  # a number run replaced by 4,301 digits
            digits = next((i for i in range(at, len(text)) if text[i].isdigit()), None)
            if digits is not None:
                text = text[:digits] + "9" * 4301 + text[digits + 1 :]
    return text


def _child(index: int, seconds: float, out: Path, engine: str) -> None:
    if engine == "atheris":
        import atheris

        with atheris.instrument_imports(include=["sriov_dra", "sriov_dra_rules"]):
            from bench.fuzzkit import targets
    else:
        from bench.fuzzkit import targets
    target = targets.targets()[index]
    run = _Run(target, out)
    seeds = [s.encode("utf-8", "surrogatepass") for s in target.seeds]
    if engine == "atheris":
        corpus = Path(tempfile.mkdtemp(prefix="fuzz-corpus-"))
        for i, seed in enumerate(seeds):
            (corpus / f"seed-{i}").write_bytes(seed)
        run.write()
        args = [sys.argv[0], f"-max_total_time={max(int(seconds), 1)}", "-timeout=10", "-rss_limit_mb=4096"]
        atheris.Setup([*args, "-print_final_stats=1", str(corpus)], run.one)
        atheris.Fuzz()
        return
    rng = random.Random(index)
    pool = list(target.seeds)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = _mutate(rng, rng.choice(pool), pool)
        run.one(text.encode("utf-8", "surrogatepass"))
        if rng.random() < 0.01 and len(pool) < 64:
            pool.append(text)
    run.write()


def _final_executions(log: Path) -> int:
    """``stat::number_of_executed_units`` from a libFuzzer log, 0 when it has none."""
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if line.startswith("stat::number_of_executed_units:"):
            return int(line.split(":")[-1])
    return 0


def _engine(requested: str) -> str:
    if requested != "auto":
        return requested
    try:
        import atheris  # noqa: F401
    except ImportError:
        return "stdlib"
    return "atheris"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="wall time of the whole run")
    parser.add_argument("--jobs", type=int, default=2, help="parsers fuzzed at once (one process each)")
    parser.add_argument("--engine", choices=("auto", "atheris", "stdlib"), default="auto")
    parser.add_argument("--only", action="append", default=[], help="parser name (repeatable)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    engine = _engine(args.engine)
    if args.child is not None:
        _child(args.child, args.seconds, args.out, engine)
        return 0
    from bench.fuzzkit import targets

    names = [t.name for t in targets.targets()]
    chosen = [i for i, n in enumerate(names) if not args.only or n in args.only]
    share = args.seconds * args.jobs / max(len(chosen), 1)
    print(f"engine {engine}: {len(chosen)} parsers, {share:.0f} s each, {args.jobs} at a time")
    work = Path(tempfile.mkdtemp(prefix="fuzz-parsers-"))
    pending, running = list(chosen), []
    while pending or running:
        while pending and len(running) < args.jobs:
            i = pending.pop(0)
            cmd = [sys.executable, __file__, "--child", str(i), "--seconds", str(share)]
            cmd += ["--out", str(work / f"{i}.json"), "--engine", engine]
            log = (work / f"{i}.log").open("w")
            running.append(subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log))
        time.sleep(0.5)
        running = [p for p in running if p.poll() is None]
    total, crashed = 0, 0
    print(f"{'parser':<28} {'executions':>12}  crash classes")
    for i in chosen:
        path = work / f"{i}.json"
        result = json.loads(path.read_text()) if path.exists() else {"executions": 0, "crashes": {}}
        final = _final_executions(work / f"{i}.log")  # libFuzzer's count includes the last seconds
        result["executions"] = max(result["executions"], final)
        total += result["executions"]
        crashed += len(result["crashes"])
        print(f"{names[i]:<28} {result['executions']:>12}  {len(result['crashes'])}")
        for key, entry in sorted(result["crashes"].items()):
            print(f"    {key} ({entry['count']}x): {entry['input'][:160]!r}")
    print(f"total {total} executions, {crashed} crash classes, {args.seconds:.0f} s on {args.jobs} jobs")
    return 1 if crashed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
