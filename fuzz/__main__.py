"""`python -m fuzz [--seconds N] [--out DIR] [target ...]`: run fuzz targets one after another.

Each target runs in its own process under libFuzzer for N seconds (default 120) with a corpus in
DIR/<target>/corpus (seeded the first time, kept and grown across runs) and NUMBA_BOUNDSCHECK=1;
an input that breaks the target's property is written to DIR/<target>/ with libFuzzer's
``crash-``, ``timeout-`` or ``oom-`` prefix (libFuzzer stops at the first) and the run goes on
to the next target. The last
lines print, per target: executions, coverage (edges of our Python code), corpus size and
findings. Exit status 1 when any target found something.

The RSS limit is generous (8 GB): under atheris the fuzzing process grows by a few hundred MB a
minute whatever the target (the same inputs replayed in a plain loop hold a steady RSS), so a
small limit reports that growth as an out-of-memory finding.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import time

TARGETS = ("decoder_bytes", "decoder_tables", "encoder_tables", "otlp", "store_files", "wal_frames", "ack_frames", "segment_fields")


def run(target: str, seconds: int, out: str) -> dict[str, str]:
    home = os.path.join(out, target)
    corpus = os.path.join(home, "corpus")
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": os.path.join(out, "numba-cache"),
           "FUZZ_STORE_TEMPLATE": os.path.abspath(os.path.join(out, "store-template"))}
    if not os.path.isdir(corpus):
        os.makedirs(corpus)
        seed = f"import fuzz.{target} as t; t.seed({corpus!r})"  # in a child: seeding imports with env set
        subprocess.run([sys.executable, "-c", seed], env=env, check=True)
    flags = [f"-max_total_time={seconds}", f"-artifact_prefix={home}/", "-timeout=60", "-rss_limit_mb=8000",
             "-max_len=200000", "-print_final_stats=1"]
    log = os.path.join(home, "fuzz.log")
    started = time.time()
    with open(log, "w") as f:
        status = subprocess.run([sys.executable, "-m", f"fuzz.{target}", corpus, *flags], stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    with open(log, errors="replace") as f:
        text = f.read()
    stat = dict(re.findall(r"^stat::(\w+):\s+(\d+)", text, re.M))
    coverage = re.findall(r"cov: (\d+)", text)
    findings = sorted(  # this run's: earlier runs' findings stay in the folder
        os.path.basename(p) for p in glob.glob(os.path.join(home, "*-*")) if not p.endswith(".log") and os.path.getmtime(p) >= started
    )
    return {
        "target": target,
        "runs": stat.get("number_of_executed_units", "?"),
        "coverage": coverage[-1] if coverage else "?",
        "corpus": str(len(os.listdir(corpus))),
        "findings": ", ".join(findings) or ("none" if status == 0 else f"exit {status}: see {log}"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", metavar="target", help=f"any of {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--seconds", type=int, default=120, help="per target (default 120)")
    parser.add_argument("--out", default="fuzz-output", help="corpora, logs and findings (default fuzz-output)")
    args = parser.parse_args()
    unknown = sorted(set(args.targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s) {unknown}; choose from {', '.join(TARGETS)}")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for target in args.targets or TARGETS:
        print(f"fuzzing {target} for {args.seconds} s ...", flush=True)
        rows.append(run(target, args.seconds, args.out))
    print(f"{'target':<16}{'runs':>10}{'coverage':>10}{'corpus':>8}  findings")
    for r in rows:
        print(f"{r['target']:<16}{r['runs']:>10}{r['coverage']:>10}{r['corpus']:>8}  {r['findings']}")
    return 1 if any(r["findings"] != "none" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
