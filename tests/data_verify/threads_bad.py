"""TFP301: read-modify-write of a shared tf.Variable from several threads."""
import threading

import tensorflow as tf

total = tf.Variable(0.0)


def worker(n):
    for _ in range(n):
        total.assign(total + 1.0)  # expect: TFP301


threads = [threading.Thread(target=worker, args=(200,)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("total", total.numpy(), "expected", 800)
