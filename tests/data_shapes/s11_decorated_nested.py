import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
def outer():
    ds = tf.data.Dataset.from_tensor_slices(tf.zeros([8, 2])).batch(4)
    def step(x):
        return x * 2
    @tf.function
    def train(batch):
        return strategy.run(step, args=(batch,))
    for b in ds:
        train(b)  # expect: TFP201
outer()
