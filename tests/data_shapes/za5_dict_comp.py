import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
ds = tf.data.Dataset.range(8).batch(2)
per_device = {d: ds for d in strategy.extended.worker_devices}  # expect: TFP202
by_device = {d: ds.shard(2, i) for i, d in enumerate(strategy.extended.worker_devices)}
