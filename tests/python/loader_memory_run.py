"""One Loader run for test_loader_memory.py, in a process of its own so its
peak resident size is the loader's: prints the memory bound the pipeline
checked against memory_limit and the peak (VmHWM) over the resident size
before the Loader was made, with torch already loaded.

usage: loader_memory_run.py BUILD_PYTHON DATA BATCH EPOCHS STEP_SECONDS"""
import json
import sys
import time

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402,F401  (loaded before the baseline, as in a training job)

import aquifer  # noqa: E402


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


data, batch, epochs, step_s = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
torch.set_num_threads(1)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # VmHWM starts again from the resident size now
base = status_kib("VmRSS")
loader = aquifer.Loader(data, batch_size=batch, image_size=224, memory_limit="64GiB")
# One pipeline per epoch, as an ImageNet-sized epoch gets: each next one
# opens while the last batches of the one before are consumed.
loader._epochs_per_run = lambda epoch: 1
bound = loader._run.source.stats()["memory_bound_bytes"]
steps = 0
for x, y in loader.epochs(epochs):  # the loop holds its current batch while it asks for the next
    if step_s:
        time.sleep(step_s)  # the model's step
    steps += 1
peak = (status_kib("VmHWM") - base) * 1024
print(json.dumps({"bound": bound, "peak": peak, "steps": steps, "batch_buffers": loader.stats()["batch_buffers"],
                  "payload_pool": loader.stats()["payload_pool_bytes"]}))
