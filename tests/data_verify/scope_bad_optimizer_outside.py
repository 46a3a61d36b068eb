"""TFP102: optimizer created outside the scope."""
import numpy as np
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
opt = keras.optimizers.Adam(1e-3)  # expect: TFP102
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=opt, loss="mse")
x = np.random.rand(64, 4).astype("float32")
y = np.random.rand(64, 1).astype("float32")
model.fit(x, y, batch_size=16, epochs=1, verbose=0)
