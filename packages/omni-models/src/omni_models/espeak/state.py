"""Put libespeak-ng's waveform generator back in its start state before each utterance.

libespeak-ng keeps its waveform generator's state in file-level statics (the
glottal phase, sample counters, the pitch-flutter index, the echo buffer, the
Klatt filters) and no call of its API resets them, not even
``espeak_Initialize``: the same text spoken twice in one process gives
different samples (and lengths a few samples apart), so identical requests got
different audio depending on what the worker had spoken before.

This module reads the library's own ELF symbol table (no ``nm`` needed) for
those statics, snapshots their bytes right after initialisation, and writes
them back before every utterance; together with selecting the voice again
(which resets the voice-dependent part), an utterance then sounds exactly as
it does first thing in a fresh process. Only plain numeric state is restored,
never a pointer. When the library has no symbol table (a stripped build), the
reset is unavailable and :attr:`StateReset.available` says so.
"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass

# wavegen.c and klatt.c statics holding numbers only (a static local carries a ".N" suffix in the table)
_STATE = frozenset({
    "Flutter_inc", "Flutter_ix", "amp_ix", "cycle_count", "cycle_samples", "echo_amp", "echo_buf", "echo_complete",
    "echo_head", "echo_length", "echo_tail", "end_wave", "espeak_rand_state", "glotlast", "glottal_flag", "glottal_reduce",
    "hswitch", "klattp", "klattp1", "klattp_inc", "kt_frame", "kt_globals", "last_amp_cmd", "last_pitch_cmd", "nlast",
    "nsamples", "phaseinc", "prev_fr", "samplecount", "samplecount_start", "vlast", "voicing", "wavephase", "wdata",
})
_SHT_SYMTAB, _STT_OBJECT = 2, 1


@dataclass(frozen=True)
class _Region:
    address: int
    saved: bytes


class StateReset:
    """Snapshot of the generator's statics in a loaded libespeak-ng, restorable before each utterance."""

    def __init__(self, library_path: str) -> None:
        self.missing: tuple[str, ...] = ()
        self._regions: tuple[_Region, ...] = ()
        base = _load_base(library_path)
        symbols = _object_symbols(library_path) if base is not None else []
        found = {name.split(".", 1)[0] for name, _, _ in symbols}
        self.missing = tuple(sorted(_STATE - found))
        if base is None or self.missing:
            return
        self._regions = tuple(_Region(base + value, ctypes.string_at(base + value, size)) for _, value, size in symbols if size > 0)

    @property
    def available(self) -> bool:
        return bool(self._regions)

    def restore(self) -> None:
        for region in self._regions:
            ctypes.memmove(region.address, region.saved, len(region.saved))


def _load_base(library_path: str) -> int | None:
    """Where the dynamic loader mapped ``library_path`` in this process (its first mapping)."""
    real = os.path.realpath(library_path)
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            starts = [int(line.split("-", 1)[0], 16) for line in maps if line.rstrip().endswith(real)]
    except OSError:
        return None
    return min(starts) if starts else None


def _object_symbols(path: str) -> list[tuple[str, int, int]]:
    """The generator's data objects in an ELF64 little-endian shared object: (name, offset from the load base, size).

    Two files may each have a static of one name (``end_wave``): both are listed."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out: list[tuple[str, int, int]] = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != _SHT_SYMTAB or not entsize:
            continue
        strtab_offset = sections[link][4]
        for start in range(offset, offset + size, entsize):
            name_at, info, _other, shndx, value, sym_size = struct.unpack_from("<IBBHQQ", data, start)
            if info & 0xF != _STT_OBJECT or shndx == 0:
                continue
            end = data.index(b"\0", strtab_offset + name_at)
            name = data[strtab_offset + name_at:end].decode("ascii", "replace")
            if name.split(".", 1)[0] in _STATE:
                out.append((name, value, sym_size))
    return out
