"""Read chosen members of a wheel on PyPI with HTTP range requests, without downloading it whole.

A TensorFlow wheel is 400-650 MB, of which the Python sources are a few percent.  A zip archive
ends with its central directory (the list of members with their offsets), so three kinds of
request are enough: the tail of the file (the end-of-central-directory record), the central
directory, and the byte ranges of the wanted members, merged where they lie close together.
Used by ``scripts/gen_api_table.py`` only; the linter never touches the network.
"""
from __future__ import annotations

import json
import struct
import time
import urllib.request
import zlib
from dataclasses import dataclass
from typing import Callable, Iterable, Optional
from urllib.parse import urljoin

PYPI = "https://pypi.org/pypi/{name}/json"
USER_AGENT = "tfpar-lint gen_api_table (range reads of wheel sources)"


def _get(url: str, rng: Optional[tuple[int, int]] = None, tries: int = 4) -> tuple[bytes, Optional[int]]:
    """GET ``url`` (bytes ``rng`` inclusive); returns the body and the total size from Content-Range."""
    headers = {"User-Agent": USER_AGENT}
    if rng is not None:
        headers["Range"] = f"bytes={rng[0]}-{rng[1]}"
    for attempt in range(tries):
        try:
            req = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(req, timeout=120) as resp:
                body = resp.read()
                total = None
                cr = resp.headers.get("Content-Range")
                if cr and "/" in cr:
                    total = int(cr.rsplit("/", 1)[1])
                if rng is not None and resp.status == 200:
                    # the server ignored the range: cut the part asked for out of the whole body
                    total = len(body)
                    body = body[rng[0]:rng[1] + 1]
                return body, total
        except OSError:
            if attempt == tries - 1:
                raise
            time.sleep(2 * (attempt + 1))
    raise AssertionError("unreachable")


def releases(name: str) -> dict[str, list[dict]]:
    """PyPI's release files for the distribution ``name``: version -> file records (absolute URLs)."""
    url = PYPI.format(name=name)
    body, _ = _get(url)
    data = json.loads(body)
    out = {}
    for ver, files in data.get("releases", {}).items():
        recs = []
        for f in files:
            if f.get("yanked"):
                continue
            f = dict(f)
            f["url"] = urljoin(url, f["url"])
            recs.append(f)
        if recs:
            out[ver] = recs
    return out


@dataclass
class Member:
    name: str
    method: int
    csize: int
    usize: int
    offset: int  # of the local file header


class RemoteZip:
    """A zip archive at ``url``, read by ranges."""

    def __init__(self, url: str, size: Optional[int] = None):
        self.url = url
        tail_len = 1 << 16
        if size is None:
            _, size = _get(url, (0, 0))
        self.size = size
        start = max(0, size - tail_len)
        tail, _ = _get(url, (start, size - 1))
        i = tail.rfind(b"PK\x05\x06")
        if i < 0:
            raise ValueError(f"{url}: no end-of-central-directory record")
        (_, _, _, _, count, cd_size, cd_off, _) = struct.unpack("<4sHHHHIIH", tail[i:i + 22])
        j = tail.rfind(b"PK\x06\x07", 0, i)  # zip64 locator
        if j >= 0 and (cd_off == 0xFFFFFFFF or count == 0xFFFF):
            (z64_off,) = struct.unpack("<Q", tail[j + 8:j + 16])
            rec, _ = _get(url, (z64_off, z64_off + 55))
            count, _, cd_size, cd_off = struct.unpack("<QQQQ", rec[24:56])
        if cd_off >= start:
            cd = tail[cd_off - start:cd_off - start + cd_size]
        else:
            cd, _ = _get(url, (cd_off, cd_off + cd_size - 1))
        self.cd_offset = cd_off
        self.members: dict[str, Member] = {}
        p = 0
        while p + 46 <= len(cd) and cd[p:p + 4] == b"PK\x01\x02":
            (method, csize, usize, nlen, elen, clen, off) = struct.unpack(
                "<6xH8xIIHHH8xI", cd[p + 4:p + 46])
            name = cd[p + 46:p + 46 + nlen].decode("utf-8", "replace")
            extra = cd[p + 46 + nlen:p + 46 + nlen + elen]
            if 0xFFFFFFFF in (csize, usize, off):
                csize, usize, off = self._zip64(extra, csize, usize, off)
            self.members[name] = Member(name, method, csize, usize, off)
            p += 46 + nlen + elen + clen

    @staticmethod
    def _zip64(extra: bytes, csize: int, usize: int, off: int) -> tuple[int, int, int]:
        q = 0
        while q + 4 <= len(extra):
            tag, ln = struct.unpack("<HH", extra[q:q + 4])
            if tag == 1:
                vals = list(struct.unpack(f"<{ln // 8}Q", extra[q + 4:q + 4 + (ln // 8) * 8]))
                if usize == 0xFFFFFFFF and vals:
                    usize = vals.pop(0)
                if csize == 0xFFFFFFFF and vals:
                    csize = vals.pop(0)
                if off == 0xFFFFFFFF and vals:
                    off = vals.pop(0)
                break
            q += 4 + ln
        return csize, usize, off

    def read(self, names: Iterable[str], gap: int = 1 << 20,
             progress: Optional[Callable[[int], None]] = None) -> dict[str, bytes]:
        """The uncompressed bytes of ``names``; members closer than ``gap`` bytes share one request."""
        wanted = sorted((self.members[n] for n in names), key=lambda m: m.offset)
        if not wanted:
            return {}
        # the end of a member is the start of the next one in the archive (or the central directory)
        starts = sorted(m.offset for m in self.members.values()) + [self.cd_offset]
        import bisect

        def end_of(m: Member) -> int:
            k = bisect.bisect_right(starts, m.offset)
            return starts[k] if k < len(starts) else self.size

        groups: list[list[Member]] = [[wanted[0]]]
        for m in wanted[1:]:
            if m.offset - end_of(groups[-1][-1]) <= gap:
                groups[-1].append(m)
            else:
                groups.append([m])
        out: dict[str, bytes] = {}
        for g in groups:
            lo, hi = g[0].offset, end_of(g[-1]) - 1
            blob, _ = _get(self.url, (lo, hi))
            if progress:
                progress(len(blob))
            for m in g:
                h = m.offset - lo
                if blob[h:h + 4] != b"PK\x03\x04":
                    raise ValueError(f"{self.url}: bad local header for {m.name}")
                nlen, elen = struct.unpack("<HH", blob[h + 26:h + 30])
                d = h + 30 + nlen + elen
                raw = blob[d:d + m.csize]
                if m.method == 0:
                    data = raw
                elif m.method == 8:
                    data = zlib.decompress(raw, -15)
                else:
                    raise ValueError(f"{m.name}: compression method {m.method} not supported")
                out[m.name] = data
        return out
