#!/usr/bin/env python3
"""Compares the caches and the logits of two `msac-run bench-decode --dump`
folders byte for byte, finding each file through the buffer names in
dump.json (buffer ids differ between artifacts). Prints one line per
buffer; exits 1 when any differs."""
import json
import sys


def named_files(folder):
    dump = json.load(open(folder + "/dump.json"))
    files = {}
    for buffer in dump["buffers"].values():
        if buffer["name"].startswith(("k_cache.", "v_cache.", "index_cache.")):
            files[buffer["name"]] = buffer["file"]
    logits = [l for l in dump["launches"] if l["op"] == "msa.logits"][-1]
    files["logits"] = dump["buffers"][str(logits["buffers"][-1])]["file"]
    return files


def main():
    a, b = sys.argv[1], sys.argv[2]
    fa, fb = named_files(a), named_files(b)
    if sorted(fa) != sorted(fb):
        print("buffer names differ: %s vs %s" % (sorted(fa), sorted(fb)))
        return 1
    status = 0
    for name in sorted(fa):
        da = open(a + "/" + fa[name], "rb").read()
        db = open(b + "/" + fb[name], "rb").read()
        same = da == db
        print("%s %s (%d bytes)" % (name, "identical" if same else "DIFFERS",
                                    len(da)))
        status |= not same
    return status


if __name__ == "__main__":
    sys.exit(main())
