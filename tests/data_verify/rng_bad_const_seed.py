"""TFP402: constant op-level seed inside the replica function (tf.function)."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()


@tf.function
def step():
    def replica_fn():
        return tf.random.normal([4], seed=7)  # expect: TFP402

    return strategy.run(replica_fn)


for _ in range(5):
    step()
