"""Shared tf.Variable updated from threads under a lock, and with assign_add."""
import threading

import tensorflow as tf

total = tf.Variable(0.0)
hits = tf.Variable(0.0)
lock = threading.Lock()


def worker(n):
    for _ in range(n):
        with lock:
            total.assign(total + 1.0)
        hits.assign_add(1.0)


threads = [threading.Thread(target=worker, args=(200,)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("total", total.numpy(), hits.numpy())
