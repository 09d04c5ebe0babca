"""Seeded randomness for the generator: one numpy Generator for bulk draws and one random.Random
for cheap scalar draws, both derived from the caller's seed and a stream name, never from global
state or the wall clock, so equal arguments give byte-identical output."""

from __future__ import annotations

import bisect
import random
import zlib

import numpy as np

_POOL_BYTES = 1 << 16
_ALNUM = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet Kubernetes uses for generated name suffixes
_HEX = "0123456789abcdef"
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class Entropy:
    """Random source of one generator run.

    Trace and span ids come from a pool of random bytes refilled in 64 KiB blocks: W3C random ids
    as SDKs make them (every bit random, never all zero), cheap to hand out one at a time.
    """

    def __init__(self, seed: int, stream: str) -> None:
        seq = np.random.SeedSequence([seed, zlib.crc32(stream.encode())])
        self.np = np.random.default_rng(seq)
        self.py = random.Random(int.from_bytes(seq.generate_state(4, np.uint64).tobytes(), "little"))
        self._pool = b""
        self._pos = 0

    def _take(self, n: int) -> bytes:
        if self._pos + n > len(self._pool):
            self._pool = self.np.bytes(_POOL_BYTES)
            self._pos = 0
        out = self._pool[self._pos : self._pos + n]
        self._pos += n
        return out

    def _id(self, n: int) -> bytes:
        out = self._take(n)
        while not any(out):  # an all-zero id is invalid in W3C trace context and OTLP
            out = self._take(n)
        return out

    def trace_id(self) -> bytes:
        return self._id(16)

    def span_id(self) -> bytes:
        return self._id(8)

    def k8s_suffix(self, n: int) -> str:
        return "".join(self.py.choices(_ALNUM, k=n))

    def hex(self, n: int) -> str:
        return "".join(self.py.choices(_HEX, k=n))

    def uuid4(self) -> str:
        h = self._take(16).hex()
        variant = _HEX[8 + (int(h[16], 16) & 3)]
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"

    def ulid(self, time_ns: int) -> str:
        """A ULID (48-bit millisecond time, 80 random bits, Crockford base32), as ``log.record.uid``."""
        value = ((time_ns // 1_000_000) << 80) | int.from_bytes(self._take(10), "big")
        return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))

    def lognormal_ns(self, median_ns: float, sigma: float) -> int:
        """A long-tailed duration in nanoseconds with the given median."""
        return max(1, int(median_ns * self.py.lognormvariate(0.0, sigma)))

    def weighted_index(self, cumulative: list[float]) -> int:
        """Index drawn from cumulative weights (as produced by itertools.accumulate)."""
        return bisect.bisect_right(cumulative, self.py.random() * cumulative[-1])
