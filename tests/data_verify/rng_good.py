"""Per-replica random streams: a Generator created in scope, stateless op with replica id."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    gen = tf.random.Generator.from_seed(42)


@tf.function
def step(i):
    def replica_fn():
        rid = tf.distribute.get_replica_context().replica_id_in_sync_group
        a = gen.normal([4])
        b = tf.random.stateless_uniform([4], seed=tf.stack([i, tf.cast(rid, tf.int64)]))
        return a + b

    return strategy.run(replica_fn)


for i in range(3):
    step(tf.constant(i, tf.int64))
