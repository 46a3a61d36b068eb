"""Blocks forever after creating the strategy."""
import threading

import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
counter = tf.Variable(0.0)  # expect: TFP105
threading.Event().wait()
strategy.run(lambda: counter.assign_add(1.0))
