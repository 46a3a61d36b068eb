"""Crash symptom "Found an unshardable source dataset" (TFP206): FILE auto-sharding of an in-memory
dataset, distributed by two workers (fixtures/TFP206/bad.py without its try)."""
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
features = np.arange(32, dtype="float32").reshape(16, 2)
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
dataset = tf.data.Dataset.from_tensor_slices(features).batch(4).with_options(options)  # expect: TFP206
for batch in strategy.experimental_distribute_dataset(dataset):
    print(strategy.experimental_local_results(batch)[0].shape)
