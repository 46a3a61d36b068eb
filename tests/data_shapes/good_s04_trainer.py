import tensorflow as tf
def build_model():
    return tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
class Trainer:
    def __init__(self):
        self.strategy = tf.distribute.MirroredStrategy()
        with self.strategy.scope():
            self.model = build_model()
            self.optimizer = tf.keras.optimizers.Adam()
            self.optimizer.build(self.model.trainable_variables)
        ds = tf.data.Dataset.from_tensor_slices(tf.zeros([8, 2])).batch(4)
        self.ds = self.strategy.experimental_distribute_dataset(ds)
    def step(self, batch):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(self.model(batch))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    @tf.function
    def train_step(self, batch):
        self.strategy.run(self.step, args=(batch,))
    def fit(self):
        for batch in self.ds:
            self.train_step(batch)
Trainer().fit()
