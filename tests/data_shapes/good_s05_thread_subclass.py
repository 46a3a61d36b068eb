import threading
import tensorflow as tf
class Worker(threading.Thread):
    def __init__(self, counter, lock):
        super().__init__()
        self.counter = counter
        self.lock = lock
    def run(self):
        for _ in range(100):
            with self.lock:
                self.counter.assign(self.counter + 1)
counter = tf.Variable(0.0)
lock = threading.Lock()
workers = [Worker(counter, lock) for _ in range(4)]
for w in workers:
    w.start()
for w in workers:
    w.join()
