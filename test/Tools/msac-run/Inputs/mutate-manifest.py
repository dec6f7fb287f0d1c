"""Sets each field of a few manifest entries (the model description, the
first buffer of each kind, the first and last step of each schedule, the
weights file) to edge values, one at a time, and runs `msac-run
bench-decode` and `generate` on the host on each result: each run must
succeed or exit with an error (status 1-3), never die by a signal, hang or
report a sanitizer error. Prints the offending edits and exits 1 if any.

    mutate-manifest.py ARTIFACT MSAC_RUN WORKDIR"""
import copy, json, os, shutil, subprocess, sys

art, run, work = sys.argv[1:4]
base = json.load(open(os.path.join(art, "manifest.json")))
VALUES = [0, -1, 1, 3, 2**31, 2**63 - 1, 2**64 - 4096, -2**63, 1.5, "x",
          None, []]

def targets(m):
    # (description, container, key) triples for the fields to mutate.
    out = []
    for k in m["model"]:
        out.append(("model." + k, lambda mm, k=k: mm["model"], k))
    kinds = {}
    for i, b in enumerate(m["buffers"]):
        kinds.setdefault(b["kind"], i)
    for kind, i in kinds.items():
        for k in m["buffers"][i]:
            out.append((f"buffers[{i}].{k}", lambda mm, i=i: mm["buffers"][i], k))
    for sched in ("prefill", "decode"):
        for j in (0, len(m["schedules"][sched]) - 1):
            for k in m["schedules"][sched][j]:
                out.append((f"schedules.{sched}[{j}].{k}",
                            lambda mm, s=sched, j=j: mm["schedules"][s][j], k))
    for k in m["weights"]:
        out.append(("weights." + k, lambda mm: mm["weights"], k))
    return out

bad = 0
n = 0
for desc, get, key in targets(base):
    for v in VALUES:
        m = copy.deepcopy(base)
        get(m)[key] = v
        d = os.path.join(work, "m.msa")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(art, d, symlinks=True)
        json.dump(m, open(os.path.join(d, "manifest.json"), "w"))
        for cmd in (["bench-decode", d, "--device", "host", "--context", "256",
                     "--steps", "1", "--warmup", "0", "--batch", "2"],
                    ["generate", d, "-p", "hello there", "-n", "3",
                     "--device", "host"]):
            n += 1
            try:
                p = subprocess.run([run] + cmd, capture_output=True, text=True,
                                   timeout=60)
                rc = p.returncode
                err = p.stderr
            except subprocess.TimeoutExpired:
                rc, err = "timeout", ""
            if rc == "timeout" or rc < 0 or rc > 3 or "Sanitizer" in err:
                bad += 1
                print(f"{desc} = {v!r}: {cmd[0]} -> rc {rc}: "
                      f"{err.strip().splitlines()[-1][:200] if err.strip() else ''}")
print(f"{n} runs, {bad} bad")
sys.exit(1 if bad else 0)
