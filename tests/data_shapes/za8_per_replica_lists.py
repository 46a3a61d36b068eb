import tensorflow as tf

tf1 = tf.compat.v1
strategy = tf.distribute.MirroredStrategy()
ds = tf.data.Dataset.range(16).batch(4)
iters = []
for _ in range(strategy.num_replicas_in_sync):
    iters += [iter(ds)]  # expect: TFP202
streams = []
for _ in strategy.extended.worker_devices:
    streams.append(iter(ds))  # expect: TFP202
batch = tf1.data.make_one_shot_iterator(ds).get_next()  # expect: TFP202
for i in range(2):
    with tf.device("/gpu:%d" % i):
        tf.reduce_sum(batch)
