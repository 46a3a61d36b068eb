"""TFP105: tf.Variable created outside the scope, updated in strategy.run."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
counter = tf.Variable(0.0)  # expect: TFP105


@tf.function
def step():
    def replica_fn():
        counter.assign_add(1.0)
        return counter.read_value()

    return strategy.run(replica_fn)


for _ in range(5):
    step()
print("counter", counter.numpy())
