"""Fails before the flagged line runs."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
config = {"batch": 8}
size = config["global_batch"]
counter = tf.Variable(0.0)  # expect: TFP105
strategy.run(lambda: counter.assign_add(1.0))
