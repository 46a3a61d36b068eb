"""TFP202: values_fn ignores its context: every replica gets the same batch."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
batch = tf.random.uniform([8, 4])
per_replica = strategy.experimental_distribute_values_from_function(lambda ctx: batch)  # expect: TFP202


def replica_fn(b):
    return tf.reduce_mean(b)


for _ in range(2):
    strategy.run(replica_fn, args=(per_replica,))
