"""Peer for rows 2, 3 and 4: TensorFlow's tf.distribute.MirroredStrategy over
N logical CPU devices (the one physical CPU split with
tf.config.set_logical_device_configuration), measured on this machine in the
same suite run as varsync.

  control   cross-replica (eager) assign and read of a scalar tf.Variable,
            ON_WRITE and ON_READ (SUM): median and p99 latency of
            sequential calls (compare with varsync's blocking API)
  local     replica-context assign_add(1.0) on an ON_READ (SUM) variable:
            strategy.run of a step looping M times inside a tf.function,
            M / wall time = updates/s per replica
  allreduce ctx.all_reduce(SUM) of a per-replica float32 tensor of S bytes,
            strategy.run inside a tf.function: median time per call
  assign_add  v.assign_add(grad) on an ON_WRITE (SUM) variable of S bytes in
            replica context (strategy.run in a tf.function): what varsync's
            row 4 step does (the all-reduce plus the update of every copy)

The per-replica inputs are built before the timed region. One process per N
(logical devices are fixed when TensorFlow initializes). Prints JSON lines
(keys tf.*) to stdout, or appends them to --json FILE.

  python tf_mirrored.py --replicas N [--quick] [--json FILE] [--sizes B ...]
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def summarize(samples):
    xs = sorted(samples)
    n = len(xs)
    rank = max(1, -(-99 * n // 100))  # nearest rank, ceil(0.99 n)
    return {"median": statistics.median(xs), "p99": xs[min(n, rank) - 1],
            "min": xs[0], "n": n}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--sizes", type=int, nargs="*",
                    default=[4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20])
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds of timed calls per size")
    args = ap.parse_args()
    n = args.replicas
    out = open(args.json, "a") if args.json else sys.stdout

    def record(key, value, unit, **extra):
        rec = {"key": key, "value": value, "unit": unit}
        rec.update(extra)
        out.write(json.dumps(rec) + "\n")
        out.flush()

    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
    devices = ["/cpu:%d" % i for i in range(n)]
    strategy = tf.distribute.MirroredStrategy(devices)
    VS = tf.VariableSynchronization
    VA = tf.VariableAggregation
    tag = ".r%d" % n
    cross = getattr(strategy.extended, "_cross_device_ops", None)
    record("tf.version" + tag, 0, "", version=tf.__version__,
           cross_device_ops=type(cross).__name__ if cross else "default")

    # -- control plane: cross-replica (eager) assign and read ---------------------
    calls = 300 if args.quick else 1500
    with strategy.scope():
        w = tf.Variable(0.0, synchronization=VS.ON_WRITE, aggregation=VA.SUM)
        r = tf.Variable(0.0, synchronization=VS.ON_READ, aggregation=VA.SUM)
    one = tf.constant(1.0)
    for name, var in (("on_write", w), ("on_read", r)):
        for op, fn in (("assign", lambda: var.assign(one)),
                       ("read", lambda: var.read_value())):
            for _ in range(calls // 10):
                fn()
            us = []
            for _ in range(calls):
                t0 = time.perf_counter()
                fn()
                us.append((time.perf_counter() - t0) * 1e6)
            s = summarize(us)
            record("tf.control.%s.%s%s" % (name, op, tag), s["median"], "us",
                   p99=s["p99"], min=s["min"], n=s["n"])
            print("TF %d replicas: eager %s scalar %s: median %.1f us p99 %.1f us"
                  % (n, name, op, s["median"], s["p99"]), file=sys.stderr)

    # -- local updates: replica-context assign_add on an ON_READ variable ---------
    m = 200000 if args.quick else 1000000  # at most; see the calibration
    with strategy.scope():
        hits = tf.Variable(0.0, synchronization=VS.ON_READ, aggregation=VA.SUM)

    @tf.function
    def local_step(count):
        def fn():
            for _ in tf.range(count):
                hits.assign_add(1.0)
        strategy.run(fn)

    local_step(tf.constant(10))  # trace
    # Calibrate M so that one step takes about a second (0.3 s with --quick).
    t0 = time.perf_counter()
    local_step(tf.constant(1000))
    guess = 1000 / (time.perf_counter() - t0)
    m = int(min(m, max(1000, guess * (0.3 if args.quick else 1.0))))
    rates = []
    for _ in range(3):
        t0 = time.perf_counter()
        local_step(tf.constant(m))
        rates.append(m / (time.perf_counter() - t0))
    rate = statistics.median(rates)
    record("tf.local.step" + tag, rate, "1/s", m=m)
    print("TF %d replicas: replica-context assign_add x %d: %.0f updates/s per "
          "replica" % (n, m, rate), file=sys.stderr)

    # -- bulk: all-reduce and ON_WRITE assign_add of a float32 gradient ------------
    budget = args.budget if args.budget is not None else (0.3 if args.quick else 1.0)

    @tf.function
    def all_reduce(g):
        def fn(x):
            return tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, x)
        return strategy.run(fn, args=(g,))

    for size in args.sizes:
        count = size // 4
        grads = strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.fill([count], 1.0 / (1 << 20)))
        with strategy.scope():
            v = tf.Variable(tf.zeros([count]), synchronization=VS.ON_WRITE,
                            aggregation=VA.SUM)

        @tf.function
        def update(g):
            def fn(x):
                v.assign_add(x)
            strategy.run(fn, args=(g,))

        for what, fn in (("allreduce", lambda: all_reduce(grads)),
                         ("assign_add", lambda: update(grads))):
            fn()
            fn()  # trace and warm up
            secs = []
            spent = 0.0
            while len(secs) < 200 and (len(secs) < 3 or spent < budget):
                t0 = time.perf_counter()
                fn()
                t = time.perf_counter() - t0
                secs.append(t)
                spent += t
            s = summarize(secs)
            record("tf.%s.r%d.s%d" % (what, n, size), s["median"], "s",
                   bytes=size, replicas=n, min=s["min"], n=s["n"])
            print("TF %d replicas: %s %d bytes: median %.3f ms"
                  % (n, what, size, s["median"] * 1e3), file=sys.stderr)
        del v, grads


if __name__ == "__main__":
    main()
