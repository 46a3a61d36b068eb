import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(), loss="mse")
model2 = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # expect: TFP101
with strategy.scope():
    model2.compile(optimizer="sgd", loss="mse")
opt = tf.keras.optimizers.SGD()  # expect: TFP102
with strategy.scope():
    model3 = tf.keras.applications.ResNet50(weights=None)
    model3.compile(optimizer=opt, loss="mse")
resnet = tf.keras.applications.MobileNetV2(weights=None)  # expect: TFP101
with strategy.scope():
    resnet.compile(optimizer="adam", loss="mse")
