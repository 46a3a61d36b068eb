import tensorflow as tf
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # expect: TFP101
with tf.distribute.MirroredStrategy().scope():
    model.compile(optimizer="sgd", loss="mse")
