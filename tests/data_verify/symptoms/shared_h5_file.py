"""Symptom 'unable to lock file' (TFP610): every worker writes the same HDF5 file, and one worker
opens it while the other still holds it.  A Keras `model.save("....h5")` on every worker has the same
race; here the worker that opens it first holds it for a few seconds, so the other one's open is
refused on every run (and the holder ends normally: the crash is the refused worker's own)."""
import os
import time

import h5py
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    w = tf.Variable([1.0, 2.0])


def sync():
    return strategy.reduce("SUM", strategy.run(lambda: w * 1.0), axis=None)


os.makedirs("tfp610_out", exist_ok=True)
sync()  # both workers are here
with h5py.File(os.path.join("tfp610_out", "weights.h5"), "w") as f:  # every worker: the same file
    f["w"] = w.numpy()
    time.sleep(5)  # held open while the other worker opens it too
print("saved")
