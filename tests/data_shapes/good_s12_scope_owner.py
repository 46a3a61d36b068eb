import tensorflow as tf


def make_model():
    return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])


class Trainer:
    def __init__(self):
        self.strategy = tf.distribute.MirroredStrategy()
        with self.strategy.scope():
            self.model = make_model()
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
    def __init__(self, strategy):
        with strategy.scope():
            self.buf = self._make()
            self.w = tf.Variable(1.0)

    def _make(self):
        return tf.Variable(tf.zeros([4]))

    def step(self, x):
        self.buf.assign_add(x)
        return x * self.w

    def train(self, strategy, batches):
        total = 0.0
        for b in batches:
            out = strategy.run(self.step, args=(b,))
            if strategy.num_replicas_in_sync > 1:
                total += strategy.reduce(tf.distribute.ReduceOp.SUM, out, axis=None)
            else:
                total += out  # one replica: a plain tensor
        return total
