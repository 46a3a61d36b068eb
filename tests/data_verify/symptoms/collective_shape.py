"""Crash symptom "Collective ops is aborted by: Shape mismatch in the collective instance" (TFP608): in
every step of the loop the chief alone also reduces its loss, so the two workers' collectives pair up
wrongly (the chief's scalar reduce meets the other worker's gradient all-reduce)."""
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
chief = strategy.cluster_resolver.task_id == 0
with strategy.scope():
    weights = tf.Variable(tf.zeros([5]))


@tf.function
def train_step():
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum((weights - 1.0) ** 2)
        grad = tape.gradient(loss, weights)
        tf.distribute.get_replica_context().all_reduce("SUM", grad)
        return loss

    return strategy.run(step)


for _ in range(3):
    loss = train_step()
    if chief:
        print("loss", float(strategy.reduce("SUM", loss, axis=None)))  # expect: TFP608
print("done", np.zeros(1))
