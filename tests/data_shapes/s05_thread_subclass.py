import threading
import tensorflow as tf
class Worker(threading.Thread):
    def __init__(self, counter):
        super().__init__()
        self.counter = counter
    def run(self):
        for _ in range(100):
            self.counter.assign(self.counter + 1)  # expect: TFP301
counter = tf.Variable(0.0)
workers = [Worker(counter) for _ in range(4)]
for w in workers:
    w.start()
for w in workers:
    w.join()
