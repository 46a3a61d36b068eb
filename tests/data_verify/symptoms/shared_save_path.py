"""Crash symptom "allow_missing_files was set to false" (TFP604): both workers write a checkpoint to
the same path, 40 times; their temporary shards collide and a merge fails (on TensorFlow 2.21 about
one write in five failed on each worker)."""
import os
import tempfile

import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    weights = tf.Variable(tf.zeros([256, 256]))
checkpoint = tf.train.Checkpoint(weights=weights)
path = os.path.join(tempfile.gettempdir(), "shared_save_path", "ckpt")
for _ in range(40):
    checkpoint.write(path)  # expect: TFP604
print("written")
