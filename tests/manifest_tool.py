#!/usr/bin/env python3
# Edits a checkpoint's manifest.json for the tests, signing it again or not: the checksum is the
# manifest's last key, "manifest_crc32c", the CRC32C (8 lowercase hex digits) of every byte before
# that key (docs/CHECKPOINT.md). Independent of the C code: the table-free bitwise CRC32C.
#   manifest_tool.py edit FILE 'PYTHON' [--nosign]   run PYTHON on the parsed manifest `m`, write it back
#   manifest_tool.py sign FILE                        recompute the checksum of the text as it is
import json
import sys

KEY = "manifest_crc32c"


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def signed(m):
    """The manifest as text, with a fresh checksum as its last key."""
    m = dict(m)
    m.pop(KEY, None)
    prefix = json.dumps(m, indent=1)[:-2] + ",\n "
    return prefix + '"%s": "%08x"\n}\n' % (KEY, crc32c(prefix.encode()))


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "edit":
        m = json.load(open(path))
        exec(sys.argv[3], {"m": m})
        text = signed(m) if "--nosign" not in sys.argv[4:] else json.dumps(m, indent=1) + "\n"
    elif cmd == "sign":
        raw = open(path).read()
        at = raw.rindex('"%s"' % KEY)
        tail = raw[at:]
        end = tail.index("}", tail.index(":"))
        text = raw[:at] + '"%s": "%08x"' % (KEY, crc32c(raw[:at].encode())) + tail[end:]
    else:
        sys.exit("usage: manifest_tool.py edit|sign FILE ...")
    open(path, "w").write(text)


if __name__ == "__main__":
    main()
