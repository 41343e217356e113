def two_fer(name):
    pass
