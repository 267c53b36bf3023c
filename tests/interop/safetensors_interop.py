"""K4: reads a checkpoint written by varsync with the reference safetensors
library, checks its values and metadata, and writes a file for varsync.

Usage: safetensors_interop.py FROM_VARSYNC OUT_FOR_VARSYNC
"""
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


def main(src, dst):
    t = load_file(src)
    assert t["weights"].dtype == np.float32, t["weights"].dtype
    np.testing.assert_array_equal(t["weights"], np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    assert t["hits"].dtype == np.int64 and t["hits"].shape == ()
    assert int(t["hits"]) == 7, t["hits"]
    assert t["loss"].dtype == np.float64 and float(t["loss"]) == 2.5
    assert t["scratch/replica_0"].dtype == np.int32
    assert int(t["scratch/replica_0"][0]) == 10 and int(t["scratch/replica_1"][0]) == 20
    assert t["half"].dtype == np.float16
    np.testing.assert_array_equal(t["half"], np.array([0.5, -2.0], np.float16))
    with safe_open(src, framework="np") as f:
        meta = f.metadata()
    assert meta["format"] == "varsync-checkpoint", meta
    assert meta["hits.synchronization"] == "on_read" and meta["hits.aggregation"] == "sum"
    assert meta["scratch.per_component"] == "true" and meta["scratch.replicas"] == "2"

    out = {
        "weights": np.array([[6, 5, 4], [3, 2, 1]], np.float32),
        "hits": np.array(9, np.int64),
        "loss": np.array(-1.25, np.float64),
        "scratch/replica_0": np.array([11], np.int32),
        "scratch/replica_1": np.array([21], np.int32),
        "half": np.array([1.5, 4.0], np.float16),
    }
    save_file(out, dst, metadata={"scratch.replicas": "2", "scratch.per_component": "true"})
    print("python side OK")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
