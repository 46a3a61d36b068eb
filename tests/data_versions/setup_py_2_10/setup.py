from setuptools import setup

REQUIRED = ["numpy>=1.19", "tensorflow>=2.4,<2.11"]
setup(name="job", install_requires=REQUIRED)
