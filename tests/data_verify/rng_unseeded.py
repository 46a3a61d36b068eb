"""TFP403: unseeded global stateful RNG inside the replica function."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()


@tf.function
def step():
    def replica_fn():
        return tf.random.uniform([4])  # expect: TFP403

    return strategy.run(replica_fn)


for _ in range(3):
    step()
