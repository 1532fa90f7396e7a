"""End-to-end time and peak memory of one suite test through a kernel and a validator.

Default: the largest suite test (N 256, C 3, 224×224, K 64, 7×7, stride 2, pad 3: 205,520,896
outputs, gemmK 147, 30 G multiply-adds per model) through the MI200 xdlops kernel and the CPU
validation (issue 3 target: under 60 s on 2 cores, within 8 GiB).

    python benchmarks/bench_conv.py [--test NAME] [--hw mi200] [--kernel xdlops] [--validator cpu]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validation.run import run  # noqa: E402
from validation.suites import suite_config  # noqa: E402

LARGEST = "padding_kernel_gemmK_CHECK_RESNET50_F16_CONFIG1"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--test", default=LARGEST)
    ap.add_argument("--hw", default="mi200")
    ap.add_argument("--kernel", default="xdlops")
    ap.add_argument("--validator", default="cpu")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "conv.json"))
    args = ap.parse_args()

    config = suite_config(args.test)
    warm = suite_config("conv2d_host_validation_f16_fwd_CHECK_PADDING3_f16")
    run(warm, hw=args.hw, kernel=args.kernel, validator=args.validator, progress=False)  # compile / load cache
    t0 = time.perf_counter()
    result = run(config, hw=args.hw, kernel=args.kernel, validator=args.validator)
    seconds = time.perf_counter() - t0
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    macs = sum(s.g * s.m * s.n * s.k for s in config.gemms)
    doc = dict(
        test=args.test,
        hw=args.hw,
        kernel=result.kernel.name,
        validator=result.validator.name,
        outputs=int(result.kernel_output.size),
        seconds=seconds,
        peak_rss_gib=peak_gib,
        macs_per_model=macs,
        machine=platform.platform(),
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
