import tensorflow as tf

tf1 = tf.compat.v1
strategy = tf.distribute.MirroredStrategy()
n = strategy.num_replicas_in_sync
ds = tf.data.Dataset.range(16)
iters = []
for i in range(n):
    iters += [iter(ds.shard(n, i).batch(2))]
epochs = []
for _ in range(3):
    epochs.append(iter(ds))
it = tf1.data.make_one_shot_iterator(ds.batch(4))
for i in range(2):
    with tf.device("/gpu:%d" % i):
        tf.reduce_sum(it.get_next())
