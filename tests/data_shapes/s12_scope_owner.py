# A trainer that is never built in this file: its __init__ makes the strategy (or enters its scope)
# itself, so no caller can have that scope open; what __init__ makes outside the `with` is outside.
import tensorflow as tf


def make_model():
    return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])


class Trainer:
    def __init__(self):
        self.strategy = tf.distribute.MirroredStrategy()
        self.model = make_model()  # expect: TFP101
        with self.strategy.scope():
            self.optimizer = tf.keras.optimizers.SGD()  # no slots: nothing built lazily in the traced step (TFP113)

    def _step(self, x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(self.model(x))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))

    @tf.function
    def train_step(self, x):
        self.strategy.run(self._step, args=(x,))


class Queue:
    """The strategy arrives as a parameter from code not in this file: what the module does with it
    (its scope taken, `run(fn, args=...)`) says it is one."""

    def __init__(self, strategy):
        self.buf = self._make()  # expect: TFP105
        with strategy.scope():
            self.w = tf.Variable(1.0)

    def _make(self):
        return tf.Variable(tf.zeros([4]))

    def step(self, x):
        self.buf.assign_add(x)
        return x * self.w

    def train(self, strategy, batches):
        for b in batches:
            strategy.run(self.step, args=(b,))
