import tensorflow as tf

tf1 = tf.compat.v1
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    for i in range(2):
        with tf.device(f"/gpu:{i}"):  # expect: TFP107
            w = tf1.get_variable("w%d" % i, [2])
