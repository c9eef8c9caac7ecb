"""Voice transcription on this machine (issue 30): the real-time factor (seconds of work per
second of audio, p50) and the peak memory, for a 10 s and a 60 s voice note.

    .venv/bin/python -m benchmarks.voice [--seconds 10 60] [--runs 5] [--warmup 1]

The real path from a voice note's bytes to its words: the clip is an Ogg/Opus file (as Telegram
sends), built at run time by repeating the committed fixture tests/fixtures/voice/tomatoes.ogg
(3.5 s of espeak-ng speech) with half a second of silence between repeats, then handed to the
host's `LocalTranscriber` with the bundled model (sha256-checked, int8 on the CPU, one thread per
transcription), which decodes it with PyAV and transcribes it with faster-whisper. Each size runs
in a process of its own, so its peak resident memory (model loaded, clip decoded, transcribed) is
its own. Printed per size: the model's load plus a first run, p50 and worst real-time factor over
the runs, words heard, resident memory after the first run and at its peak. Needs the voice
extra. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "voice" / "tomatoes.ogg"


def clip(seconds: float) -> bytes:
    """`seconds` of Ogg/Opus speech: the fixture repeated, half a second of silence between."""
    import av
    import numpy as np

    from bot.voice.whisper import SAMPLE_RATE, decode

    speech = (decode(FIXTURE.read_bytes(), 60) * 32767).astype(np.int16)
    pause = np.zeros(SAMPLE_RATE // 2, dtype=np.int16)
    wanted = int(seconds * SAMPLE_RATE)
    pieces: list[np.ndarray] = []
    while sum(len(p) for p in pieces) < wanted:
        pieces += [speech, pause]
    samples = np.concatenate(pieces)[:wanted]
    out = io.BytesIO()
    with av.open(out, "w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=48_000, layout="mono")
        stream.bit_rate = 24_000
        resampler = av.AudioResampler(format=stream.format.name, layout="mono", rate=48_000)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        for piece in resampler.resample(frame):
            for packet in stream.encode(piece):
                container.mux(packet)
        for piece in resampler.resample(None):
            for packet in stream.encode(piece):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / 1024 / 1024


async def _measure(seconds: float, runs: int, warmup: int) -> dict[str, float]:
    from bot.voice.local import build_transcriber
    from bot.voice.settings import VoiceSettings

    data = clip(seconds)
    transcriber = build_transcriber(VoiceSettings(max_seconds=max(int(seconds) + 1, 1)))
    if transcriber is None:
        raise SystemExit('the voice extra is not installed: pip install -e ".[voice]"')
    started = time.perf_counter()
    first = await transcriber.transcribe(data)  # loads the model, then transcribes once
    load_and_first = time.perf_counter() - started
    loaded_rss = _rss_mb()
    for _ in range(max(warmup - 1, 0)):
        await transcriber.transcribe(data)
    factors = []
    for _ in range(runs):
        started = time.perf_counter()
        await transcriber.transcribe(data)
        factors.append((time.perf_counter() - started) / first.seconds)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "seconds": first.seconds,
        "bytes": len(data),
        "first": load_and_first,
        "p50": statistics.median(factors),
        "worst": max(factors),
        "words": len(first.text.split()),
        "loaded_rss": loaded_rss,
        "peak_rss": peak,
    }


def _child(seconds: float, runs: int, warmup: int) -> dict[str, float]:
    command = [sys.executable, "-m", "benchmarks.voice", "--child", str(seconds)]
    command += ["--runs", str(runs), "--warmup", str(warmup)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the {seconds:g} s run failed:\n{done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.voice", description=__doc__)
    parser.add_argument("--seconds", type=float, nargs="+", default=[10.0, 60.0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        import structlog

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
        print(json.dumps(asyncio.run(_measure(args.child, args.runs, args.warmup))))
        return
    print(f"voice transcription, bundled Whisper tiny.en, int8, 1 thread each; {args.runs} runs")
    for seconds in args.seconds:
        f = _child(seconds, args.runs, args.warmup)
        print(
            f"{f['seconds']:5.1f} s clip ({f['bytes'] / 1024:.0f} KB Ogg/Opus): "
            f"real-time factor p50 {f['p50']:.3f} (worst {f['worst']:.3f}), "
            f"load + first run {f['first']:.1f} s, {f['words']:.0f} words; "
            f"RSS {f['loaded_rss']:.0f} MB after the first run, {f['peak_rss']:.0f} MB peak"
        )


if __name__ == "__main__":
    main()
