"""Crash symptom "Trying to create optimizer slot variable under the scope" (TFP102): a legacy tf_keras
optimizer made outside the scope, restored from a checkpoint outside the scope (the linter leaves legacy
optimizers alone; the run shows the mistake)."""
import os
import tempfile

import numpy as np
import tensorflow as tf
import tf_keras

strategy = tf.distribute.MirroredStrategy()
x = np.ones((8, 4), "float32")
y = np.ones((8, 1), "float32")
with strategy.scope():
    model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(4,))])
    optimizer = tf_keras.optimizers.legacy.Adam(0.01)
    model.compile(optimizer=optimizer, loss="mse")
model.fit(x, y, epochs=1, verbose=0)
path = tf.train.Checkpoint(model=model, optimizer=optimizer).save(os.path.join(tempfile.mkdtemp(), "ckpt"))

with strategy.scope():
    restored = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(4,))])
restored_optimizer = tf_keras.optimizers.legacy.Adam(0.01)
tf.train.Checkpoint(model=restored, optimizer=restored_optimizer).restore(path)  # raises: the slots' scope
with strategy.scope():
    restored.compile(optimizer=restored_optimizer, loss="mse")
restored.fit(x, y, epochs=1, verbose=0)
