"""Crash symptom "'PerReplica' object has no attribute 'numpy'" (TFP506): .numpy() on the PerReplica
result of strategy.run."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
per_replica = strategy.run(lambda: tf.ones([2]))
print(per_replica.numpy())  # expect: TFP506
