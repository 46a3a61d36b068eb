"""TFP401: tf.random.set_seed inside the replica function (eager strategy.run)."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()


def replica_fn():
    tf.random.set_seed(3)  # expect: TFP401
    noise = tf.random.uniform([4])
    return noise


for _ in range(3):
    strategy.run(replica_fn)
