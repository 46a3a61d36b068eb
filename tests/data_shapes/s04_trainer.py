import tensorflow as tf
def build_model():
    return tf.keras.Sequential([tf.keras.layers.Dense(1)])
class Trainer:
    def __init__(self):
        self.strategy = tf.distribute.MirroredStrategy()
        self.model = build_model()  # expect: TFP101
        with self.strategy.scope():
            self.optimizer = tf.keras.optimizers.Adam()  # expect: TFP113
        self.ds = tf.data.Dataset.from_tensor_slices(tf.zeros([8, 2])).batch(4)
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
            self.train_step(batch)  # expect: TFP201
Trainer().fit()
