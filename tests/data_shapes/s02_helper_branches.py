import tensorflow as tf
def get_strategy(use_tpu):
    if use_tpu:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        return tf.distribute.TPUStrategy(resolver)
    return tf.distribute.MirroredStrategy()
def make_model():
    return tf.keras.Sequential([tf.keras.layers.Dense(1)])
strategy = get_strategy(False)
model = make_model()  # expect: TFP101
with strategy.scope():
    model.compile(optimizer="sgd", loss="mse")
