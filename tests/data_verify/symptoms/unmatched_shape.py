"""A crash that is no distribution mistake's symptom: a shape bug in the replica function whose sizes (3
and 5) are not a batch and that batch times the replicas. The verdict stays COULD_NOT_RUN."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()


def step():
    return tf.ones([3]) + tf.ones([5])


strategy.run(step)
