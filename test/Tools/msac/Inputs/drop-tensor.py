"""Removes one tensor's entry from a safetensors header, leaving its bytes
in the data section (a hole): `drop-tensor.py FILE TENSOR`."""
import json
import struct
import sys

path, name = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    blob = f.read()
(length,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + length])
del header[name]
text = json.dumps(header).encode()
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + blob[8 + length:])
