def tick(matrix):
    pass
