"""Crash symptom "using a PerReplica object while not inside a replica context" (TFP508): a TensorFlow
op given the PerReplica result of strategy.run."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
per_replica = strategy.run(lambda: tf.ones([2]))
print(float(tf.reduce_mean(per_replica)))  # expect: TFP508
