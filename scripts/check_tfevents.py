#!/usr/bin/env python3
"""Checks a TensorBoard event file of `zero train` against the run's --log-json records.

  check_tfevents.py EVENTS LOG.jsonl            parses EVENTS with the standard library only
                                                (its own CRC32C and protobuf reader): every
                                                record's framing and CRCs, the version record,
                                                then the scalars, tags and steps of each step
                                                record of LOG.jsonl
  check_tfevents.py --tensorboard DIR LOG.jsonl reads DIR with the tensorboard package's
                                                EventAccumulator; exit 77 when it is missing

The tags are zero's (docs/CLI.md, "TensorBoard"); values are float32 as TensorBoard stores them.
Prints one line per problem and exits 1, or "ok ..." and exits 0.
"""
import json
import math
import struct
import sys

# tag -> how to read its value out of a --log-json step record (None: not in this record)
TAGS = {
    "train/loss": lambda r: r["loss"],
    "train/learning_rate": lambda r: r["lr"],
    "train/grad_norm": lambda r: r["grad_norm"],
    "train/tokens_per_s": lambda r: r["tokens_per_s"],
    "memory/peak_bytes": lambda r: r["mem"]["total"] + r["mem"]["activations"],
    "memory/rss_peak_bytes": lambda r: r["rss_peak"],
    "eval/loss": lambda r: r["val_loss"] if "val_loss" in r else None,
}


def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


TABLE = crc32c_table()


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = TABLE[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(b):
    c = crc32c(b)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(b, i):
    v, shift = 0, 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value) of a protobuf message; unknown wire types are errors."""
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % w)
        out.append((f, w, v))
    if i != len(b):
        raise ValueError("message overruns its length")
    return out


def records(path):
    b = open(path, "rb").read()
    i = 0
    while i < len(b):
        head = b[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (hc,) = struct.unpack("<I", b[i + 8:i + 12])
        if hc != masked(head):
            raise ValueError("record at byte %d: length CRC %08x, expected %08x" % (i, hc, masked(head)))
        data = b[i + 12:i + 12 + n]
        (dc,) = struct.unpack("<I", b[i + 12 + n:i + 16 + n])
        if len(data) != n or dc != masked(data):
            raise ValueError("record at byte %d: data CRC %08x, expected %08x" % (i, dc, masked(data)))
        yield data
        i += 16 + n


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def same(tag, got, want):
    if want is None:  # a non-finite value is null in the log
        return not math.isfinite(got)
    if tag == "train/tokens_per_s":  # the log rounds it to 0.1
        return abs(got - want) <= 0.05 + 1e-6 * abs(want)
    return got == f32(want) or abs(got - want) <= 1e-6 * abs(want)


def expected(log):
    want = {}  # (tag, step) -> value
    for line in open(log):
        r = json.loads(line)
        if "step" not in r:
            continue
        for tag, get in TAGS.items():
            if tag == "eval/loss" and "val_loss" not in r:
                continue
            want[(tag, r["step"])] = get(r)
    return want


def compare(got, want):
    """got: (tag, step) -> list of values. Returns the problems."""
    bad = []
    for key, v in sorted(want.items()):
        vals = got.get(key, [])
        if len(vals) != 1:
            bad.append("%s step %d: %d events, expected 1" % (key[0], key[1], len(vals)))
        elif not same(key[0], vals[0], v):
            bad.append("%s step %d: %r, the log has %r" % (key[0], key[1], vals[0], v))
    for key in sorted(set(got) - set(want)):
        bad.append("%s step %d: not in the log" % key)
    return bad


def check_raw(path, log):
    got, first, n = {}, True, 0
    for data in records(path):
        n += 1
        ev = fields(data)
        names = [f for f, _, _ in ev]
        wall = [struct.unpack("<d", v)[0] for f, w, v in ev if f == 1 and w == 1]
        if len(wall) != 1 or not 1e9 < wall[0] < 1e10:
            raise ValueError("event %d: wall_time %r" % (n, wall))
        step = [v for f, w, v in ev if f == 2 and w == 0]
        if first:
            ver = [v for f, w, v in ev if f == 3 and w == 2]
            if ver != [b"brain.Event:2"]:
                raise ValueError("first event: file_version %r, expected brain.Event:2" % ver)
            first = False
            continue
        if sorted(names) != [1, 2, 5] or len(step) != 1:
            raise ValueError("event %d: fields %r, expected wall_time, step, summary" % (n, names))
        for f, w, summary in ev:
            if f != 5:
                continue
            for sf, sw, value in fields(summary):
                if (sf, sw) != (1, 2):
                    raise ValueError("event %d: summary field %d" % (n, sf))
                vf = {f2: v2 for f2, _, v2 in fields(value)}
                tag = vf[1].decode("utf-8")
                (x,) = struct.unpack("<f", vf[2])
                got.setdefault((tag, step[0]), []).append(x)
    if first:
        raise ValueError("no records")
    return got, n


def main(argv):
    if len(argv) == 4 and argv[1] == "--tensorboard":
        try:
            from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        except ImportError:
            print("SKIP: the tensorboard package is not installed (pip install tensorboard)")
            return 77
        acc = EventAccumulator(argv[2], size_guidance={"scalars": 0})
        acc.Reload()
        got = {}
        for tag in acc.Tags()["scalars"]:
            for s in acc.Scalars(tag):
                got.setdefault((tag, s.step), []).append(s.value)
        bad = compare(got, expected(argv[3]))
        what = "tensorboard's EventAccumulator read %d scalars" % sum(len(v) for v in got.values())
    elif len(argv) == 3:
        try:
            got, n = check_raw(argv[1], argv[2])
        except (ValueError, KeyError, IndexError, struct.error) as e:
            print("%s: %s" % (argv[1], e))
            return 1
        bad = compare(got, expected(argv[2]))
        what = "%d records, CRCs good, %d scalars" % (n, sum(len(v) for v in got.values()))
    else:
        print(__doc__)
        return 2
    for b in bad:
        print(b)
    if bad:
        return 1
    print("ok " + what + ", as the log has them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
